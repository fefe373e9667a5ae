package e2e_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/loadgen"
)

// Knobs of BenchmarkRollout_fleet, read from the environment.
const (
	envRolloutTargets    = "TUGBOAT_ROLLOUT_TARGETS"      // simulated spokes, one target each (default 50)
	envRolloutPromotions = "TUGBOAT_ROLLOUT_PROMOTIONS"   // promotions rolled out one after the other (default 2)
	envRolloutDelay      = "TUGBOAT_ROLLOUT_ACTION_DELAY" // a simulated upgrade's time, action to outcome (default 100ms)
	envRolloutBudget     = "TUGBOAT_ROLLOUT_BUDGET"       // bounds the whole benchmark (default 30m)
)

// rolloutWaves is the benchmark's number of waves: 9 of 10% each, then the
// final wave with the targets left.
const rolloutWaves = 10

// BenchmarkRollout_fleet promotes a version into an environment of N
// simulated spokes (TUGBOAT_ROLLOUT_TARGETS) in 10 waves, with no soak, and
// measures what the hub takes between waves. A real hub (`tugboat hub`, a
// subprocess, every default, as BenchmarkHub_fleet runs it) on a real
// control plane; the load generator registers N Spokes labeled for the
// Pipeline's spokeSelector, announces one release on each, and serves
// their actions as agents do (loadgen.ServeActions: signed long-polls, each
// upgrade reported Succeeded after TUGBOAT_ROLLOUT_ACTION_DELAY, then its
// new revision deployed and Current in a signed event batch; snapshots
// every 30 s). The Pipeline's production environment selects every spoke,
// with a rollout of 9 waves of 10% and the final wave, helm strategy; each
// promotion (TUGBOAT_ROLLOUT_PROMOTIONS of them, versions 1.1.0, 1.2.0, ...)
// is measured until Succeeded. It reads per-target progress only through
// the wire protocol (what the simulated agents received and reported) and
// the counts of status.rollout, never status.targets, so that it needs no
// change when per-target state leaves the Promotion.
//
// It reports the time from the last target of a wave qualifying (the
// simulated agent sending the batch that reports its revision healthy) to
// the next wave's first action (a simulated agent receiving it), p50 and
// p99 over every wave boundary of every promotion; the hub's CPU time and
// the API server's writes (its apiserver_request_total) per target; and
// the largest Promotion (its JSON as the API server serves it, or the
// largest version on a watch), the Pipeline and the largest
// ReleaseHistory. It runs only when -bench selects it.
func BenchmarkRollout_fleet(b *testing.B) {
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		b.Skip("runs only under -bench")
	}
	if testing.Short() {
		b.Skip("starts a control plane and a hub process")
	}
	n := hubBenchInt(b, envRolloutTargets, 50)
	promotions := hubBenchInt(b, envRolloutPromotions, 2)
	delay := hubBenchDuration(b, envRolloutDelay, loadgen.DefaultActionDelay)
	ctx, cancel := context.WithTimeout(context.Background(), hubBenchDuration(b, envRolloutBudget, 30*time.Minute))
	defer cancel()

	hubCluster := harness.StartT(b, harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true})
	hp := startHubProcess(b, buildHubBinary(b), hubCluster.KubeconfigPath, "--heartbeat-namespace=default")
	progress(b, "hub: %s", strings.Join(hp.cmd.Args[1:], " "))
	kube, err := kubernetes.NewForConfig(hubCluster.RESTConfig)
	if err != nil {
		b.Fatal(err)
	}
	const ns, release, relNS = "rollout", "svc-00", "team-0"
	if err := hubCluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	labels := map[string]string{"tugboat.dev/bench": "rollout"}
	began := time.Now()
	spokes, err := loadgen.RegisterLabeled(ctx, hubCluster.Client, ns, "spoke", n, labels)
	if err != nil {
		b.Fatal(err)
	}
	progress(b, "registered %d spokes in %s", n, time.Since(began).Round(time.Millisecond))
	gen, err := loadgen.New(loadgen.Options{
		URL: "http://" + hp.addr, Spokes: spokes, Releases: 1,
		Duration: time.Minute, MaxRequests: 100_000_000, RequestTimeout: 2 * time.Minute, AnnounceParallel: 64,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	ann, err := gen.Announce(ctx)
	if err != nil {
		b.Fatal(err)
	}
	progress(b, "announce: %s", ann)

	var waves []tugboatv1alpha1.Wave
	for range rolloutWaves - 1 {
		waves = append(waves, tugboatv1alpha1.Wave{Size: intstr.FromString("10%")})
	}
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release: release,
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm,
				Helm: &tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com", Chart: release}},
			Environments: []tugboatv1alpha1.Environment{{
				Name:    "production",
				Targets: []tugboatv1alpha1.Target{{SpokeSelector: &metav1.LabelSelector{MatchLabels: labels}, Namespace: relNS}},
				Rollout: &tugboatv1alpha1.Rollout{Waves: waves},
			}},
		},
	}
	if err := hubCluster.Client.Create(ctx, p); err != nil {
		b.Fatal(err)
	}
	pw := watchRolloutPromotions(b, hubCluster, ns)

	// The simulated agents serve their actions from here to the end.
	var mu sync.Mutex
	reports := map[string][]loadgen.ActionReport{} // by promotion namespace/name
	serveCtx, stopServing := context.WithCancel(ctx)
	served := make(chan *loadgen.ActionResult, 1)
	go func() {
		res, err := gen.ServeActions(serveCtx, loadgen.ActionOptions{Delay: delay, Snapshots: true, OnAction: func(r loadgen.ActionReport) {
			mu.Lock()
			defer mu.Unlock()
			reports[r.Action.Promotion] = append(reports[r.Action.Promotion], r)
		}})
		if err != nil {
			b.Error(err)
		}
		served <- res
	}()
	defer func() {
		stopServing()
		<-served
	}()

	names := make([]string, len(spokes))
	for i, s := range spokes {
		names[i] = s.Name
	}
	slices.Sort(names) // the rollout's order: by spoke name, then namespace and release

	var gaps, gapsPersisted, spreads, firsts, totals []time.Duration
	var cpu time.Duration
	var writes float64
	writeKinds := map[string]float64{}
	loadBefore := loadAverage()
	for i := 0; i < promotions; i++ {
		version := fmt.Sprintf("1.%d.0", i+1)
		api0 := apiserverRequests(ctx, b, kube)
		cpu0 := hp.cpu(b)
		created := time.Now()
		pr, err := request.Create(ctx, hubCluster.Client, p, "production", version, tugboatv1alpha1.RequestedByUser, "benchmark")
		if err != nil {
			b.Fatal(err)
		}
		final, err := pw.waitFinished(ctx, pr.Name)
		if err != nil {
			b.Fatalf("promotion %s: %v", pr.Name, err)
		}
		took := time.Since(created)
		cpu += hp.cpu(b) - cpu0
		w, kinds := apiRequests(api0, apiserverRequests(ctx, b, kube), writeVerbs)
		writes += w
		for k, v := range kinds {
			writeKinds[k] += v
		}
		if final.Status.Phase != tugboatv1alpha1.PromotionSucceeded {
			b.Fatalf("promotion %s ended %s: %s", pr.Name, final.Status.Phase, conditionMessages(final))
		}
		// Every target's action reached its agent and was reported before
		// Succeeded; wait (bounded) for the last reports' callbacks.
		key := ns + "/" + pr.Name
		var got []loadgen.ActionReport
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			got = slices.Clone(reports[key])
			mu.Unlock()
			if len(got) >= n || time.Now().After(deadline) {
				break
			}
			if !sleepCtx(ctx, 50*time.Millisecond) {
				b.Fatal(ctx.Err())
			}
		}
		st, err := waveTimes(final, names, got)
		if err != nil {
			b.Logf("promotion %s, status.rollout.waves: %+v", pr.Name, final.Status.Rollout.Waves)
			slices.SortFunc(got, func(x, y loadgen.ActionReport) int { return x.Received.Compare(y.Received) })
			for _, r := range got {
				b.Logf("%s: received %s, outcome answered %s (revision %d), healthy sent %s, answered %s", r.Spoke,
					r.Received.Format(time.StampMicro), r.Reported.Format(time.StampMicro), r.Revision,
					r.HealthySent.Format(time.StampMicro), r.HealthyAnswered.Format(time.StampMicro))
			}
			b.Fatalf("promotion %s: %v", pr.Name, err)
		}
		gaps = append(gaps, st.gaps...)
		gapsPersisted = append(gapsPersisted, st.gapsPersisted...)
		spreads = append(spreads, st.spreads...)
		firsts = append(firsts, st.first.Sub(created))
		totals = append(totals, took)
		progress(b, "promotion %s (%s): Succeeded in %s; first action %s after the Promotion was created; wave gaps %s; first to last action of each wave %s",
			pr.Name, version, took.Round(time.Millisecond), st.first.Sub(created).Round(time.Millisecond), roundAll(st.gaps), roundAll(st.spreads))
	}
	loadAfter := loadAverage()
	slices.Sort(gaps)
	slices.Sort(gapsPersisted)
	slices.Sort(spreads)

	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/apis/tugboat.dev/v1alpha1/namespaces", ns, "promotions").DoRaw(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var prs struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &prs); err != nil {
		b.Fatal(err)
	}
	promotionBytes := 0
	for _, it := range prs.Items {
		promotionBytes = max(promotionBytes, len(it))
	}
	raw, err = kube.Discovery().RESTClient().Get().AbsPath("/apis/tugboat.dev/v1alpha1/namespaces", ns, "pipelines", p.Name).DoRaw(ctx)
	if err != nil {
		b.Fatal(err)
	}
	pipelineBytes := len(raw)
	var rhs tugboatv1alpha1.ReleaseHistoryList
	if err := hubCluster.Client.List(ctx, &rhs, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	historyBytes := 0
	for i := range rhs.Items {
		j, _ := json.Marshal(&rhs.Items[i])
		historyBytes = max(historyBytes, len(j))
	}
	var pts tugboatv1alpha1.PromotionTargetList
	if err := hubCluster.Client.List(ctx, &pts, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	targetBytes := 0
	for i := range pts.Items {
		j, _ := json.Marshal(&pts.Items[i])
		targetBytes = max(targetBytes, len(j))
	}
	stopServing()
	res := <-served
	served <- res // for the deferred stop

	targets := float64(n * promotions)
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(writeKinds)) {
		kinds = append(kinds, fmt.Sprintf("%s %.2f", k, writeKinds[k]/targets))
	}
	progress(b, "load average: %s before the promotions, %s after", loadBefore, loadAfter)
	progress(b, "simulated agents: %s", res)
	if raw, err := os.ReadFile(hp.log); err == nil {
		var failed []string
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, "Store failed") {
				failed = append(failed, line)
			}
		}
		if len(failed) > 0 {
			progress(b, "the hub answered 503 to %d requests because its store failed; the first: %s", len(failed), clip.String(failed[0], 600))
		}
	}
	progress(b, "wave gap (last target of a wave reported healthy → next wave's first action received): %d samples, p50 %s p99 %s max %s",
		len(gaps), loadgen.Quantile(gaps, 0.5), loadgen.Quantile(gaps, 0.99), loadgen.Quantile(gaps, 1))
	progress(b, "within a wave, first to last action received: p50 %s max %s", loadgen.Quantile(spreads, 0.5), loadgen.Quantile(spreads, 1))
	progress(b, "wave gap from the hub's answer to that report (persisted): p50 %s p99 %s", loadgen.Quantile(gapsPersisted, 0.5), loadgen.Quantile(gapsPersisted, 0.99))
	progress(b, "hub CPU %s over %d promotions (%.1f ms per target); API server writes %.0f (%.2f per target): %s",
		cpu.Round(time.Millisecond), promotions, float64(cpu.Milliseconds())/targets, writes, writes/targets, strings.Join(kinds, ", "))
	progress(b, "largest Promotion: %d bytes as served at the end, %d bytes the largest version seen on the watch (re-encoded; %d versions written); the Pipeline %d bytes; largest ReleaseHistory %d bytes; largest PromotionTarget %d bytes (%d of them)",
		promotionBytes, pw.maxBytes(), pw.versions(), pipelineBytes, historyBytes, targetBytes, len(pts.Items))

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(millis(loadgen.Quantile(gaps, 0.5)), "wave-gap-p50-ms")
	b.ReportMetric(millis(loadgen.Quantile(gaps, 0.99)), "wave-gap-p99-ms")
	b.ReportMetric(millis(loadgen.Quantile(gaps, 1)), "wave-gap-max-ms")
	b.ReportMetric(millis(loadgen.Quantile(spreads, 1)), "wave-spread-max-ms")
	slices.Sort(firsts)
	b.ReportMetric(millis(loadgen.Quantile(firsts, 0.5)), "first-action-ms")
	slices.Sort(totals)
	b.ReportMetric(loadgen.Quantile(totals, 0.5).Seconds(), "rollout-s")
	b.ReportMetric(float64(cpu.Milliseconds())/targets, "hub-cpu-ms/target")
	b.ReportMetric(writes/targets, "api-writes/target")
	b.ReportMetric(float64(max(promotionBytes, pw.maxBytes())), "promotion-max-bytes")
	b.ReportMetric(float64(pipelineBytes), "pipeline-bytes")
	b.ReportMetric(float64(historyBytes), "releasehistory-bytes")
	b.ReportMetric(float64(targetBytes), "promotiontarget-max-bytes")
}

