package gauges_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/dora/doratest"
	"tugboat.dev/tugboat/controllers/dora/gauges"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// startReconciler runs the gauges' Reconciler against the hub, its clock
// fixed at now, until the test ends.
func startReconciler(t *testing.T, now time.Time, opts gauges.Options) {
	t.Helper()
	startReconcilerWithClock(t, func() time.Time { return now }, opts)
}

// startReconcilerWithClock runs the gauges' Reconciler against the hub,
// telling the time with now, until the test ends.
func startReconcilerWithClock(t *testing.T, now func() time.Time, opts gauges.Options) {
	t.Helper()
	mgr, err := ctrl.NewManager(hub.RESTConfig, ctrl.Options{
		Scheme:     hub.Client.Scheme(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := pipeline.IndexFields(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	r := &gauges.Reconciler{Client: mgr.GetClient(), Options: opts, Now: now}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "dora-"}}
	if err := hub.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// gauge reads one gauge of the Pipeline ns/name from controller-runtime's
// registry, as /metrics serves it; quantile is empty for gauges without
// one. It returns an error when the series does not exist.
func gauge(metric, ns, name, quantile string) (float64, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			want := map[string]string{"namespace": ns, "pipeline": name}
			if quantile != "" {
				want["quantile"] = quantile
			}
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if len(got) != len(want) {
				continue
			}
			for k, v := range want {
				if got[k] != v {
					continue series
				}
			}
			return m.GetGauge().GetValue(), nil
		}
	}
	return 0, fmt.Errorf("no series %s{namespace=%q, pipeline=%q, quantile=%q}", metric, ns, name, quantile)
}

// The scripted history of doratest.Script, written to a real API server,
// gives the gauges its hand-computed figures; a later rollback in
// production changes them, and deleting the Pipeline removes them.
func TestReconciler_exportsTheScriptedFigures(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	now := time.Now().UTC().Truncate(time.Second)
	o := doratest.Script(ns, "web", now)
	g.Expect(doratest.Create(ctx, hub.Client, o)).To(Succeed())
	// A Pipeline without any history: its frequency is 0, its other
	// figures absent (unknown, not a perfect 0).
	g.Expect(hub.Client.Create(ctx, doratest.Pipeline(ns, "empty", doratest.E("dev", "dev-9"), doratest.E("production", "prod-9")))).To(Succeed())

	opts := gauges.NewOptions()
	opts.MinInterval = 0
	startReconciler(t, now, opts)

	value := func(metric, name, quantile string) func() (float64, error) {
		return func() (float64, error) { return gauge(metric, ns, name, quantile) }
	}
	const timeout = 20 * time.Second
	g.Eventually(value(gauges.DeploymentsName, "web", ""), timeout).Should(Equal(2.0))
	g.Eventually(value(gauges.DeploymentFrequencyName, "web", ""), timeout).Should(BeNumerically("~", 2.0/30, 1e-9))
	g.Eventually(value(gauges.LeadTimeName, "web", "0.5"), timeout).Should(Equal((25*time.Hour + 5*time.Minute).Seconds()))
	g.Eventually(value(gauges.LeadTimeName, "web", "0.9"), timeout).Should(Equal((48*time.Hour + 40*time.Minute).Seconds()))
	g.Eventually(value(gauges.ChangeFailureRatioName, "web", ""), timeout).Should(BeNumerically("~", 1.0/3, 1e-9))
	g.Eventually(value(gauges.TimeToRestoreName, "web", "0.5"), timeout).Should(Equal((55 * time.Minute).Seconds()))
	g.Eventually(value(gauges.TimeToRestoreName, "web", "0.9"), timeout).Should(Equal((55 * time.Minute).Seconds()))
	g.Eventually(value(gauges.WindowName, "web", ""), timeout).Should(Equal((30 * 24 * time.Hour).Seconds()))

	g.Eventually(value(gauges.DeploymentFrequencyName, "empty", ""), timeout).Should(Equal(0.0))
	for _, m := range []string{gauges.ChangeFailureRatioName, gauges.LeadTimeName, gauges.TimeToRestoreName} {
		_, err := gauge(m, ns, "empty", "")
		g.Expect(err).To(HaveOccurred(), "%s of a Pipeline without deployments", m)
		_, err = gauge(m, ns, "empty", "0.5")
		g.Expect(err).To(HaveOccurred(), "%s of a Pipeline without deployments", m)
	}

	// prod-1's 1.2.1, deploying in the script, fails health 10 minutes
	// after its deploy (50 minutes ago), and is rolled back 20 minutes ago:
	// a second failed change, not restored (the rollback is not healthy
	// yet). The ReleaseHistory's change alone triggers the recomputation.
	rh := &tugboatv1alpha1.ReleaseHistory{}
	g.Expect(hub.Client.Get(ctx, clientKey(ns, "prod-1.apps.web"), rh)).To(Succeed())
	updated := doratest.History(ns, "prod-1",
		doratest.Rev{Version: "1.0.0", Deployed: now.Add(-19 * doratest.Day), Complete: []time.Time{now.Add(-19*doratest.Day + 5*time.Minute)}},
		doratest.Rev{Version: "1.1.0", Deployed: now.Add(-8 * doratest.Day), Complete: []time.Time{now.Add(-8*doratest.Day + 5*time.Minute)}},
		doratest.Rev{Version: "1.2.0", Deployed: now.Add(-3 * doratest.Day), Failed: []time.Time{now.Add(-3*doratest.Day + 10*time.Minute)}},
		doratest.Rev{Version: "1.1.0", Deployed: now.Add(-3*doratest.Day + time.Hour), Complete: []time.Time{now.Add(-3*doratest.Day + 65*time.Minute)}},
		doratest.Rev{Version: "1.2.1", Deployed: now.Add(-time.Hour), Failed: []time.Time{now.Add(-50 * time.Minute)}},
		doratest.Rev{Version: "1.1.0", Deployed: now.Add(-20 * time.Minute)},
	)
	rh.Status = updated.Status
	g.Expect(hub.Client.Status().Update(ctx, rh)).To(Succeed())
	g.Eventually(value(gauges.ChangeFailureRatioName, "web", ""), timeout).Should(BeNumerically("~", 2.0/4, 1e-9))
	g.Expect(gauge(gauges.DeploymentsName, ns, "web", "")).To(Equal(2.0))
	g.Expect(gauge(gauges.TimeToRestoreName, ns, "web", "0.5")).To(Equal((55 * time.Minute).Seconds()), "the unrestored failure has no time to restore")

	// Deleting the Pipeline removes its gauges.
	g.Expect(hub.Client.Delete(ctx, o.Pipeline.DeepCopy())).To(Succeed())
	g.Eventually(func() error { _, err := gauge(gauges.DeploymentsName, ns, "web", ""); return err }, timeout).Should(HaveOccurred())
	for _, m := range []string{gauges.DeploymentFrequencyName, gauges.ChangeFailureRatioName, gauges.WindowName} {
		_, err := gauge(m, ns, "web", "")
		g.Expect(err).To(HaveOccurred(), "%s of a deleted Pipeline", m)
	}
	for _, m := range []string{gauges.LeadTimeName, gauges.TimeToRestoreName} {
		_, err := gauge(m, ns, "web", "0.9")
		g.Expect(err).To(HaveOccurred(), "%s of a deleted Pipeline", m)
	}
	g.Expect(gauge(gauges.DeploymentsName, ns, "empty", "")).To(Equal(0.0), "another Pipeline's gauges stay")
}

func TestOptions_Validate(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*gauges.Options)
		want string
	}{
		{"defaults", func(*gauges.Options) {}, ""},
		{"zero window", func(o *gauges.Options) { o.Window = 0 }, "--dora-window must be positive, not 0s"},
		{"negative interval", func(o *gauges.Options) { o.MinInterval = -time.Second }, "--dora-min-interval must not be negative, not -1s"},
		{"zero resync", func(o *gauges.Options) { o.Resync = 0 }, "--dora-resync must be positive, not 0s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o := gauges.NewOptions()
			tt.edit(&o)
			err := o.Validate()
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tt.want))
		})
	}
}

