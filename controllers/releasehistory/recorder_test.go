package releasehistory_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/controllers/releasehistory"
	"tugboat.dev/tugboat/controllers/spoke"
	"tugboat.dev/tugboat/e2e/harness"
)

var (
	hub      *harness.Cluster
	recorder *releasehistory.Recorder
	manager  ctrl.Manager
)

// TestMain starts one real hub cluster (with the garbage collector, for
// owner-reference cleanup) and the hub's recorder and Spoke controller.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	hub, err = harness.Start(ctx, harness.Options{Name: "hub", TugboatCRDs: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = hub.Stop() }()
	mgr, err := ctrl.NewManager(hub.RESTConfig, ctrl.Options{
		Scheme:  harness.DefaultScheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	manager = mgr
	opts := releasehistory.NewOptions()
	opts.WriteInterval = 200 * time.Millisecond
	// Below the Spoke controller's 2 s heartbeat timeout (set below), as
	// --spoke-heartbeat-refresh must be below --spoke-heartbeat-timeout.
	opts.HeartbeatRefresh = heartbeatRefresh
	recorder = releasehistory.NewRecorder(mgr.GetClient(), mgr.GetAPIReader(), opts)
	if err := recorder.SetupWithManager(ctx, mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&spoke.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Options: spoke.Options{HeartbeatTimeout: 2 * time.Second},
	}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "hub cluster logs: %s\n", hub.LogDir)
		_ = hub.StopKeepLogs()
	}
	return code
}

func newSpoke(t *testing.T, g Gomega, name string) *tugboatv1alpha1.Spoke {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet-" + name}}
	g.Expect(hub.Client.Create(ctx, ns)).To(Succeed())
	sp := &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}},
	}
	g.Expect(hub.Client.Create(ctx, sp)).To(Succeed())
	// Until the recorder's cache sees the Spoke, it is unknown.
	g.Eventually(func() error {
		_, err := recorder.SpokeKeys(ctx, name)
		return err
	}).WithTimeout(10 * time.Second).Should(Succeed())
	return sp
}

func snapshot(spokeName string, releases ...wire.ReleaseState) *wire.StateSnapshot {
	return &wire.StateSnapshot{Spoke: spokeName, AgentVersion: "v0.1.0-test", KubernetesVersion: "v1.36.3", TakenAt: time.Now(), Releases: releases}
}

func releaseState(rev int, version string, status wire.ReleaseStatus, health wire.Health) wire.ReleaseState {
	return wire.ReleaseState{Namespace: "apps", Release: "web", Chart: "web", ChartVersion: version, Revision: rev, Status: status, Health: health}
}

func releaseEvent(spokeName string, s wire.ReleaseState, seq int64, reason string) wire.Event {
	e := wire.Event{
		Spoke: spokeName, Namespace: s.Namespace, Release: s.Release, Revision: s.Revision, Kind: wire.EventReleaseStatus,
		Type: wire.EventTypeNormal, Reason: reason, Message: reason, Time: time.Now(), Sequence: seq, State: &s,
	}
	e.ID = e.ComputeID()
	return e
}

func getHistory(g Gomega, sp *tugboatv1alpha1.Spoke, release string) *tugboatv1alpha1.ReleaseHistory {
	rh := &tugboatv1alpha1.ReleaseHistory{}
	g.Expect(hub.Client.Get(context.Background(), client.ObjectKey{
		Namespace: sp.Namespace, Name: tugboatv1alpha1.ReleaseHistoryName(sp.Name, "apps", release),
	}, rh)).To(Succeed())
	return rh
}

func TestSpoke_generatesKeyAndTracksHeartbeats(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sp := newSpoke(t, g, "hb")

	var secret corev1.Secret
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: sp.Namespace, Name: "hb-key"}, &secret)).To(Succeed())
	g.Expect(secret.Data[tugboatv1alpha1.SpokeKeySecretKey]).To(HaveLen(64), "32 random bytes, hex")
	g.Expect(secret.OwnerReferences).To(HaveLen(1))
	keys, err := recorder.SpokeKeys(ctx, "hb")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys.Current).To(Equal(secret.Data[tugboatv1alpha1.SpokeKeySecretKey]))

	readyStatus := func() metav1.ConditionStatus {
		var got tugboatv1alpha1.Spoke
		g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(sp), &got)).To(Succeed())
		c := apimeta.FindStatusCondition(got.Status.Conditions, "Ready")
		if c == nil {
			return ""
		}
		return c.Status
	}
	g.Eventually(readyStatus).WithTimeout(10 * time.Second).Should(Equal(metav1.ConditionUnknown))

	g.Expect(recorder.RecordState(ctx, ingest.Spoke{Name: "hb"}, snapshot("hb"))).To(Succeed())
	g.Eventually(readyStatus).WithTimeout(10 * time.Second).Should(Equal(metav1.ConditionTrue))
	var got tugboatv1alpha1.Spoke
	g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(sp), &got)).To(Succeed())
	g.Expect(got.Status.AgentVersion).To(Equal("v0.1.0-test"))
	g.Expect(got.Status.KubernetesVersion).To(Equal("v1.36.3"))

	// Heartbeats stop: after the 2s timeout Ready turns Unknown.
	g.Eventually(readyStatus).WithTimeout(10 * time.Second).Should(Equal(metav1.ConditionUnknown))
	// They resume.
	g.Expect(recorder.RecordState(ctx, ingest.Spoke{Name: "hb"}, snapshot("hb"))).To(Succeed())
	g.Eventually(readyStatus).WithTimeout(10 * time.Second).Should(Equal(metav1.ConditionTrue))
}

