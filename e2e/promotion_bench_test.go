package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/e2e/devenv"
	"tugboat.dev/tugboat/e2e/harness"
)

// Knobs of BenchmarkPromotion_endToEnd, read from the environment (and
// TUGBOAT_BENCH_HUB_ARGS, shared with BenchmarkHub_endToEnd).
const (
	envE2EReleases  = "TUGBOAT_BENCH_E2E_RELEASES" // releases promoted, one after the other (default 50)
	envE2EAgentArgs = "TUGBOAT_BENCH_AGENT_ARGS"   // extra flags for both `tugboat agent`s, space-separated
)

// BenchmarkPromotion_endToEnd measures a promotion end to end on real
// parts: a hub control plane running `tugboat hub` (a subprocess), two full
// spoke clusters (dev and staging) each running `tugboat agent` (a
// subprocess, as its chart deploys it, the staging one with the helm
// strategy's actions enabled), and a local chart repository. Every release
// has its own Pipeline dev → staging (helm strategy, no soak time). For each
// release in turn, the benchmark Helm-upgrades it in dev to 1.1.0 and
// times, from the moment a watch of dev delivers its Deployment fully
// rolled out (t0), when each stage was observed:
//
//   - health: the dev agent's HealthChanged event to Current (the time the
//     agent stamped on it);
//   - report: that event's batch reaching the hub's receiver (a proxy in
//     front of the receiver sees every agent request);
//   - persisted: a hub watch delivers the ReleaseHistory, Current;
//   - promotion: a hub watch delivers the Promotion's ADDED;
//   - action: the hub answers the staging agent's long-poll with the
//     action (the proxy sees the answer);
//   - pending-secret: a watch of staging delivers the ADDED of the pending
//     release Secret the staging agent's Helm upgrade writes.
//
// It reports p50, p99 and max per stage (ms since t0) over the releases.
// One iteration whatever b.N; it runs only when -bench selects it.
func BenchmarkPromotion_endToEnd(b *testing.B) {
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		b.Skip("runs only under -bench")
	}
	if testing.Short() {
		b.Skip("starts three control planes, a hub and two agents")
	}
	n := envInt(b, envE2EReleases, 50)
	const (
		hubNS, ns        = "bench", "apps"
		from, to         = "1.0.0", "1.1.0"
		source, dest     = "dev", "staging"
		promotedRevision = 2
	)
	g := NewWithT(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	began := time.Now()

	repoDir := b.TempDir()
	repo, err := devenv.StartChartRepo(repoDir, from, to)
	g.Expect(err).NotTo(HaveOccurred())
	b.Cleanup(repo.Stop)
	charts := map[string]*chart.Chart{}
	for _, v := range []string{from, to} {
		charts[v], err = loader.Load(filepath.Join(repoDir, "demo-"+v+".tgz"))
		g.Expect(err).NotTo(HaveOccurred())
	}

	bin := buildHubBinary(b)
	hubCluster, src, dst := startPromotionClusters(b)
	hp := startHubProcess(b, bin, hubCluster.KubeconfigPath)
	b.Logf("hub: %s", strings.Join(hp.cmd.Args[1:], " "))
	g.Expect(hubCluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNS}})).To(Succeed())

	tl := newTimeline(to)
	proxy := startObservingProxy(b, hp.addr, tl, source, dest, ns)
	agentArgs := append([]string{"--hub-state-interval", "30s"}, strings.Fields(os.Getenv(envE2EAgentArgs))...)
	var destMetrics string // the destination agent's metrics address
	for _, sp := range []struct {
		name  string
		c     *harness.Cluster
		extra []string
	}{
		{source, src, nil},
		{dest, dst, []string{"--actions-enabled", "--actions-allowed-namespaces", ns, "--actions-allowed-chart-sources", repo.URL}},
	} {
		keyFile := filepath.Join(b.TempDir(), sp.name+".key")
		g.Expect(os.WriteFile(keyFile, registerBenchSpoke(ctx, g, hubCluster, hubNS, sp.name), 0o600)).To(Succeed())
		metricsAddr := freeAddr(b)
		if sp.name == dest {
			destMetrics = metricsAddr
		}
		cmd, _ := startAgentProcess(b, bin, sp.c.KubeconfigPath, sp.name, proxy.url(), keyFile, metricsAddr, append(sp.extra, agentArgs...)...)
		b.Logf("agent %s: %s", sp.name, strings.Join(cmd.Args[1:], " "))
		// The agent registers its webhooks once its informers have synced.
		g.Eventually(func() error {
			return sp.c.Client.Get(ctx, client.ObjectKey{Name: "tugboat-agent"}, &admissionregistrationv1.MutatingWebhookConfiguration{})
		}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	}

	// Every release runs 1.0.0 in both environments (one replica each: the
	// harness's node takes 110 Pods).
	releases := make([]string, n)
	promotions := map[string]string{}
	srcHelm, dstHelm := helmConfig(b, src, ns), helmConfig(b, dst, ns)
	for i := range releases {
		rel := fmt.Sprintf("r%03d", i)
		releases[i] = rel
		promotions[pipeline.PromotionName(rel, dest, to)] = rel
		for _, cfg := range []*action.Configuration{dstHelm, srcHelm} {
			in := action.NewInstall(cfg)
			in.ReleaseName, in.Namespace, in.CreateNamespace = rel, ns, true
			_, err := in.RunWithContext(ctx, charts[from], map[string]any{"replicaCount": 1})
			g.Expect(err).NotTo(HaveOccurred(), "installing %s", rel)
		}
	}
	// The Pipelines come once the hub knows staging runs 1.0.0 too: a
	// Pipeline that saw dev first would promote 1.0.0 into staging.
	for _, sp := range []string{source, dest} {
		g.Eventually(func() []string { return notCurrent(ctx, g, hubCluster, hubNS, sp, ns, releases, from) }).
			WithTimeout(5*time.Minute).WithPolling(time.Second).Should(BeEmpty(), "releases of %s not reported Current at %s", sp, from)
	}
	for _, rel := range releases {
		g.Expect(hubCluster.Client.Create(ctx, benchPipeline(hubNS, rel, ns, source, dest, repo.URL))).To(Succeed())
	}
	b.Logf("set up %d releases in %s", n, time.Since(began).Round(time.Second))

	watchErr := watchPromotionStages(ctx, b, tl, hubCluster, src, dst, hubNS, source, ns, promotedRevision, promotions)
	loadBefore := loadAverage()
	b.ResetTimer()
	measured := time.Now()
	for range b.N {
		for _, rel := range releases {
			if _, a := tl.get(rel); !a[stagePending].IsZero() {
				continue // done in an earlier iteration
			}
			up := action.NewUpgrade(srcHelm)
			up.Namespace, up.ReuseValues = ns, true
			_, err := up.RunWithContext(ctx, rel, charts[to], nil)
			g.Expect(err).NotTo(HaveOccurred(), "upgrading %s in %s", rel, source)
			g.Eventually(func() []string {
				g.Expect(watchErr()).To(Succeed())
				g.Expect(proxy.err()).To(Succeed())
				return tl.missing(rel)
			}).WithTimeout(2*time.Minute).WithPolling(20*time.Millisecond).Should(BeEmpty(), "stages of %s not observed", rel)
		}
	}
	b.StopTimer()
	b.Logf("measured %d promotions in %s; load average %s before, %s after", n, time.Since(measured).Round(time.Second), loadBefore, loadAverage())
	if errs := proxy.errors(); len(errs) > 0 {
		b.Logf("%d agent requests could not reach the hub (retried by the agents): %s", len(errs), strings.Join(errs, "; "))
	}
	reportStages(b, tl, releases)
	reportAgentStages(b, destMetrics)
}