// rolloutTimes are one promotion's times, wave by wave.
type rolloutTimes struct {
	// gaps are, per wave boundary, from the last healthy report of a wave
	// being sent to the next wave's first action being received;
	// gapsPersisted from the hub's answer to that report instead.
	gaps, gapsPersisted []time.Duration
	// spreads are, per wave, from its first action received to its last.
	spreads []time.Duration
	// first is when the first wave's first action was received.
	first time.Time
}

// waveTimes splits the reports of one promotion into its waves, by the
// counts of final's status.rollout.waves over the targets in rollout order
// (names: one target per spoke, sorted), and times the boundaries. It is an
// error for a target of a wave to receive its action before every target
// of the wave before it reported its revision healthy (the hub would have
// advanced on something other than the exact revision), or for a target to
// have no successful report.
func waveTimes(final *tugboatv1alpha1.Promotion, names []string, reports []loadgen.ActionReport) (rolloutTimes, error) {
	var out rolloutTimes
	ro := final.Status.Rollout
	if ro == nil || len(ro.Waves) != rolloutWaves {
		return out, fmt.Errorf("status.rollout has %d waves, want %d", lenWaves(ro), rolloutWaves)
	}
	bySpoke := map[string]loadgen.ActionReport{}
	for _, r := range reports {
		if _, dup := bySpoke[r.Spoke]; dup {
			return out, fmt.Errorf("spoke %s received two actions of the promotion", r.Spoke)
		}
		if r.Err != nil || r.Result != "Succeeded" || r.HealthySent.IsZero() {
			err := fmt.Errorf("spoke %s: action %s %s (revision %d), healthy reported at %v", r.Spoke, r.Action.ID, r.Result, r.Revision, r.HealthySent)
			if r.Err != nil {
				err = fmt.Errorf("%w: %w", err, r.Err)
			}
			return out, err
		}
		bySpoke[r.Spoke] = r
	}
	at := 0
	var lastHealthy, lastAnswered time.Time
	for w, ws := range ro.Waves {
		k := int(ws.Targets)
		if int(ws.Succeeded) != k || at+k > len(names) {
			return out, fmt.Errorf("wave %s: %d of %d targets succeeded (%d targets in all)", ws.Name, ws.Succeeded, k, len(names))
		}
		var first, last, healthy, answered time.Time
		for _, name := range names[at : at+k] {
			r, ok := bySpoke[name]
			if !ok {
				return out, fmt.Errorf("wave %s: spoke %s reported no action", ws.Name, name)
			}
			if w > 0 && r.Received.Before(lastHealthy) {
				return out, fmt.Errorf("wave %s: spoke %s received its action at %s, before wave %s's last target reported healthy at %s",
					ws.Name, name, r.Received.Format(time.StampMicro), ro.Waves[w-1].Name, lastHealthy.Format(time.StampMicro))
			}
			if first.IsZero() || r.Received.Before(first) {
				first = r.Received
			}
			last = later(last, r.Received)
			healthy = later(healthy, r.HealthySent)
			answered = later(answered, r.HealthyAnswered)
		}
		out.spreads = append(out.spreads, last.Sub(first))
		if w == 0 {
			out.first = first
		} else {
			out.gaps = append(out.gaps, first.Sub(lastHealthy))
			out.gapsPersisted = append(out.gapsPersisted, first.Sub(lastAnswered))
		}
		lastHealthy, lastAnswered = healthy, answered
		at += k
	}
	if at != len(names) {
		return out, fmt.Errorf("the waves hold %d targets, the environment %d", at, len(names))
	}
	return out, nil
}