func TestRecorder_unknownAndDuplicateSpokes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// Run alone, the test may come before the recorder's writers started.
	g.Eventually(recorder.Ready).WithTimeout(10 * time.Second).Should(Succeed())
	_, err := recorder.SpokeKeys(ctx, "nobody")
	g.Expect(err).To(MatchError(ingest.ErrUnknownSpoke))
	g.Expect(recorder.RecordState(ctx, ingest.Spoke{Name: "nobody"}, snapshot("nobody"))).To(MatchError(ingest.ErrUnknownSpoke))

	sp := newSpoke(t, g, "twin")
	ns2 := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other-twin"}}
	g.Expect(hub.Client.Create(ctx, ns2)).To(Succeed())
	dup := &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns2.Name, Name: "twin"},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: "k"}},
	}
	g.Expect(hub.Client.Create(ctx, dup)).To(Succeed())
	g.Eventually(func() error {
		return recorder.RecordState(ctx, ingest.Spoke{Name: "twin"}, snapshot("twin"))
	}).WithTimeout(10 * time.Second).Should(MatchError(ingest.ErrUnknownSpoke))
	// Named with its namespace, as the receiver names the Spoke it
	// authenticated, each is recorded into, with the key id it was given.
	for _, o := range []*tugboatv1alpha1.Spoke{sp, dup} {
		id := map[string]string{sp.Namespace: "00112233aabbccdd", dup.Namespace: "ffeeddccbbaa9988"}[o.Namespace]
		g.Expect(recorder.RecordState(ctx, ingest.Spoke{Namespace: o.Namespace, Name: "twin", KeyID: id}, snapshot("twin"))).To(Succeed())
		var got tugboatv1alpha1.Spoke
		g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(o), &got)).To(Succeed())
		g.Expect(got.Status.SigningKeyID).To(Equal(id))
		g.Expect(got.Status.LastSeen).NotTo(BeNil())
	}
	g.Expect(recorder.RecordState(ctx, ingest.Spoke{Namespace: "no-such-namespace", Name: "twin"}, snapshot("twin"))).To(MatchError(ingest.ErrUnknownSpoke))

	// The Spoke controller stalls the newer of the two (created within one
	// second here, so either may be), never both.
	g.Eventually(func() []string {
		var reasons []string
		for _, o := range []*tugboatv1alpha1.Spoke{sp, dup} {
			var got tugboatv1alpha1.Spoke
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(o), &got)).To(Succeed())
			if c := apimeta.FindStatusCondition(got.Status.Conditions, "Stalled"); c != nil {
				reasons = append(reasons, c.Reason)
			}
		}
		return reasons
	}).WithTimeout(10 * time.Second).Should(Equal([]string{"DuplicateName"}))
}

