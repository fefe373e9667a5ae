package tracker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"tugboat.dev/tugboat/agent/release"
	"tugboat.dev/tugboat/api/wire"
)

// fluxHR is a HelmRelease in flux-apps that installs the release "web" into
// apps (spec.targetNamespace, spec.releaseName) and stores it there
// (spec.storageNamespace), with conditions as helm-controller v1.6 sets them.
func fluxHR(rv string, suspend bool, conds ...metav1.Condition) *helmv2.HelmRelease {
	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-apps", Name: "web-hr", Generation: 2, ResourceVersion: rv}}
	hr.Spec.TargetNamespace, hr.Spec.StorageNamespace, hr.Spec.ReleaseName, hr.Spec.Suspend = "apps", "apps", "web", suspend
	hr.Status.ObservedGeneration, hr.Status.LastAttemptedRevision = 2, "1.1.0"
	hr.Status.Conditions = conds
	return hr
}

func condition(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: 2}
}

var (
	hrReady = condition(fluxmeta.ReadyCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason,
		"Helm install succeeded for release apps/web.v1 with chart web@1.1.0")
	hrFailed = condition(fluxmeta.ReadyCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason,
		"Helm upgrade failed for release apps/web with chart web@1.1.0: timed out waiting for the condition")
	hrStalled = condition(fluxmeta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded", "Failed to upgrade after 1 attempt(s)")
)

func stateOf(g Gomega, tr *Tracker, name string) wire.ReleaseState {
	snap, err := tr.Snapshot(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range snap.Releases {
		if s.Release == name {
			return s
		}
	}
	g.Expect(name).To(BeEmpty(), "release not in the snapshot")
	return wire.ReleaseState{}
}

func TestTracker_helmReleaseIsMatchedAndFoldedIntoHealth(t *testing.T) {
	g := NewWithT(t)
	sink := &recorder{}
	tr := New(Options{Spoke: "spoke-1", Settle: time.Millisecond}, sink,
		func(context.Context, release.Key) ([]*unstructured.Unstructured, error) { return nil, nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = tr.Start(ctx) }()

	// The HelmRelease is seen before its release, as at an agent's start.
	tr.ObserveHelmRelease(fluxHR("10", false, hrReady))
	// Another HelmRelease, storing its release elsewhere, is not it.
	other := fluxHR("11", false, hrStalled)
	other.Name, other.Spec.StorageNamespace = "elsewhere", "flux-apps"
	tr.ObserveHelmRelease(other)
	tr.ObserveStorage(releaseSecret("web", 1, "deployed", "uid-1"), false)
	tr.ObserveStorage(releaseSecret("plain", 1, "deployed", "uid-2"), false)

	g.Eventually(func(g Gomega) {
		s := stateOf(g, tr, "web")
		g.Expect(s.Health).To(Equal(wire.HealthCurrent))
		g.Expect(s.HelmRelease).To(Equal(&wire.HelmReleaseRef{Namespace: "flux-apps", Name: "web-hr"}))
		g.Expect(s.HelmReleaseStatus).To(Equal(&wire.HelmReleaseStatus{
			Ready: wire.ConditionTrue, Reason: "InstallSucceeded", Message: hrReady.Message,
			ObservedGeneration: 2, LastAttemptedRevision: "1.1.0",
		}))
		plain := stateOf(g, tr, "plain")
		g.Expect(plain.HelmRelease).To(BeNil())
		g.Expect(plain.HelmReleaseStatus).To(BeNil())
		g.Expect(plain.Health).To(Equal(wire.HealthCurrent))
	}).WithTimeout(5 * time.Second).Should(Succeed())

	// helm-controller gives up: the release is failed, whatever its
	// workloads say, and the hub hears it with the HelmRelease's words.
	tr.ObserveHelmRelease(fluxHR("12", false, hrFailed, hrStalled))
	wantReason := "HelmRelease flux-apps/web-hr is stalled (RetriesExceeded): Failed to upgrade after 1 attempt(s); " + hrFailed.Message
	g.Eventually(func(g Gomega) {
		s := stateOf(g, tr, "web")
		g.Expect(s.Health).To(Equal(wire.HealthFailed))
		g.Expect(s.HealthReason).To(Equal(wantReason))
		g.Expect(lastHealthEvent(sink, "web")).To(HaveField("State.HelmReleaseStatus.Stalled", BeTrue()))
	}).WithTimeout(5 * time.Second).Should(Succeed())
	failed := lastHealthEvent(sink, "web")
	g.Expect(failed.Type).To(Equal(wire.EventTypeWarning))
	g.Expect(failed.Message).To(Equal(wantReason))

	// Suspending it changes no health, yet the hub hears of it, in an
	// event of its own (not a redelivery of the last one).
	tr.ObserveHelmRelease(fluxHR("13", true, hrFailed, hrStalled))
	g.Eventually(func(g Gomega) {
		g.Expect(lastHealthEvent(sink, "web")).To(HaveField("State.HelmReleaseStatus.Suspended", BeTrue()))
	}).WithTimeout(5 * time.Second).Should(Succeed())
	g.Expect(lastHealthEvent(sink, "web").ID).NotTo(Equal(failed.ID))

	// Deleted: the release is plain Helm again.
	tr.ForgetHelmRelease(fluxHR("14", true))
	g.Eventually(func(g Gomega) {
		s := stateOf(g, tr, "web")
		g.Expect(s.HelmRelease).To(BeNil())
		g.Expect(s.Health).To(Equal(wire.HealthCurrent))
	}).WithTimeout(5 * time.Second).Should(Succeed())
}

// lastHealthEvent is the newest HealthChanged event of the release.
func lastHealthEvent(sink *recorder, name string) wire.Event {
	var last wire.Event
	for _, e := range sink.all() {
		if e.Kind == wire.EventHealthChanged && e.Release == name {
			last = e
		}
	}
	return last
}

// TestTracker_aHelmReleaseBeingDeletedLetsGoOfItsRelease deletes a
// HelmRelease as Kubernetes and helm-controller do: the deletion sets
// metadata.deletionTimestamp and bumps metadata.generation (so its last
// status, of the older generation, reads "reconciling"), then
// helm-controller uninstalls the release and removes its finalizer. The
// release stops carrying the HelmRelease at once, and its uninstall is
// reported without it: the hub keeps no status of a HelmRelease that is
// gone.
func TestTracker_aHelmReleaseBeingDeletedLetsGoOfItsRelease(t *testing.T) {
	g := NewWithT(t)
	sink := &recorder{}
	tr := New(Options{Spoke: "spoke-1", Settle: time.Millisecond}, sink,
		func(context.Context, release.Key) ([]*unstructured.Unstructured, error) { return nil, nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = tr.Start(ctx) }()

	tr.ObserveHelmRelease(fluxHR("10", false, hrReady))
	tr.ObserveStorage(releaseSecret("web", 1, "deployed", "uid-1"), false)
	g.Eventually(func(g Gomega) {
		g.Expect(lastHealthEvent(sink, "web")).To(HaveField("State.HelmRelease", Not(BeNil())))
	}).WithTimeout(5 * time.Second).Should(Succeed())

	deleting := fluxHR("11", false, hrReady)
	deleting.Generation, deleting.DeletionTimestamp = 3, &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{"finalizers.fluxcd.io"}
	tr.ObserveHelmRelease(deleting)
	g.Eventually(func(g Gomega) {
		s := stateOf(g, tr, "web")
		g.Expect(s.HelmRelease).To(BeNil())
		g.Expect(s.HelmReleaseStatus).To(BeNil())
		g.Expect(lastHealthEvent(sink, "web").State.HelmRelease).To(BeNil(), "the hub hears it")
	}).WithTimeout(5 * time.Second).Should(Succeed())

	// helm-controller uninstalls the release, then the HelmRelease is gone.
	tr.ForgetStorage(releaseSecret("web", 1, "deployed", "uid-1"))
	tr.ForgetHelmRelease(deleting)
	var uninstalled []wire.Event
	for _, e := range sink.all() {
		if e.State != nil && e.State.Status == wire.StatusUninstalled {
			uninstalled = append(uninstalled, e)
		}
	}
	g.Expect(uninstalled).To(HaveLen(1))
	g.Expect(uninstalled[0].State.HelmRelease).To(BeNil())
	g.Expect(uninstalled[0].State.HelmReleaseStatus).To(BeNil())
}

// TestTracker_followsHelmControllerThroughAFailedUpgrade replays the
// conditions helm-controller v1.6.2 writes on a HelmRelease (as its
// internal/controller reconcileRelease and internal/reconcile AtomicRelease
// write them, read from its source; remediation: one retry, then
// rollback): a routine reconcile, an upgrade that fails and is rolled back
// to retry, and the retry that fails and stalls. The routine reconcile is
// not heard of; the retry is in progress, with the failure's cause; the
// stall is Failed.
func TestTracker_followsHelmControllerThroughAFailedUpgrade(t *testing.T) {
	g := NewWithT(t)
	sink := &recorder{}
	tr := New(Options{Spoke: "spoke-1", Settle: time.Millisecond}, sink,
		func(context.Context, release.Key) ([]*unstructured.Unstructured, error) { return nil, nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = tr.Start(ctx) }()

	const (
		installed  = "Helm install succeeded for release apps/web.v1 with chart web@1.1.0"
		prereqs    = "Fulfilling prerequisites"
		running    = "Running 'upgrade' action with timeout of 5m0s"
		failed     = "Helm upgrade failed for release apps/web with chart web@1.2.0: context deadline exceeded"
		rolledBack = "Helm rollback to previous release apps/web.v1 with chart web@1.1.0 succeeded"
	)
	rv := 10
	write := func(generation, observed int64, attempted string, conds ...metav1.Condition) {
		rv++
		hr := fluxHR(fmt.Sprint(rv), false, conds...)
		hr.Generation, hr.Status.ObservedGeneration, hr.Status.LastAttemptedRevision = generation, observed, attempted
		hr.Status.History = helmv2.Snapshots{{Name: "web", Namespace: "apps", Version: 1, ChartName: "web", ChartVersion: "1.1.0", Status: "deployed"}}
		tr.ObserveHelmRelease(hr)
	}
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string, generation int64) metav1.Condition {
		c := condition(typ, status, reason, msg)
		c.ObservedGeneration = generation
		return c
	}
	ready := cond(fluxmeta.ReadyCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason, installed, 2)
	released := cond(helmv2.ReleasedCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason, installed, 2)
	health := func(g Gomega) (wire.Health, string) {
		s := stateOf(g, tr, "web")
		return s.Health, s.HealthReason
	}

	write(2, 2, "1.1.0", ready, released)
	tr.ObserveStorage(releaseSecret("web", 1, "deployed", "uid-1"), false)
	g.Eventually(func(g Gomega) {
		g.Expect(lastHealthEvent(sink, "web")).To(HaveField("State.Health", wire.HealthCurrent))
		g.Expect(lastHealthEvent(sink, "web")).To(HaveField("State.HelmReleaseStatus", Not(BeNil())))
	}).WithTimeout(5 * time.Second).Should(Succeed())

	// A routine reconcile, spec.interval after the last: Reconciling=True
	// for a while, then in sync. Nothing to hear.
	sent := len(sink.all())
	write(2, 2, "1.1.0", ready, released, cond(fluxmeta.ReconcilingCondition, metav1.ConditionTrue, fluxmeta.ProgressingReason, prereqs, 2))
	g.Consistently(func() []wire.Event { return sink.all()[sent:] }).WithTimeout(500 * time.Millisecond).Should(BeEmpty())
	write(2, 2, "1.1.0", ready, released)
	g.Consistently(func() []wire.Event { return sink.all()[sent:] }).WithTimeout(200 * time.Millisecond).Should(BeEmpty())

	// The version is set to 1.2.0 (generation 3): prerequisites, then the
	// upgrade runs.
	write(3, 2, "1.1.0", ready, released, cond(fluxmeta.ReconcilingCondition, metav1.ConditionTrue, fluxmeta.ProgressingReason, prereqs, 3))
	g.Eventually(func(g Gomega) wire.Health { h, _ := health(g); return h }).WithTimeout(5 * time.Second).Should(Equal(wire.HealthInProgress))
	write(3, 2, "1.2.0", released, cond(fluxmeta.ReconcilingCondition, metav1.ConditionTrue, fluxmeta.ProgressingReason, running, 3),
		cond(fluxmeta.ReadyCondition, metav1.ConditionUnknown, fluxmeta.ProgressingReason, running, 3))
	g.Eventually(func(g Gomega) string { _, r := health(g); return r }).WithTimeout(5 * time.Second).
		Should(Equal("HelmRelease flux-apps/web-hr is reconciling (Progressing): " + running))

	// It fails, rolls back, and will retry (ErrMustRequeue: Reconciling
	// stays, with Ready's message; observedGeneration is not written).
	write(3, 2, "1.2.0",
		cond(fluxmeta.ReadyCondition, metav1.ConditionFalse, helmv2.RollbackSucceededReason, rolledBack, 3),
		cond(helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason, failed, 3),
		cond(helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.RollbackSucceededReason, rolledBack, 3),
		cond(fluxmeta.ReconcilingCondition, metav1.ConditionTrue, "ProgressingWithRetry", rolledBack, 3))
	g.Eventually(func(g Gomega) {
		h, r := health(g)
		g.Expect(h).To(Equal(wire.HealthInProgress))
		g.Expect(r).To(Equal("HelmRelease flux-apps/web-hr is reconciling (RollbackSucceeded): " + failed + "; " + rolledBack))
	}).WithTimeout(5 * time.Second).Should(Succeed())

	// The retry fails too: rolled back again, out of retries, stalled
	// (a terminal error: observedGeneration is written).
	write(3, 3, "1.2.0",
		cond(fluxmeta.ReadyCondition, metav1.ConditionFalse, helmv2.RollbackSucceededReason, rolledBack, 3),
		cond(helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason, failed, 3),
		cond(helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.RollbackSucceededReason, rolledBack, 3),
		cond(fluxmeta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded", "Failed to upgrade after 2 attempt(s)", 3))
	g.Eventually(func(g Gomega) {
		h, r := health(g)
		g.Expect(h).To(Equal(wire.HealthFailed))
		g.Expect(r).To(Equal("HelmRelease flux-apps/web-hr is stalled (RetriesExceeded): Failed to upgrade after 2 attempt(s); " + failed + "; " + rolledBack))
	}).WithTimeout(5 * time.Second).Should(Succeed())
}

// capturedState is one state of a HelmRelease as the real helm-controller
// v1.6.2 wrote it (e2e TestHelmController_capture).
type capturedState struct {
	Step               string             `json:"step"`
	Generation         int64              `json:"generation"`
	DeletionTimestamp  *metav1.Time       `json:"deletionTimestamp,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration"`
	LastAttempted      string             `json:"lastAttemptedRevision,omitempty"`
	History            helmv2.Snapshots   `json:"history,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// TestTracker_replaysARealHelmController replays every state the real
// helm-controller v1.6.2 wrote on a HelmRelease (captured by the e2e test
// TestHelmController_capture: install, routine reconciles every 2 s, an
// upgrade failed, rolled back and retried, then stalled, and the
// deletion). The routine reconciles are not heard of at all; while
// helm-controller works or retries the release is InProgress, once it
// stalls Failed with the cause and the rollback; when the HelmRelease is
// being deleted the release no longer carries it.
func TestTracker_replaysARealHelmController(t *testing.T) {
	g := NewWithT(t)
	b, err := os.ReadFile("../../e2e/testdata/helm-controller-v1.6.2/conditions.jsonl")
	g.Expect(err).NotTo(HaveOccurred())
	var states []capturedState
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var s capturedState
		g.Expect(json.Unmarshal(line, &s)).To(Succeed())
		states = append(states, s)
	}
	sink := &recorder{}
	tr := New(Options{Spoke: "spoke-1", Settle: time.Millisecond}, sink,
		func(context.Context, release.Key) ([]*unstructured.Unstructured, error) { return nil, nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = tr.Start(ctx) }()
	tr.ObserveStorage(releaseSecret("web", 1, "deployed", "uid-1"), false)

	routine := 0
	for i, s := range states {
		hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: s.Generation,
			ResourceVersion: fmt.Sprint(100 + i), DeletionTimestamp: s.DeletionTimestamp}}
		hr.Spec.Interval = metav1.Duration{Duration: 2 * time.Second}
		hr.Status = helmv2.HelmReleaseStatus{ObservedGeneration: s.ObservedGeneration, LastAttemptedRevision: s.LastAttempted,
			History: s.History, Conditions: s.Conditions}
		if s.History.Latest() != nil {
			hr.Status.StorageNamespace = "apps"
		}
		if s.Step == "routine" {
			// What the state before says has been sent.
			g.Eventually(func(g Gomega) {
				want, last := stateOf(g, tr, "web"), lastHealthEvent(sink, "web")
				g.Expect(last.State).NotTo(BeNil())
				g.Expect(last.State.Health).To(Equal(want.Health))
				g.Expect(last.State.HelmReleaseStatus).To(Equal(want.HelmReleaseStatus))
			}).WithTimeout(5 * time.Second).Should(Succeed())
		}
		sent := len(sink.all())
		tr.ObserveHelmRelease(hr)
		ready := apimeta.FindStatusCondition(s.Conditions, fluxmeta.ReadyCondition)
		switch {
		case s.Step == "routine":
			routine++
			g.Consistently(func() []wire.Event { return sink.all()[sent:] }).WithTimeout(300*time.Millisecond).
				Should(BeEmpty(), "state %d (%s): a routine reconcile is not heard of", i, s.Step)
		case s.DeletionTimestamp != nil:
			g.Eventually(func(g Gomega) *wire.HelmReleaseRef { return stateOf(g, tr, "web").HelmRelease }).
				WithTimeout(5*time.Second).Should(BeNil(), "state %d (%s)", i, s.Step)
		case apimeta.IsStatusConditionTrue(s.Conditions, fluxmeta.StalledCondition):
			g.Eventually(func(g Gomega) {
				st := stateOf(g, tr, "web")
				g.Expect(st.Health).To(Equal(wire.HealthFailed))
				// The health reason (at most 512 characters) names the
				// cause; the HelmRelease's message, what it did then.
				g.Expect(st.HealthReason).To(MatchRegexp(`^HelmRelease apps/web is stalled \(RetriesExceeded\): Failed to upgrade after 2 attempt\(s\); ` +
					`Helm upgrade failed for release apps/web with chart web@1\.1\.0: .*web_Not_A_DNS_Name`))
				g.Expect(st.HelmReleaseStatus.Message).To(MatchRegexp(`^Failed to upgrade after 2 attempt\(s\); ` +
					`Helm upgrade failed for release apps/web with chart web@1\.1\.0: .*web_Not_A_DNS_Name.*; Helm rollback to previous release apps/web\.v3 with chart web@1\.0\.0 succeeded$`))
			}).WithTimeout(5*time.Second).Should(Succeed(), "state %d (%s)", i, s.Step)
		case ready == nil || ready.Status != metav1.ConditionTrue || s.ObservedGeneration != s.Generation ||
			s.History.Latest() == nil || s.History.Latest().ChartVersion != s.LastAttempted:
			if apimeta.IsStatusConditionTrue(s.Conditions, fluxmeta.ReconcilingCondition) || s.ObservedGeneration != s.Generation {
				g.Eventually(func(g Gomega) wire.Health { return stateOf(g, tr, "web").Health }).
					WithTimeout(5*time.Second).Should(Equal(wire.HealthInProgress), "state %d (%s)", i, s.Step)
			}
		default:
			g.Eventually(func(g Gomega) wire.Health { return stateOf(g, tr, "web").Health }).
				WithTimeout(5*time.Second).Should(Equal(wire.HealthCurrent), "state %d (%s)", i, s.Step)
		}
	}
	g.Expect(routine).To(BeNumerically(">=", 6), "the capture holds three routine reconciles at least")
}