func clientKey(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// Changes within MinInterval of a computation are folded into the next
// one: the figures stay as they were until the interval is over, then the
// next change (here an annotation on the Pipeline) brings them up to date.
func TestReconciler_foldsChangesWithinMinInterval(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	start := time.Now().UTC().Truncate(time.Second)
	var clock atomic.Int64
	clock.Store(start.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }

	p := doratest.Pipeline(ns, "web", doratest.E("production", "prod-1"))
	rh := doratest.History(ns, "prod-1", doratest.Rev{Version: "1.0.0", Deployed: start.Add(-doratest.Day), Complete: []time.Time{start.Add(-doratest.Day + time.Minute)}})
	g.Expect(doratest.Create(ctx, hub.Client, doratest.Objects{Pipeline: p, Histories: []tugboatv1alpha1.ReleaseHistory{rh}})).To(Succeed())

	opts := gauges.NewOptions()
	opts.MinInterval = time.Hour
	startReconcilerWithClock(t, now, opts)
	deployments := func() (float64, error) { return gauge(gauges.DeploymentsName, ns, "web", "") }
	g.Eventually(deployments, 20*time.Second).Should(Equal(1.0))

	// A second deployment, within the interval: not counted yet.
	got := &tugboatv1alpha1.ReleaseHistory{}
	g.Expect(hub.Client.Get(ctx, clientKey(ns, rh.Name), got)).To(Succeed())
	got.Status = doratest.History(ns, "prod-1",
		doratest.Rev{Version: "1.0.0", Deployed: start.Add(-doratest.Day), Complete: []time.Time{start.Add(-doratest.Day + time.Minute)}},
		doratest.Rev{Version: "1.1.0", Deployed: start.Add(-time.Hour), Complete: []time.Time{start.Add(-time.Hour + time.Minute)}},
	).Status
	g.Expect(hub.Client.Status().Update(ctx, got)).To(Succeed())
	g.Consistently(deployments, 3*time.Second).Should(Equal(1.0))

	// The interval is over: the next change recomputes.
	clock.Store(start.Add(time.Hour).UnixNano())
	pl := &tugboatv1alpha1.Pipeline{}
	g.Expect(hub.Client.Get(ctx, clientKey(ns, "web"), pl)).To(Succeed())
	pl.Annotations = map[string]string{"example.com/touched": "yes"}
	g.Expect(hub.Client.Update(ctx, pl)).To(Succeed())
	g.Eventually(deployments, 20*time.Second).Should(Equal(2.0))
}