func TestRecorder_installUpgradeRollbackUninstall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sp := newSpoke(t, g, "life")

	install := releaseState(1, "1.0.0", wire.StatusDeployed, wire.HealthCurrent)
	g.Expect(recorder.RecordEvents(ctx, ingest.Spoke{Name: "life"}, []wire.Event{releaseEvent("life", install, 1, "InstallSucceeded")})).To(Succeed())
	rh := getHistory(g, sp, "web")
	g.Expect(rh.Spec).To(Equal(tugboatv1alpha1.ReleaseHistorySpec{Spoke: "life", Namespace: "apps", Release: "web"}))
	g.Expect(rh.Labels).To(HaveKeyWithValue(tugboatv1alpha1.LabelSpoke, "life"))
	g.Expect(rh.Status.Current.ChartVersion).To(Equal("1.0.0"))
	g.Expect(apimeta.IsStatusConditionTrue(rh.Status.Conditions, "Ready")).To(BeTrue())

	upgrade := releaseState(2, "1.1.0", wire.StatusDeployed, wire.HealthInProgress)
	superseded := releaseState(1, "1.0.0", wire.StatusSuperseded, wire.HealthCurrent)
	g.Expect(recorder.RecordEvents(ctx, ingest.Spoke{Name: "life"}, []wire.Event{
		releaseEvent("life", upgrade, 1, "UpgradeStarted"), releaseEvent("life", superseded, 2, "Superseded"),
	})).To(Succeed())
	rollback := releaseState(3, "1.0.0", wire.StatusDeployed, wire.HealthCurrent)
	g.Expect(recorder.RecordEvents(ctx, ingest.Spoke{Name: "life"}, []wire.Event{releaseEvent("life", rollback, 1, "RollbackSucceeded")})).To(Succeed())

	rh = getHistory(g, sp, "web")
	g.Expect(rh.Status.Current.Revision).To(Equal(int32(3)))
	g.Expect(rh.Status.Current.ChartVersion).To(Equal("1.0.0"))
	g.Expect(rh.Status.Revisions).To(HaveLen(3))
	g.Expect(rh.Status.Revisions[1].ChartVersion).To(Equal("1.1.0"))
	g.Expect(rh.Status.Revisions[2].Status).To(Equal(tugboatv1alpha1.ReleaseStatusSuperseded))
	g.Expect(rh.Status.Revisions[0].Events).To(HaveLen(1))
	g.Expect(rh.Status.Revisions[0].Events[0].Reason).To(Equal("RollbackSucceeded"))

	// A snapshot without web but with a new release: web is uninstalled,
	// api is created.
	api := wire.ReleaseState{Namespace: "apps", Release: "api", Chart: "api", ChartVersion: "2.0.0", Revision: 1,
		Status: wire.StatusDeployed, Health: wire.HealthCurrent}
	g.Expect(recorder.RecordState(ctx, ingest.Spoke{Name: "life"}, snapshot("life", api))).To(Succeed())
	rh = getHistory(g, sp, "web")
	g.Expect(rh.Status.Current.Status).To(Equal(tugboatv1alpha1.ReleaseStatusUninstalled))
	g.Expect(getHistory(g, sp, "api").Status.Current.ChartVersion).To(Equal("2.0.0"))

	// Deleting the Spoke removes its histories (owner references, GC).
	g.Expect(hub.Client.Delete(ctx, sp)).To(Succeed())
	g.Eventually(func() int {
		var list tugboatv1alpha1.ReleaseHistoryList
		g.Expect(hub.Client.List(ctx, &list, client.InNamespace(sp.Namespace))).To(Succeed())
		return len(list.Items)
	}).WithTimeout(90 * time.Second).Should(BeZero()) // the garbage collector learns new CRDs on a 30 s discovery resync
}

func TestRecorder_coalescesWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sp := newSpoke(t, g, "busy")
	base := releaseState(1, "1.0.0", wire.StatusDeployed, wire.HealthInProgress)
	g.Expect(recorder.RecordEvents(ctx, ingest.Spoke{Name: "busy"}, []wire.Event{releaseEvent("busy", base, 0, "Installed")})).To(Succeed())

	var list tugboatv1alpha1.ReleaseHistoryList
	wc, err := client.NewWithWatch(hub.RESTConfig, client.Options{Scheme: harness.DefaultScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &list, client.InNamespace(sp.Namespace))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	modified := 0
	done := make(chan struct{})
	var mu sync.Mutex
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Modified {
				mu.Lock()
				modified++
				mu.Unlock()
			}
		}
	}()

	const senders, perSender = 10, 20
	var wg sync.WaitGroup
	errs := make(chan error, senders*perSender)
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perSender; i++ {
				e := wire.Event{Spoke: "busy", Namespace: "apps", Release: "web", Revision: 1, Kind: wire.EventObjectUpdated,
					Type: wire.EventTypeNormal, Reason: fmt.Sprintf("R%d", s), Message: fmt.Sprintf("event %d/%d", s, i),
					Object: &wire.ObjectRef{Kind: "Pod", Namespace: "apps", Name: fmt.Sprintf("web-%d", s), UID: fmt.Sprintf("uid-%d", s)},
					Time:   time.Now(), Sequence: int64(i)}
				e.ID = e.ComputeID()
				errs <- recorder.RecordEvents(ctx, ingest.Spoke{Name: "busy"}, []wire.Event{e})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	rh := getHistory(g, sp, "web")
	g.Expect(rh.Status.Revisions[0].Events).To(HaveLen(tugboatv1alpha1.MaxEventsPerRevision), "bounded")
	w.Stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	// 200 events recorded by 10 concurrent senders; without coalescing that
	// is 200 writes.
	g.Expect(modified).To(BeNumerically("<", 60))
	t.Logf("%d events, %d writes", senders*perSender, modified)
}