func lenWaves(ro *tugboatv1alpha1.RolloutStatus) int {
	if ro == nil {
		return 0
	}
	return len(ro.Waves)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

func conditionMessages(pr *tugboatv1alpha1.Promotion) string {
	var out []string
	for _, c := range pr.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	if ro := pr.Status.Rollout; ro != nil {
		out = append(out, "rollout: "+ro.Progress()+" "+ro.Message)
	}
	return strings.Join(out, "; ")
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// rolloutPromotionWatch watches the Promotions of a namespace: the largest
// version seen (its JSON), how many versions were written, and each one's
// latest phase.
type rolloutPromotionWatch struct {
	mu      sync.Mutex
	largest int
	written int
	latest  map[string]*tugboatv1alpha1.Promotion
	changed chan struct{}
	failure error
}

func watchRolloutPromotions(b *testing.B, c *harness.Cluster, ns string) *rolloutPromotionWatch {
	b.Helper()
	cl, err := client.NewWithWatch(c.RESTConfig, client.Options{Scheme: hub.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	var list tugboatv1alpha1.PromotionList
	if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	pw := &rolloutPromotionWatch{latest: map[string]*tugboatv1alpha1.Promotion{}, changed: make(chan struct{})}
	go func() {
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			wi, err := cl.Watch(ctx, &tugboatv1alpha1.PromotionList{}, client.InNamespace(ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
			if err != nil {
				pw.fail(fmt.Errorf("watching Promotions from %s: %w", rv, err))
				return
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					pw.fail(fmt.Errorf("watch error: %v", ev.Object))
					wi.Stop()
					return
				}
				pr, ok := ev.Object.(*tugboatv1alpha1.Promotion)
				if !ok {
					continue
				}
				rv = pr.ResourceVersion
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					pw.observe(pr)
				}
			}
			wi.Stop()
		}
	}()
	return pw
}

func (pw *rolloutPromotionWatch) observe(pr *tugboatv1alpha1.Promotion) {
	raw, _ := json.Marshal(pr)
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.largest = max(pw.largest, len(raw))
	pw.written++
	pw.latest[pr.Name] = pr
	close(pw.changed)
	pw.changed = make(chan struct{})
}

func (pw *rolloutPromotionWatch) fail(err error) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if pw.failure == nil {
		pw.failure = err
		close(pw.changed)
		pw.changed = make(chan struct{})
	}
}

func (pw *rolloutPromotionWatch) maxBytes() int {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.largest
}

func (pw *rolloutPromotionWatch) versions() int {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.written
}

// waitFinished waits until the watch sees Promotion name in a final phase
// (Succeeded, Failed, Aborted) or Paused, or ctx ends.
func (pw *rolloutPromotionWatch) waitFinished(ctx context.Context, name string) (*tugboatv1alpha1.Promotion, error) {
	for {
		pw.mu.Lock()
		pr, err, ch := pw.latest[name], pw.failure, pw.changed
		pw.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if pr != nil {
			switch pr.Status.Phase {
			case tugboatv1alpha1.PromotionSucceeded, tugboatv1alpha1.PromotionFailed, tugboatv1alpha1.PromotionAborted, tugboatv1alpha1.PromotionPaused:
				return pr, nil
			}
		}
		select {
		case <-ctx.Done():
			phase := "not seen"
			if pr != nil {
				phase = string(pr.Status.Phase) + ": " + conditionMessages(pr)
			}
			return nil, fmt.Errorf("not finished (%s): %w", phase, ctx.Err())
		case <-ch:
		}
	}
}
