package e2e_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/e2e/harness"
)

// The benchmarks' fleet: benchPipelines Pipelines, each promoting its own
// release through the environments dev → staging → production, one target
// each on the Spoke named after the environment.
const (
	benchPipelines = 100
	benchNS        = "bench"
)

var benchEnvs = []string{"dev", "staging", "production"}

func benchPipelineName(i int) string { return fmt.Sprintf("app-%03d", i) }

// seedBenchFleet creates the Spokes (heartbeat recorded, Ready), every
// target's ReleaseHistory at 1.0.0 healthy, and the Pipelines (strategy
// notification), on the hub API server.
func seedBenchFleet(b *testing.B, c client.Client) {
	b.Helper()
	ctx := context.Background()
	must := func(err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
	}
	must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}))
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	for _, env := range benchEnvs {
		sp := &tugboatv1alpha1.Spoke{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: env},
			Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: env + "-key"}},
		}
		must(c.Create(ctx, sp))
		// What the recorder's heartbeat and the Spoke controller write.
		sp.Status.LastSeen = &now
		sp.Status.Conditions = []metav1.Condition{{
			Type: tugboatv1alpha1.ReadyCondition.String(), Status: metav1.ConditionTrue,
			Reason: tugboatv1alpha1.AgentConnectedReason.String(), Message: "seeded by the benchmark", LastTransitionTime: now,
		}}
		must(c.Status().Update(ctx, sp))
	}
	var wg sync.WaitGroup
	errs := make(chan error, benchPipelines)
	sem := make(chan struct{}, 8)
	for i := range benchPipelines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			name := benchPipelineName(i)
			p := &tugboatv1alpha1.Pipeline{
				ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: name},
				Spec: tugboatv1alpha1.PipelineSpec{
					Release:   name,
					Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
				},
			}
			for _, env := range benchEnvs {
				if err := writeHistory(ctx, c, benchNS, env, "apps", name, deployed(1, "1.0.0", tugboatv1alpha1.HealthCurrent)); err != nil {
					errs <- err
					return
				}
				p.Spec.Environments = append(p.Spec.Environments, tugboatv1alpha1.Environment{
					Name: env, Targets: []tugboatv1alpha1.Target{{Spoke: env, Namespace: "apps"}},
				})
			}
			if err := c.Create(ctx, p); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// settled reports whether every Pipeline's status shows every environment
// at version.
func settled(g Gomega, c client.Client, version string) {
	var list tugboatv1alpha1.PipelineList
	g.Expect(c.List(context.Background(), &list, client.InNamespace(benchNS))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(benchPipelines))
	for _, p := range list.Items {
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation), p.Name)
		g.Expect(p.Status.Environments).To(HaveLen(len(benchEnvs)), p.Name)
		for _, es := range p.Status.Environments {
			g.Expect(es.Versions).To(Equal([]string{version}), "%s %s", p.Name, es.Name)
		}
	}
}

// startBenchHub runs the hub in-process with the no-op strategies.
func startBenchHub(b *testing.B, cfg *rest.Config) {
	b.Helper()
	opts := hubtest.Options()
	opts.Spoke.HeartbeatTimeout = time.Hour
	opts.Strategies = noopStrategies()
	hubtest.Start(b, cfg, opts)
}

// promotionWatch records when each Promotion was first seen through a
// watch on the hub API server.
type promotionWatch struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func watchPromotions(b *testing.B, cfg *rest.Config) *promotionWatch {
	b.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: hub.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &tugboatv1alpha1.PromotionList{}, client.InNamespace(benchNS))
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	pw := &promotionWatch{seen: map[string]time.Time{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			at := time.Now()
			if ev.Type != watch.Added {
				continue
			}
			if pr, ok := ev.Object.(*tugboatv1alpha1.Promotion); ok {
				pw.mu.Lock()
				if _, dup := pw.seen[pr.Name]; !dup {
					pw.seen[pr.Name] = at
				}
				pw.mu.Unlock()
			}
		}
		if ctx.Err() == nil {
			b.Error("the Promotion watch ended early")
		}
	}()
	b.Cleanup(func() { cancel(); w.Stop(); <-done })
	return pw
}