// reportAgentStages reads the destination agent's
// tugboat_agent_action_stage_seconds and reports the mean of each stage of
// its upgrades: where the time between an action and the new revision
// goes.
func reportAgentStages(b *testing.B, metricsAddr string) {
	b.Helper()
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		b.Logf("reading the agent's metrics: %v", err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Logf("parsing the agent's metrics: %v", err)
		return
	}
	f := families["tugboat_agent_action_stage_seconds"]
	if f == nil {
		b.Logf("the agent recorded no action stages")
		return
	}
	var line []string
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		if h.GetSampleCount() == 0 {
			continue
		}
		stage := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "stage" {
				stage = l.GetValue()
			}
		}
		mean := h.GetSampleSum() / float64(h.GetSampleCount()) * 1000
		b.ReportMetric(mean, "ms/agent-"+stage)
		line = append(line, fmt.Sprintf("%s %.1f ms", stage, mean))
	}
	b.Logf("the destination agent's upgrade stages (mean of %d actions): %s", f.GetMetric()[0].GetHistogram().GetSampleCount(), strings.Join(line, ", "))
}

// startPromotionClusters starts the hub control plane and the two full
// spoke clusters side by side.
func startPromotionClusters(b *testing.B) (hubCluster, src, dst *harness.Cluster) {
	b.Helper()
	done := make(chan struct{}, 3)
	go func() {
		defer func() { done <- struct{}{} }()
		hubCluster = harness.StartT(b, harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true})
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		src = harness.StartT(b, harness.Options{Name: "bench-dev", StartTimeout: 3 * time.Minute})
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		dst = harness.StartT(b, harness.Options{Name: "bench-staging", StartTimeout: 3 * time.Minute})
	}()
	for range 3 {
		<-done
	}
	if hubCluster == nil || src == nil || dst == nil {
		b.FailNow()
	}
	return hubCluster, src, dst
}

