package e2e_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/agent"
	"tugboat.dev/tugboat/agent/admission"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/config"
	"tugboat.dev/tugboat/e2e/harness"
)

const (
	// hubWait bounds how long a change on the spoke takes to show on the hub.
	hubWait = 60 * time.Second
	poll    = 100 * time.Millisecond
)

// TestAgent_onARealSpoke runs the real agent on a harness spoke cluster,
// reporting to the real hub, and drives it with the Helm SDK. The subtests
// share the clusters (each uses its own namespace) and run in order: the
// webhook one stops the agent, the RBAC one starts another.
func TestAgent_onARealSpoke(t *testing.T) {
	hubCluster, spokes := startClusters(t, 1)
	spoke := spokes[0]
	f := newFleet(t, hubCluster)
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 0})

	// A release installed, and rolled out, before the agent starts: nothing
	// labels its objects then.
	newHelm(t, spoke, "early").install("early", "1.0.0")
	waitAvailable(t, spoke, "early", "early")
	g := NewWithT(t)
	for _, obj := range releaseObjects(g, spoke, "early", "early") {
		g.Expect(obj.GetLabels()).NotTo(HaveKey(tugboatv1alpha1.LabelRelease), "%T %s before the agent started", obj, obj.GetName())
	}

	stopAgent := f.addSpoke("spoke-a", spoke, log)

	t.Run("backfillsReleasesInstalledBeforeItStarted", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(f.current("spoke-a", "early", "early")).WithTimeout(hubWait).WithPolling(poll).
			Should(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
		// The agent reports the protocol it speaks: the hub does not mark it
		// outdated.
		g.Eventually(func(g Gomega) {
			var sp tugboatv1alpha1.Spoke
			g.Expect(f.hub.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "spoke-a"}, &sp)).To(Succeed())
			g.Expect(sp.Status.LastSeen).NotTo(BeNil(), "a heartbeat arrived")
			g.Expect(sp.Status.AgentProtocolVersion).To(Equal(int32(wire.ProtocolVersion)))
			g.Expect(apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.AgentOutdatedCondition.String())).To(BeNil())
		}).WithTimeout(hubWait).WithPolling(poll).Should(Succeed())
		g.Eventually(func(g Gomega) {
			objs := releaseObjects(g, spoke, "early", "early")
			kinds := map[string]int{}
			for _, obj := range objs {
				kinds[fmt.Sprintf("%T", obj)]++
				g.Expect(obj.GetLabels()).To(HaveKeyWithValue(tugboatv1alpha1.LabelRelease, "early"), "%T %s", obj, obj.GetName())
				g.Expect(obj.GetLabels()).To(HaveKeyWithValue(tugboatv1alpha1.LabelReleaseNamespace, "early"), "%T %s", obj, obj.GetName())
			}
			g.Expect(kinds).To(Equal(map[string]int{"*v1.Deployment": 1, "*v1.ReplicaSet": 1, "*v1.Pod": 2}))
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	})

	t.Run("recordsInstallUpgradeRollbackUninstallInOrder", func(t *testing.T) {
		g := NewWithT(t)
		helm := newHelm(t, spoke, "lifecycle")
		cur := f.current("spoke-a", "lifecycle", "web")
		f.logHistoryOnFailure(t, "spoke-a", "lifecycle", "web")

		helm.install("web", "1.0.0")
		g.Eventually(cur).WithTimeout(hubWait).WithPolling(poll).
			Should(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
		helm.upgrade("web", "1.1.0", nil)
		g.Eventually(cur).WithTimeout(hubWait).WithPolling(poll).
			Should(Equal(current{2, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
		helm.rollback("web", 1)
		g.Eventually(cur).WithTimeout(hubWait).WithPolling(poll).
			Should(Equal(current{3, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
		helm.uninstall("web")

		g.Eventually(func(g Gomega) {
			rh := f.history(g, "spoke-a", "lifecycle", "web")
			g.Expect(rh).NotTo(BeNil())
			g.Expect(rh.Status.Current.Status).To(Equal(tugboatv1alpha1.ReleaseStatusUninstalled))
			r1, r2, r3 := revisionOf(rh, 1), revisionOf(rh, 2), revisionOf(rh, 3)
			g.Expect(r1).NotTo(BeNil())
			g.Expect(r2).NotTo(BeNil())
			g.Expect(r3).NotTo(BeNil())
			g.Expect(inOrder(reasons(r1), "InstallStarted", "Deployed", "RolloutComplete", "Superseded")).To(Succeed())
			g.Expect(inOrder(reasons(r2), "UpgradeStarted", "Deployed", "RolloutComplete", "Superseded")).To(Succeed())
			g.Expect(inOrder(reasons(r3), "RollbackStarted", "Deployed", "RolloutComplete", "Uninstalling", "Uninstalled")).To(Succeed())
			for _, r := range []*tugboatv1alpha1.Revision{r1, r2, r3} {
				g.Expect(timesNonDecreasing(r)).To(Succeed())
			}
			// Across revisions, the milestones are in the order they happened.
			var milestones []*tugboatv1alpha1.ReleaseEvent
			for _, m := range []struct {
				r      *tugboatv1alpha1.Revision
				reason string
			}{
				{r1, "InstallStarted"}, {r1, "Deployed"}, {r1, "RolloutComplete"},
				{r2, "UpgradeStarted"}, {r2, "Deployed"}, {r2, "RolloutComplete"},
				{r3, "RollbackStarted"}, {r3, "Deployed"}, {r3, "RolloutComplete"},
				{r3, "Uninstalling"}, {r3, "Uninstalled"},
			} {
				milestones = append(milestones, eventWith(m.r, m.reason))
			}
			for i := 1; i < len(milestones); i++ {
				g.Expect(milestones[i].Time.Before(&milestones[i-1].Time)).To(BeFalse(),
					"%s at %s is before %s at %s", milestones[i].Reason, milestones[i].Time, milestones[i-1].Reason, milestones[i-1].Time)
			}
			g.Expect(eventWith(r1, "InstallStarted").Message).To(ContainSubstring("revision 1 (web 1.0.0) pending-install"))
			g.Expect(eventWith(r2, "UpgradeStarted").Message).To(ContainSubstring("revision 2 (web 1.1.0) pending-upgrade"))
			g.Expect(eventWith(r3, "RollbackStarted").Message).To(ContainSubstring("revision 3 (web 1.0.0) pending-rollback"))
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	})

	t.Run("reportsAFailedUpgradeAsFailed", func(t *testing.T) {
		g := NewWithT(t)
		helm := newHelm(t, spoke, "failing")
		cur := f.current("spoke-a", "failing", "web")
		f.logHistoryOnFailure(t, "spoke-a", "failing", "web")
		templates := map[string]string{"broken.yaml": brokenTemplate}
		ctx := context.Background()

		_, err := helm.tryInstall(ctx, "web", webChartWith(helm, "1.0.0", templates), map[string]any{"broken": false})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(cur).WithTimeout(hubWait).WithPolling(poll).
			Should(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

		// The API server rejects the rendered ConfigMap: Helm records
		// revision 2 as failed.
		_, err = helm.tryUpgrade(ctx, "web", webChartWith(helm, "1.1.0", templates), map[string]any{"broken": true})
		g.Expect(err).To(MatchError(ContainSubstring("web_Not_A_DNS_Name")))
		g.Eventually(cur).WithTimeout(hubWait).WithPolling(poll).
			Should(Equal(current{2, "1.1.0", tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthFailed}))

		g.Eventually(func(g Gomega) {
			rh := f.history(g, "spoke-a", "failing", "web")
			g.Expect(rh.Status.Current.HealthReason).To(ContainSubstring("web_Not_A_DNS_Name"))
			r2 := revisionOf(rh, 2)
			g.Expect(inOrder(reasons(r2), "UpgradeStarted", "Failed")).To(Succeed())
			g.Expect(eventWith(r2, "Failed").Type).To(Equal(tugboatv1alpha1.EventTypeWarning))
			g.Expect(apimeta.IsStatusConditionFalse(rh.Status.Conditions, "Ready")).To(BeTrue(), "conditions %v", rh.Status.Conditions)
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	})

	t.Run("reportsARolloutThatNeverBecomesReadyAsFailed", func(t *testing.T) {
		g := NewWithT(t)
		helm := newHelm(t, spoke, "stuck")
		cur := f.current("spoke-a", "stuck", "web")
		f.logHistoryOnFailure(t, "spoke-a", "stuck", "web")
		templates := map[string]string{"stuck.yaml": stuckTemplate}
		ctx := context.Background()

		_, err := helm.tryInstall(ctx, "web", webChartWith(helm, "1.0.0", templates), map[string]any{"stuck": false})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(cur).WithTimeout(hubWait).WithPolling(poll).
			Should(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

		// The upgrade itself succeeds (Helm does not wait), but the new
		// Deployment's Pods never become ready.
		_, err = helm.tryUpgrade(ctx, "web", webChartWith(helm, "1.1.0", templates), map[string]any{"stuck": true})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(cur).WithTimeout(hubWait).WithPolling(poll).
			Should(Equal(current{2, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed}))

		rh := f.history(g, "spoke-a", "stuck", "web")
		g.Expect(rh.Status.Current.HealthReason).To(ContainSubstring("Deployment stuck/web-stuck"))
		g.Expect(rh.Status.Current.HealthReason).To(MatchRegexp("(?i)progress deadline exceeded"))
		g.Eventually(func(g Gomega) {
			r2 := revisionOf(f.history(g, "spoke-a", "stuck", "web"), 2)
			g.Expect(inOrder(reasons(r2), "UpgradeStarted", "Deployed", "RolloutFailed")).To(Succeed())
			g.Expect(eventWith(r2, "RolloutFailed").Type).To(Equal(tugboatv1alpha1.EventTypeWarning))
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		// What the agent reported is what the spoke's API says.
		var d appsv1.Deployment
		g.Expect(spoke.Client.Get(ctx, client.ObjectKey{Namespace: "stuck", Name: "web-stuck"}, &d)).To(Succeed())
		g.Expect(d.Status.ReadyReplicas).To(BeZero())
		progressing := deploymentCondition(&d, appsv1.DeploymentProgressing)
		g.Expect(progressing).NotTo(BeNil())
		g.Expect(progressing.Reason).To(Equal("ProgressDeadlineExceeded"))
	})

	t.Run("losesNothingWhileTheHubIsDown", func(t *testing.T) {
		g := NewWithT(t)
		helm := newHelm(t, spoke, "outage")
		cur := f.current("spoke-a", "outage", "web")
		f.logHistoryOnFailure(t, "spoke-a", "outage", "web")

		helm.install("web", "1.0.0")
		g.Eventually(cur).WithTimeout(hubWait).WithPolling(poll).
			Should(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

		f.killHub()
		helm.upgrade("web", "1.1.0", nil)
		helm.rollback("web", 1)
		// The whole rollback rolls out while the hub is away.
		waitAvailable(t, spoke, "outage", "web")
		f.startHub()

		g.Eventually(cur).WithTimeout(hubWait).WithPolling(poll).
			Should(Equal(current{3, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
		g.Eventually(func(g Gomega) {
			rh := f.history(g, "spoke-a", "outage", "web")
			g.Expect(rh.Status.Revisions).To(HaveLen(3))
			r1, r2, r3 := revisionOf(rh, 1), revisionOf(rh, 2), revisionOf(rh, 3)
			g.Expect(r1.Status).To(Equal(tugboatv1alpha1.ReleaseStatusSuperseded))
			// Revision 2 lived only while the hub was down: the snapshot
			// never held it, the queued events did.
			g.Expect(r2.ChartVersion).To(Equal("1.1.0"))
			g.Expect(r2.Status).To(Equal(tugboatv1alpha1.ReleaseStatusSuperseded))
			g.Expect(inOrder(reasons(r2), "UpgradeStarted", "Deployed", "Superseded")).To(Succeed())
			g.Expect(inOrder(reasons(r3), "RollbackStarted", "Deployed", "RolloutComplete")).To(Succeed())
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	})

	t.Run("skipsCorruptReleaseRecordsAndKeepsServing", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		const ns = "corrupt"
		g.Expect(spoke.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		const decodeErrors = "tugboat_agent_release_decode_errors_total"
		before := counterValue(g, decodeErrors, nil)

		bomb := gzipped(t, make([]byte, 32<<20)) // 32 MiB of zeros; the agent stops at 16 MiB
		payloads := []struct {
			what string
			data []byte
		}{
			{"bad base64", []byte("this is not base64!")},
			{"bad gzip", b64(append([]byte{0x1f, 0x8b}, "not really a gzip stream"...))},
			{"gzip bomb", b64(bomb)},
			{"bad JSON", b64(gzipped(t, []byte(`{"name": "bad", "version": 1,`)))},
			{"wrong type", b64(gzipped(t, []byte(`{"name": "bad", "version": "seven", "chart": ["web"]}`)))},
		}
		for i, p := range payloads {
			g.Expect(spoke.Client.Create(ctx, releaseSecret(ns, fmt.Sprintf("sh.helm.release.v1.bad.v%d", i+1), p.data))).
				To(Succeed(), p.what)
		}
		g.Eventually(func(g Gomega) float64 { return counterValue(g, decodeErrors, nil) - before }).
			WithTimeout(20 * time.Second).WithPolling(poll).Should(BeNumerically(">=", len(payloads)))

		// The agent keeps serving: a real install still reaches the hub.
		helm := newHelm(t, spoke, ns)
		helm.install("web", "1.0.0")
		cur := f.current("spoke-a", ns, "web")
		g.Eventually(cur).WithTimeout(hubWait).WithPolling(poll).
			Should(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

		// A corrupt record of a release the hub knows is reported there as
		// a Warning. (Helm does not see it: it lacks Helm's name label.)
		g.Expect(spoke.Client.Create(ctx, releaseSecret(ns, "sh.helm.release.v1.web.v9", b64([]byte("{not json"))))).To(Succeed())
		g.Eventually(func(g Gomega) {
			rh := f.history(g, "spoke-a", ns, "web")
			e := eventWith(revisionOf(rh, 1), "DecodeFailed")
			g.Expect(e).NotTo(BeNil(), "revision 1 events: %v", reasons(revisionOf(rh, 1)))
			g.Expect(e.Type).To(Equal(tugboatv1alpha1.EventTypeWarning))
			g.Expect(e.Message).To(ContainSubstring("corrupt/sh.helm.release.v1.web.v9"))
		}).WithTimeout(hubWait).WithPolling(200 * time.Millisecond).Should(Succeed())
		g.Expect(cur(g)).To(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

		// The corrupt records of "bad" were skipped: no revision of it
		// reached the hub. (The hub keeps no event for a release without a
		// revision, so their DecodeFailed warnings are not recorded there.)
		if rh := f.history(g, "spoke-a", ns, "bad"); rh != nil {
			g.Expect(rh.Status.Revisions).To(BeEmpty())
			t.Logf("the hub holds ReleaseHistory %s without revisions (Ready %v)", rh.Name, apimeta.FindStatusCondition(rh.Status.Conditions, "Ready"))
		}
		g.Expect(counterValue(g, decodeErrors, nil) - before).To(BeNumerically(">=", len(payloads)+1))
	})

	t.Run("signsWithTheKeyFileAndFollowsItsChanges", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		const name = "spoke-b"
		right := f.registerSpoke(name)
		sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}
		raw := make([]byte, 32)
		_, _ = rand.Read(raw)
		wrong := []byte(hex.EncodeToString(raw)) // as the hub generates keys
		g.Expect(wrong).NotTo(Equal(right))
		keyFile := filepath.Join(t.TempDir(), "key")
		g.Expect(os.WriteFile(keyFile, wrong, 0o600)).To(Succeed())

		// A second agent on the same spoke cluster, without webhooks or
		// backfill (spoke-a's agent does those).
		_, stop := f.agentWith(name, f.agentConfig(spoke), keyFile, log, func(o *agent.Options) {
			o.Webhook.Disabled, o.Backfill = true, false
		})
		defer stop()

		// The hub answers, and refuses the signature.
		rejected := func(g Gomega) float64 {
			match := map[string]string{"spoke": name, "code": "401"}
			return counterValue(g, "tugboat_agent_reporter_batches_total", match) +
				counterValue(g, "tugboat_agent_reporter_state_posts_total", match)
		}
		g.Eventually(rejected).WithTimeout(20 * time.Second).WithPolling(poll).Should(BeNumerically(">=", 2))
		var histories tugboatv1alpha1.ReleaseHistoryList
		g.Expect(hubCluster.Client.List(ctx, &histories, client.InNamespace(f.ns),
			client.MatchingLabels{tugboatv1alpha1.LabelSpoke: name})).To(Succeed())
		g.Expect(histories.Items).To(BeEmpty())
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(sp.Status.Conditions, "Ready")).To(BeFalse())
		g.Expect(sp.Status.LastSeen).To(BeNil())

		// The right key, swapped in the way a Secret volume update is (a
		// new file renamed over the old): the reporter re-reads it. With a
		// trailing newline, which the hub ignores too.
		tmp := keyFile + ".new"
		g.Expect(os.WriteFile(tmp, append(append([]byte{}, right...), '\n'), 0o600)).To(Succeed())
		g.Expect(os.Rename(tmp, keyFile)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(sp.Status.Conditions, "Ready")).To(BeTrue())
			g.Expect(f.current(name, "early", "early")(g)).
				To(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
		}).WithTimeout(hubWait).WithPolling(200 * time.Millisecond).Should(Succeed())
	})

	// It stops spoke-a's agent.
	t.Run("neverBlocksAHelmInstallWhenTheWebhookIsUnreachable", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		webhookName := "tugboat-agent-spoke-a"
		g.Eventually(func() error {
			return spoke.Client.Get(ctx, client.ObjectKey{Name: webhookName}, &admissionregistrationv1.MutatingWebhookConfiguration{})
		}).WithTimeout(hubWait).WithPolling(poll).Should(Succeed())

		// A clean stop takes the registration away; put it back, pointing
		// at a port nothing listens on, as after a crash.
		stopAgent()
		g.Expect(spoke.Client.Get(ctx, client.ObjectKey{Name: webhookName}, &admissionregistrationv1.MutatingWebhookConfiguration{})).
			NotTo(Succeed())
		reg := admission.Registration{Name: webhookName, URL: "https://" + closedAddr(t), AgentNamespace: "tugboat-system"}
		g.Expect(reg.Apply(ctx, spoke.Client)).To(Succeed())
		t.Cleanup(func() { _ = reg.Delete(context.Background(), spoke.Client) })
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		g.Expect(spoke.Client.Get(ctx, client.ObjectKey{Name: webhookName}, &mwc)).To(Succeed())
		g.Expect(*mwc.Webhooks[0].ClientConfig.URL).To(HavePrefix(reg.URL))

		helm := newHelm(t, spoke, "nowebhook")
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		start := time.Now()
		rel, err := helm.tryInstall(ictx, "web", loadChart(t, "1.0.0"), nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rel.Info.Status.String()).To(Equal("deployed"))
		t.Logf("helm install with an unreachable webhook took %s", time.Since(start))
		// The controllers' writes (ReplicaSet, Pods) get through too.
		waitAvailable(t, spoke, "nowebhook", "web")
		// The webhook really was out of the way: nothing got labeled.
		for _, obj := range releaseObjects(g, spoke, "nowebhook", "web") {
			g.Expect(obj.GetLabels()).NotTo(HaveKey(tugboatv1alpha1.LabelRelease), "%T %s", obj, obj.GetName())
		}
	})

	// Webhooks fail open: what they miss while the agent runs is labeled by
	// the next backfill pass, not only at the next start.
	t.Run("backfillsPeriodicallyWhatTheWebhooksMissed", func(t *testing.T) {
		g := NewWithT(t)
		const name, ns = "spoke-periodic", "periodic"
		keyFile := filepath.Join(t.TempDir(), "key")
		g.Expect(os.WriteFile(keyFile, f.registerSpoke(name), 0o600)).To(Succeed())
		passes := func(g Gomega) float64 {
			return counterValue(g, "tugboat_agent_backfill_passes_total", map[string]string{"result": "ok"})
		}
		before := passes(g)
		_, stop := f.agentWith(name, f.agentConfig(spoke), keyFile, log, func(o *agent.Options) {
			o.Webhook.Disabled = true
			o.WatchNamespaces = []string{ns}
			o.BackfillInterval = time.Second
		})
		defer stop()
		// The first pass, at start, found nothing to label.
		g.Eventually(passes).WithTimeout(hubWait).WithPolling(poll).Should(BeNumerically(">", before))

		// No webhook is registered at all now: the install's objects are
		// written unlabeled, and a later pass labels them.
		newHelm(t, spoke, ns).install("web", "1.0.0")
		g.Eventually(func(g Gomega) {
			objs := releaseObjects(g, spoke, ns, "web")
			g.Expect(objs).To(HaveLen(4)) // Deployment, ReplicaSet, 2 Pods
			for _, obj := range objs {
				g.Expect(obj.GetLabels()).To(HaveKeyWithValue(tugboatv1alpha1.LabelRelease, "web"), "%T %s", obj, obj.GetName())
				g.Expect(obj.GetLabels()).To(HaveKeyWithValue(tugboatv1alpha1.LabelReleaseNamespace, ns), "%T %s", obj, obj.GetName())
			}
		}).WithTimeout(hubWait).WithPolling(200 * time.Millisecond).Should(Succeed())
		g.Expect(passes(g)).To(BeNumerically(">=", before+2))
		g.Expect(counterValue(g, "tugboat_agent_backfill_labeled_total", nil)).To(BeNumerically(">=", 4))
		// And the agent tracks them: the release is healthy on the hub.
		g.Eventually(f.current(name, ns, "web")).WithTimeout(hubWait).WithPolling(poll).
			Should(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
	})

	// After the unreachable webhook: it backfills the release installed
	// then.
	t.Run("runsWithTheGeneratedRBAC", func(t *testing.T) {
		runsWithTheGeneratedRBAC(t, f, spoke, "nowebhook")
	})
}

// runsWithTheGeneratedRBAC installs the agent's chart on the spoke (its
// ServiceAccount, generated ClusterRole and Role, the backfill's role, the
// webhook configurations and the empty certificate Secret) and starts an
// agent as that ServiceAccount (through impersonation), so that a missing
// permission fails the test: it must sync its informers, keep its webhook
// certificate in the chart's Secret (--webhook-cert-rotation) and inject its
// CA, label objects through the webhook and through the backfill, and
// report to the hub. unlabeled names a release whose objects nothing
// labeled yet.
func runsWithTheGeneratedRBAC(t *testing.T, f *fleet, spoke *harness.Cluster, unlabeled string) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns, sa, name = "tugboat-system", "tugboat-agent", "spoke-rbac"
	installAgentChart(t, spoke, name)
	certSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tugboat-agent-webhook-tls"}}
	g.Expect(spoke.Client.Get(ctx, client.ObjectKeyFromObject(certSecret), certSecret)).To(Succeed(), "the chart's empty Secret for the rotator")

	certDir := t.TempDir()
	cfg := rest.CopyConfig(spoke.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	// The identity really is that narrow: it cannot read Nodes.
	limited, err := client.New(cfg, client.Options{Scheme: spoke.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apierrors.IsForbidden(limited.List(ctx, &corev1.NodeList{}))).To(BeTrue())

	keyFile := filepath.Join(t.TempDir(), "key")
	g.Expect(os.WriteFile(keyFile, f.registerSpoke(name), 0o600)).To(Succeed())
	// As the chart deploys it: the agent serves the webhooks of the chart
	// and does not register them itself.
	const webhookName = "tugboat-agent"
	probes := closedAddr(t)
	a, stop := f.agentWith(name, cfg, keyFile, testr.New(t), func(o *agent.Options) {
		o.Webhook.Name = webhookName
		o.Webhook.Register = false
		o.Webhook.CertRotation = true
		o.Webhook.CertDir = certDir
		o.Webhook.URLHost = "localhost" // a DNS name: the rotator issues no IP addresses
		o.HealthProbeBindAddress = probes
	})
	defer stop()
	pointWebhooksAt(t, spoke, a)

	// Until the certificate Secret is mounted, the webhook server does not
	// serve and the agent is not Ready (so a Service would send admission
	// calls nowhere, and they fail open at once).
	readyz := func(g Gomega) string {
		resp, err := http.Get("http://" + probes + "/readyz?verbose")
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		return fmt.Sprintf("%d %s", resp.StatusCode, body)
	}
	g.Eventually(readyz).WithTimeout(hubWait).WithPolling(200 * time.Millisecond).Should(And(
		HavePrefix("500"), ContainSubstring("[+]informers ok"), ContainSubstring("[-]webhook failed")))
	mountSecret(t, spoke, client.ObjectKeyFromObject(certSecret), certDir)
	// cert-controller looks for the mounted files with an exponential
	// backoff (1 s, doubling, with jitter) that started with the agent:
	// its next look may be a minute away on a loaded machine.
	g.Eventually(readyz).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(HavePrefix("200"))

	// Backfill: the objects of a release installed while no webhook ran.
	g.Eventually(func(g Gomega) {
		for _, obj := range releaseObjects(g, spoke, unlabeled, "web") {
			g.Expect(obj.GetLabels()).To(HaveKeyWithValue(tugboatv1alpha1.LabelRelease, "web"), "%T %s", obj, obj.GetName())
		}
	}).WithTimeout(hubWait).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Eventually(f.current(name, unlabeled, "web")).WithTimeout(hubWait).WithPolling(poll).
		Should(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

	// Webhooks: registered with the rotator's CA, and labeling a new
	// release's objects (so the API server trusted the rotated
	// certificate).
	g.Eventually(func(g Gomega) {
		g.Expect(spoke.Client.Get(ctx, client.ObjectKeyFromObject(certSecret), certSecret)).To(Succeed())
		g.Expect(certSecret.Data).To(HaveKey("ca.crt"))
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		g.Expect(spoke.Client.Get(ctx, client.ObjectKey{Name: webhookName}, &mwc)).To(Succeed())
		g.Expect(spoke.Client.Get(ctx, client.ObjectKey{Name: webhookName}, &vwc)).To(Succeed())
		for _, w := range mwc.Webhooks {
			g.Expect(w.ClientConfig.CABundle).To(Equal(certSecret.Data["ca.crt"]))
			g.Expect(*w.ClientConfig.URL).To(HavePrefix("https://localhost:"))
		}
		for _, w := range vwc.Webhooks {
			g.Expect(w.ClientConfig.CABundle).To(Equal(certSecret.Data["ca.crt"]))
		}
	}).WithTimeout(hubWait).WithPolling(200 * time.Millisecond).Should(Succeed())
	newHelm(t, spoke, "rbac").install("web", "1.0.0")
	g.Eventually(f.current(name, "rbac", "web")).WithTimeout(hubWait).WithPolling(poll).
		Should(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
	for _, obj := range releaseObjects(g, spoke, "rbac", "web") {
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue(tugboatv1alpha1.LabelRelease, "web"), "%T %s", obj, obj.GetName())
	}

	// The manifests are not the agent's: a clean stop leaves them.
	stop()
	g.Expect(spoke.Client.Get(ctx, client.ObjectKey{Name: webhookName}, &admissionregistrationv1.MutatingWebhookConfiguration{})).To(Succeed())
}

// installAgentChart applies the objects of the agent's chart to c, as
// rendered for spoke (release namespace tugboat-system), webhook
// configurations included, with no agent Pod (replicas 0): the test runs the
// agent in-process as the chart's ServiceAccount. Applied as objects rather
// than a Helm release, so that the fleet's agentConfig can apply the same
// objects (the Helm release path is tested by config and `tugboat install`).
// The webhook configurations are deleted when the test ends.
func installAgentChart(t *testing.T, c *harness.Cluster, spoke string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	objs, err := config.Render(config.AgentChart, "tugboat-system", map[string]any{
		"spoke": spoke, "hub": map[string]any{"url": "https://hub.invalid"}, "replicas": 0,
	})
	g.Expect(err).NotTo(HaveOccurred())
	err = c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tugboat-system"}})
	g.Expect(err == nil || apierrors.IsAlreadyExists(err)).To(BeTrue(), "%v", err)
	for _, o := range objs {
		g.Expect(c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("e2e"), client.ForceOwnership)).To(Succeed(),
			"applying %s %s of the agent chart", o.GetKind(), o.GetName())
		if strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
			t.Cleanup(func() { _ = c.Client.Delete(context.Background(), o) })
		}
	}
}

// pointWebhooksAt points the chart's webhook configurations at a's webhook
// server by URL instead of through the Service: the harness runs no Service
// network (the only change; rules, selectors and policies are the chart's).
func pointWebhooksAt(t *testing.T, c *harness.Cluster, a *agent.Agent) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Eventually(a.Webhooks.Addr).WithTimeout(hubWait).ShouldNot(BeNil())
	_, port, err := net.SplitHostPort(a.Webhooks.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	url := func(cc *admissionregistrationv1.WebhookClientConfig) {
		g.Expect(cc.Service).NotTo(BeNil())
		u := "https://localhost:" + port + *cc.Service.Path
		cc.Service, cc.URL = nil, &u
	}
	// The agent's rotator may inject its CA at the same time: retry on a
	// conflict.
	g.Eventually(func() error {
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := c.Client.Get(ctx, client.ObjectKey{Name: "tugboat-agent"}, &mwc); err != nil {
			return err
		}
		for i := range mwc.Webhooks {
			if mwc.Webhooks[i].ClientConfig.Service != nil {
				url(&mwc.Webhooks[i].ClientConfig)
			}
		}
		return c.Client.Update(ctx, &mwc)
	}).WithTimeout(hubWait).Should(Succeed())
	g.Eventually(func() error {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := c.Client.Get(ctx, client.ObjectKey{Name: "tugboat-agent"}, &vwc); err != nil {
			return err
		}
		for i := range vwc.Webhooks {
			if vwc.Webhooks[i].ClientConfig.Service != nil {
				url(&vwc.Webhooks[i].ClientConfig)
			}
		}
		return c.Client.Update(ctx, &vwc)
	}).WithTimeout(hubWait).Should(Succeed())
}

// waitAvailable waits until the Deployment has rolled out: every replica
// updated and available.
func waitAvailable(t *testing.T, c *harness.Cluster, namespace, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(c.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &d)).To(Succeed())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		want := *d.Spec.Replicas
		g.Expect(d.Status.Replicas).To(Equal(want))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(want))
		g.Expect(d.Status.AvailableReplicas).To(Equal(want))
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// releaseObjects returns, from the spoke's API, the Deployment name in
// namespace (the web chart names it after the release), and the ReplicaSets
// and Pods of the release.
func releaseObjects(g Gomega, c *harness.Cluster, namespace, name string) []client.Object {
	ctx := context.Background()
	var d appsv1.Deployment
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &d)).To(Succeed())
	out := []client.Object{&d}
	sel := client.MatchingLabels{"app.kubernetes.io/instance": name}
	var rss appsv1.ReplicaSetList
	g.Expect(c.Client.List(ctx, &rss, client.InNamespace(namespace), sel)).To(Succeed())
	g.Expect(rss.Items).NotTo(BeEmpty())
	for i := range rss.Items {
		out = append(out, &rss.Items[i])
	}
	var pods corev1.PodList
	g.Expect(c.Client.List(ctx, &pods, client.InNamespace(namespace), sel)).To(Succeed())
	g.Expect(pods.Items).NotTo(BeEmpty())
	for i := range pods.Items {
		out = append(out, &pods.Items[i])
	}
	return out
}

func deploymentCondition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == typ {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// releaseSecret is a Helm release storage Secret holding data.
func releaseSecret(namespace, name string, data []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"owner": "helm"}},
		Type:       "helm.sh/release.v1",
		Data:       map[string][]byte{"release": data},
	}
}

func b64(b []byte) []byte { return []byte(base64.StdEncoding.EncodeToString(b)) }

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