func (pw *promotionWatch) at(name string) (time.Time, bool) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	t, ok := pw.seen[name]
	return t, ok
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// BenchmarkPipeline_decisionLatency measures, on the real hub API server
// with the hub in-process, the time from the write that makes a source
// environment converge (its target's ReleaseHistory status update to the
// new version, healthy, after an InProgress one) to the Promotion's
// creation seen through a watch. One iteration is a round over 100
// Pipelines × 3 environments: a new version converges in dev on every
// Pipeline (a burst of 200 writes, measured for staging), then in staging
// (measured for production), then in production; the round ends when all
// 200 Promotions succeeded. The strategy is a no-op.
func BenchmarkPipeline_decisionLatency(b *testing.B) {
	g := NewWithT(b)
	ctx := context.Background()
	hubCluster := harness.StartT(b, harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true})
	c := hubCluster.Client
	seedBenchFleet(b, c)
	startBenchHub(b, hubCluster.RESTConfig)
	g.Eventually(func(g Gomega) { settled(g, c, "1.0.0") }).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	pw := watchPromotions(b, hubCluster.RESTConfig)

	var latencies []time.Duration
	// converge writes version into env's target of every Pipeline and
	// returns when each final write completed, by the Promotion it should
	// cause (none for the last environment).
	converge := func(envIdx int, version string, revision int32) map[string]time.Time {
		env := benchEnvs[envIdx]
		written := map[string]time.Time{}
		for i := range benchPipelines {
			name := benchPipelineName(i)
			g.Expect(writeHistory(ctx, c, benchNS, env, "apps", name, deployed(revision, version, tugboatv1alpha1.HealthInProgress))).To(Succeed())
			g.Expect(writeHistory(ctx, c, benchNS, env, "apps", name, deployed(revision, version, tugboatv1alpha1.HealthCurrent))).To(Succeed())
			if envIdx+1 < len(benchEnvs) {
				written[pipeline.PromotionName(name, benchEnvs[envIdx+1], version)] = time.Now()
			}
		}
		return written
	}
	measure := func(written map[string]time.Time) {
		g.Eventually(func() []string {
			var missing []string
			for name := range written {
				if _, ok := pw.at(name); !ok {
					missing = append(missing, name)
				}
			}
			return missing
		}).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(BeEmpty())
		var these []time.Duration
		for name, t0 := range written {
			t1, _ := pw.at(name)
			these = append(these, t1.Sub(t0))
		}
		sort.Slice(these, func(i, j int) bool { return these[i] < these[j] })
		b.Logf("%d decisions: p50 %s, p99 %s, max %s", len(these), percentile(these, 0.5), percentile(these, 0.99), percentile(these, 1))
		latencies = append(latencies, these...)
	}

	round := 0
	for b.Loop() {
		round++
		version := fmt.Sprintf("1.%d.0", round)
		revision := int32(round + 1)
		measure(converge(0, version, revision))
		measure(converge(1, version, revision))
		converge(2, version, revision)
		g.Eventually(func(g Gomega) {
			var list tugboatv1alpha1.PromotionList
			g.Expect(c.List(ctx, &list, client.InNamespace(benchNS), client.MatchingLabels{pipeline.LabelVersion: pipeline.LabelValue(version)})).To(Succeed())
			g.Expect(list.Items).To(HaveLen(2 * benchPipelines))
			for _, pr := range list.Items {
				g.Expect(pr.Status.Phase).To(Equal(tugboatv1alpha1.PromotionSucceeded), pr.Name)
			}
		}).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(latencies, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(latencies, 0.99)), "p99-ms")
	b.ReportMetric(ms(percentile(latencies, 1)), "max-ms")
	b.ReportMetric(float64(len(latencies)), "decisions")
}

// countingTransport counts the requests a client sends.
type countingTransport struct {
	rt            http.RoundTripper
	total, writes *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.total.Add(1)
	if r.Method != http.MethodGet {
		t.writes.Add(1)
	}
	return t.rt.RoundTrip(r)
}

// BenchmarkPipeline_reconcileCost measures one Pipeline reconcile in the
// steady state (nothing to promote; what a resync, a heartbeat or an
// unrelated Promotion update costs): the Reconciler is called directly
// against a manager's cache on the real hub API server, 100 Pipelines × 3
// environments, and the requests it sends are counted.
func BenchmarkPipeline_reconcileCost(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubCluster := harness.StartT(b, harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true})
	seedBenchFleet(b, hubCluster.Client)

	var total, writes atomic.Int64
	cfg := rest.CopyConfig(hubCluster.RESTConfig)
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{rt: rt, total: &total, writes: &writes}
	})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: hub.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := pipeline.IndexFields(ctx, mgr); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			b.Error(err)
		}
	}()
	defer func() { cancel(); <-done }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	r := &pipeline.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Now: time.Now}
	reconcileAll := func() {
		for i := range benchPipelines {
			req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: benchNS, Name: benchPipelineName(i)}}
			if _, err := r.Reconcile(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Warm up: the first pass starts the informers and writes every
	// status; the cache then has to see those writes before the steady
	// state is reached.
	reconcileAll()
	g := NewWithT(b)
	g.Eventually(func(g Gomega) {
		var list tugboatv1alpha1.PipelineList
		g.Expect(mgr.GetClient().List(ctx, &list, client.InNamespace(benchNS))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(benchPipelines))
		for _, p := range list.Items {
			g.Expect(apimeta.IsStatusConditionTrue(p.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())).To(BeTrue(), p.Name)
		}
	}).WithTimeout(time.Minute).Should(Succeed())
	settled(g, hubCluster.Client, "1.0.0")
	reconcileAll()

	total0, writes0 := total.Load(), writes.Load()
	start := time.Now()
	n := 0
	for b.Loop() {
		reconcileAll()
		n += benchPipelines
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(elapsed.Microseconds())/float64(n), "µs/pipeline")
	b.ReportMetric(float64(total.Load()-total0)/float64(n), "requests/pipeline")
	b.ReportMetric(float64(writes.Load()-writes0)/float64(n), "writes/pipeline")
}