// registerBenchSpoke creates Spoke name in ns and returns the key the hub
// generated for it.
func registerBenchSpoke(ctx context.Context, g Gomega, c *harness.Cluster, ns, name string) []byte {
	sp := &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}},
	}
	g.Expect(c.Client.Create(ctx, sp)).To(Succeed())
	var key corev1.Secret
	g.Eventually(func() error {
		return c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-key"}, &key)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(key.Data[tugboatv1alpha1.SpokeKeySecretKey]).NotTo(BeEmpty())
	return key.Data[tugboatv1alpha1.SpokeKeySecretKey]
}

// benchPipeline promotes release from source to dest (one target each, in
// namespace ns) with the helm strategy, from the chart repository at
// repoURL, with no soak time.
func benchPipeline(hubNS, release, ns, source, dest, repoURL string) *tugboatv1alpha1.Pipeline {
	env := func(name string) tugboatv1alpha1.Environment {
		return tugboatv1alpha1.Environment{Name: name, Targets: []tugboatv1alpha1.Target{{Spoke: name, Namespace: ns}}}
	}
	return &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: release},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:      release,
			Environments: []tugboatv1alpha1.Environment{env(source), env(dest)},
			Promotion: tugboatv1alpha1.PromotionStrategy{
				Type: tugboatv1alpha1.StrategyHelm,
				Helm: &tugboatv1alpha1.HelmStrategy{Repository: repoURL, Chart: "demo"},
			},
			Timeout: &metav1.Duration{Duration: 5 * time.Minute},
		},
	}
}

// notCurrent lists the releases whose ReleaseHistory on spoke does not show
// version, Current.
func notCurrent(ctx context.Context, g Gomega, c *harness.Cluster, hubNS, spoke, ns string, releases []string, version string) []string {
	var list tugboatv1alpha1.ReleaseHistoryList
	g.Expect(c.Client.List(ctx, &list, client.InNamespace(hubNS))).To(Succeed())
	ok := map[string]bool{}
	for _, rh := range list.Items {
		if cur := rh.Status.Current; rh.Spec.Spoke == spoke && rh.Spec.Namespace == ns && cur != nil &&
			cur.ChartVersion == version && cur.Health == tugboatv1alpha1.HealthCurrent {
			ok[rh.Spec.Release] = true
		}
	}
	var out []string
	for _, r := range releases {
		if !ok[r] {
			out = append(out, r)
		}
	}
	return out
}

// reportStages reports, per stage, p50, p99 and max of the time since t0
// (the source Deployment fully rolled out), and logs each stage's own share
// (since the stage before it).
func reportStages(b *testing.B, tl *timeline, releases []string) {
	b.Helper()
	var since, step [numStages][]time.Duration
	for _, rel := range releases {
		t0, at := tl.get(rel)
		prev := t0
		for s, t := range at {
			since[s] = append(since[s], t.Sub(t0))
			step[s] = append(step[s], t.Sub(prev))
			prev = t
		}
	}
	var lines []string
	for s := range numStages {
		slices.Sort(since[s])
		slices.Sort(step[s])
		p50, p99, maxD := percentile(since[s], 0.5), percentile(since[s], 0.99), since[s][len(since[s])-1]
		name := stageNames[s]
		b.ReportMetric(millis(p50), name+"-p50-ms")
		b.ReportMetric(millis(p99), name+"-p99-ms")
		b.ReportMetric(millis(maxD), name+"-max-ms")
		lines = append(lines, fmt.Sprintf("%-15s since t0: p50 %7.1f  p99 %7.1f  max %7.1f ms | own share: min %7.1f  p50 %7.1f  p99 %7.1f  max %7.1f ms",
			name, millis(p50), millis(p99), millis(maxD),
			millis(step[s][0]), millis(percentile(step[s], 0.5)), millis(percentile(step[s], 0.99)), millis(step[s][len(step[s])-1])))
	}
	b.Logf("%d releases:\n%s", len(releases), strings.Join(lines, "\n"))
}
