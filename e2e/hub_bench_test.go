package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/loadgen"
)

// Knobs of BenchmarkHub_endToEnd, read from the environment.
const (
	envBenchDuration    = "TUGBOAT_BENCH_DURATION"     // the load's duration, e.g. 30s (default 20s)
	envBenchSpokes      = "TUGBOAT_BENCH_SPOKES"       // spokes (default 200)
	envBenchReleases    = "TUGBOAT_BENCH_RELEASES"     // releases per spoke (default 20)
	envBenchMaxRequests = "TUGBOAT_BENCH_MAX_REQUESTS" // request bound of the load (default 1,000,000)
	envBenchHubArgs     = "TUGBOAT_BENCH_HUB_ARGS"     // extra flags for `tugboat hub`, space-separated, e.g. --history-writers=32
)

// BenchmarkHub_endToEnd runs the real hub (`tugboat hub`, a subprocess built
// once) against a real hub control plane and drives it with the load
// generator: 200 spokes × 20 releases, each spoke's agent sending signed
// event batches and periodic state snapshots, one request in flight per
// spoke, for a bounded time. It reports accepted events/s, ReleaseHistory
// writes/s (counted on a watch), the time from sending a sampled event to
// the watch seeing it in its ReleaseHistory (p50, p99), the request
// latency, and the hub's RSS. One iteration whatever b.N; it runs only when
// -bench selects it.
func BenchmarkHub_endToEnd(b *testing.B) {
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		b.Skip("runs only under -bench")
	}
	if testing.Short() {
		b.Skip("starts a control plane and a hub process")
	}
	duration := hubBenchDuration(b, envBenchDuration, 20*time.Second)
	nSpokes := hubBenchInt(b, envBenchSpokes, 200)
	nReleases := hubBenchInt(b, envBenchReleases, 20)
	maxRequests := hubBenchInt(b, envBenchMaxRequests, 1_000_000)

	hubCluster := harness.StartT(b, harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true})
	hp := startHubProcess(b, buildHubBinary(b), hubCluster.KubeconfigPath)
	b.Logf("hub: %s", strings.Join(hp.cmd.Args[1:], " "))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const ns = "bench"
	if err := hubCluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	spokes, err := loadgen.Register(ctx, hubCluster.Client, ns, "spoke", nSpokes)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("registered %d spokes in %s", len(spokes), time.Since(began).Round(time.Millisecond))

	w := watchHistories(b, hubCluster, ns)
	gen, err := loadgen.New(loadgen.Options{
		URL: "http://" + hp.addr, Spokes: spokes, Releases: nReleases,
		Duration: duration, MaxRequests: maxRequests, RequestTimeout: 2 * time.Minute,
		SampleEvery: 5, OnSample: w.sample,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	ann, err := gen.Announce(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("announce: %s", ann)
	var list tugboatv1alpha1.ReleaseHistoryList
	if err := hubCluster.Client.List(ctx, &list, client.InNamespace(ns), client.Limit(1)); err != nil {
		b.Fatal(err)
	}
	if list.RemainingItemCount == nil || int(*list.RemainingItemCount)+len(list.Items) != nSpokes*nReleases {
		b.Fatalf("after the announce the hub holds %v+%d ReleaseHistories, want %d", list.RemainingItemCount, len(list.Items), nSpokes*nReleases)
	}

	loadBefore := loadAverage()
	restBefore := hp.series(b, "rest_client_requests_total")
	rssBefore := hp.memory(b)
	cpuBefore := hp.cpu(b)
	acceptedBefore := hp.counter(b, `tugboat_receiver_events_total{endpoint="events",result="accepted"}`)
	recWritesBefore, recOpsBefore := hp.counter(b, "tugboat_recorder_writes_total"), hp.counter(b, "tugboat_recorder_written_ops_total")
	var runs []*loadgen.Result
	var writes int64
	for b.Loop() {
		w.writes.Store(0)
		w.counting.Store(true)
		res, err := gen.Run(ctx)
		w.counting.Store(false)
		if err != nil {
			b.Fatal(err)
		}
		writes += w.writes.Load()
		runs = append(runs, res)
		b.Logf("run: %s", res)
	}
	b.StopTimer()
	b.Logf("load average: %s before the run, %s after", loadBefore, loadAverage())
	rssAfter := hp.memory(b)
	hubCPU := hp.cpu(b) - cpuBefore
	var calls []string
	for k, v := range hp.series(b, "rest_client_requests_total") {
		if d := v - restBefore[k]; d > 0 {
			calls = append(calls, fmt.Sprintf("%s %.0f", strings.TrimPrefix(k, "rest_client_requests_total"), d))
		}
	}
	slices.Sort(calls)
	unobserved := w.drain(30 * time.Second)
	if err := w.err(); err != nil {
		b.Fatal(err)
	}
	if n := w.restarts.Load(); n > 0 {
		b.Logf("the API server ended the ReleaseHistory watch %d times; it resumed each time from the last version seen", n)
	}

	var accepted, requests, failed int
	var elapsed time.Duration
	for _, r := range runs {
		accepted += r.EventsAccepted
		requests += r.Requests
		elapsed += r.Elapsed
		for _, n := range r.Errors() {
			failed += n
		}
	}
	// The hub's own count agrees with what it answered.
	if hubAccepted := hp.counter(b, `tugboat_receiver_events_total{endpoint="events",result="accepted"}`) - acceptedBefore; int(hubAccepted) < accepted {
		b.Errorf("the hub counted %v accepted events, its answers said %d", hubAccepted, accepted)
	}
	var sizes []int
	var some tugboatv1alpha1.ReleaseHistoryList
	if err := hubCluster.Client.List(context.Background(), &some, client.InNamespace(ns), client.Limit(500)); err != nil {
		b.Fatal(err)
	}
	for i := range some.Items {
		raw, _ := json.Marshal(&some.Items[i])
		sizes = append(sizes, len(raw))
	}
	slices.Sort(sizes)
	lat := w.latencies()
	b.Logf("receipt to persisted: %d samples, %d not observed; p50 %s p90 %s p99 %s max %s",
		len(lat), unobserved, loadgen.Quantile(lat, 0.5), loadgen.Quantile(lat, 0.9), loadgen.Quantile(lat, 0.99), loadgen.Quantile(lat, 1))
	b.Logf("hub RSS: %s before, %s after, peak %s; hub CPU %s", rssBefore.rss, rssAfter.rss, rssAfter.hwm, hubCPU)
	b.Logf("hub → API server during the run: %s", strings.Join(calls, ", "))
	recWrites := hp.counter(b, "tugboat_recorder_writes_total") - recWritesBefore
	recOps := hp.counter(b, "tugboat_recorder_written_ops_total") - recOpsBefore
	b.Logf("recorder: %.0f queued writes applying %.0f ops (%.2f ops per write)", recWrites, recOps, recOps/max(recWrites, 1))
	if len(sizes) > 0 {
		b.Logf("ReleaseHistory size after the run (%d of them): median %d bytes, max %d bytes", len(sizes), sizes[len(sizes)/2], sizes[len(sizes)-1])
	}

	secs := elapsed.Seconds()
	b.ReportMetric(0, "ns/op") // one fixed-length run: ns/op means nothing
	b.ReportMetric(float64(accepted)/secs, "accepted-events/s")
	b.ReportMetric(float64(writes)/secs, "rh-writes/s")
	b.ReportMetric(float64(requests)/secs, "requests/s")
	b.ReportMetric(float64(failed), "failed-requests")
	b.ReportMetric(millis(loadgen.Quantile(lat, 0.50)), "persist-p50-ms")
	b.ReportMetric(millis(loadgen.Quantile(lat, 0.99)), "persist-p99-ms")
	b.ReportMetric(millis(runs[len(runs)-1].Latency(0.50)), "request-p50-ms")
	b.ReportMetric(millis(runs[len(runs)-1].Latency(0.99)), "request-p99-ms")
	b.ReportMetric(hubCPU.Seconds()/secs, "hub-cpu-cores")
	b.ReportMetric(rssBefore.rss.mib(), "hub-rss-before-MiB")
	b.ReportMetric(rssAfter.rss.mib(), "hub-rss-MiB")
	b.ReportMetric(rssAfter.hwm.mib(), "hub-peak-rss-MiB")
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func hubBenchDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a positive duration such as 30s", name, v)
	}
	return d
}

func hubBenchInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// buildHubBinary builds the tugboat binary once, into a temporary directory.
func buildHubBinary(b testing.TB) string {
	b.Helper()
	wd, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	root, err := bins.FindRepoRoot(wd)
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "tugboat")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/tugboat")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/tugboat: %v\n%s", err, out)
	}
	return bin
}

// hubProcess is `tugboat hub` running as a subprocess.
type hubProcess struct {
	cmd         *exec.Cmd
	addr        string // the receiver
	metricsAddr string
	log         string
}

func freeAddr(b testing.TB) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// startHubProcess starts `tugboat hub` against the cluster of kubeconfig,
// with extra flags appended, and waits until its receiver is ready. It
// stops the process (SIGTERM, then SIGKILL) at cleanup.
func startHubProcess(b testing.TB, bin, kubeconfig string, extra ...string) *hubProcess {
	b.Helper()
	hp := &hubProcess{addr: freeAddr(b), metricsAddr: freeAddr(b), log: filepath.Join(b.TempDir(), "hub.log")}
	logFile, err := os.Create(hp.log)
	if err != nil {
		b.Fatal(err)
	}
	// The kubeconfig comes through $KUBECONFIG, not --kubeconfig: with the
	// flag the hub loads its REST config with clientcmd, whose client-side
	// rate limit (client-go's default, 5 requests/s) caps the whole hub at
	// about 5 ReleaseHistory writes/s; through $KUBECONFIG it loads it with
	// ctrl.GetConfig, which turns that limit off as a deployed hub has it.
	hp.cmd = exec.Command(bin, "hub",
		"--leader-elect=false",
		"--metrics-bind-address", hp.metricsAddr,
		"--health-probe-bind-address=0",
		"--receiver-bind-address", hp.addr,
	)
	hp.cmd.Args = append(hp.cmd.Args, strings.Fields(os.Getenv(envBenchHubArgs))...)
	hp.cmd.Args = append(hp.cmd.Args, extra...)
	hp.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	hp.cmd.Stdout, hp.cmd.Stderr = logFile, logFile
	if err := hp.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = hp.cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		_ = hp.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(40 * time.Second):
			_ = hp.cmd.Process.Kill()
			<-exited
		}
		_ = logFile.Close()
		if b.Failed() {
			b.Logf("hub log (%s):\n%s", hp.log, tailLines(hp.log, 40))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := http.Get("http://" + hp.addr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return hp
			}
		}
		select {
		case <-exited:
			b.Fatalf("the hub exited: %s", tailLines(hp.log, 40))
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			b.Fatalf("the hub's receiver was not ready within 60s: %s", tailLines(hp.log, 40))
		}
	}
}

func tailLines(path string, lines int) string {
	raw, _ := os.ReadFile(path)
	all := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

type kib int64

func (k kib) mib() float64   { return float64(k) / 1024 }
func (k kib) String() string { return fmt.Sprintf("%.1f MiB", k.mib()) }
func parseKiB(v string) kib {
	n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
	return kib(n)
}
func (hp *hubProcess) pid() int { return hp.cmd.Process.Pid }

// memory reads the hub process's resident set (VmRSS) and its peak (VmHWM).
func (hp *hubProcess) memory(b *testing.B) struct{ rss, hwm kib } {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", hp.pid()))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var m struct{ rss, hwm kib }
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			m.rss = parseKiB(v)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			m.hwm = parseKiB(v)
		}
	}
	if m.rss == 0 {
		b.Fatalf("no VmRSS in /proc/%d/status", hp.pid())
	}
	return m
}

// cpu reads the CPU time the hub process used so far (user and system,
// from /proc/<pid>/stat, in clock ticks of 1/100 s).
func (hp *hubProcess) cpu(b *testing.B) time.Duration {
	b.Helper()
	d, err := processCPU(hp.pid())
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// counter reads one series of the hub's /metrics, e.g.
// `name{label="value"}` (0 when absent).
func (hp *hubProcess) counter(b *testing.B, series string) float64 {
	b.Helper()
	return hp.series(b, series)[series]
}

// series reads the hub's /metrics series whose name starts with prefix,
// by their full name with labels.
func (hp *hubProcess) series(b *testing.B, prefix string) map[string]float64 {
	b.Helper()
	resp, err := http.Get("http://" + hp.metricsAddr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		f, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			b.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = f
	}
	return out
}

// loadAverage is the machine's 1, 5 and 15 minute load averages.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	return strings.Join(f[:min(3, len(f))], " ")
}

// historyWatch watches the ReleaseHistories of a namespace: it counts
// writes while counting is set, and times sampled events from their send to
// the first version of their ReleaseHistory that holds them.
type historyWatch struct {
	writes   atomic.Int64
	counting atomic.Bool
	restarts atomic.Int64

	mu      sync.Mutex
	pending map[string]time.Time // event id → sent
	lat     []time.Duration
	failure error
	stopped bool
}

func watchHistories(b *testing.B, c *harness.Cluster, ns string) *historyWatch {
	b.Helper()
	cl, err := client.NewWithWatch(c.RESTConfig, client.Options{Scheme: hub.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	var list tugboatv1alpha1.ReleaseHistoryList
	if err := cl.List(ctx, &list, client.InNamespace(ns), client.Limit(1)); err != nil {
		b.Fatal(err)
	}
	w := &historyWatch{pending: map[string]time.Time{}}
	// Like a reflector: when the API server ends the watch (it drops
	// watchers that fall behind), watch again from the last version seen,
	// so no write is missed or counted twice.
	go func() {
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			wi, err := cl.Watch(ctx, &tugboatv1alpha1.ReleaseHistoryList{}, client.InNamespace(ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
			if err != nil {
				if ctx.Err() == nil {
					w.fail(fmt.Errorf("watching ReleaseHistories from %s: %w", rv, err))
				}
				return
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					w.fail(fmt.Errorf("watch error: %v", ev.Object))
					wi.Stop()
					return
				}
				if o, ok := ev.Object.(client.Object); ok {
					rv = o.GetResourceVersion()
				}
				w.observe(ev)
			}
			wi.Stop()
			w.restarts.Add(1)
		}
	}()
	return w
}

func (w *historyWatch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failure == nil && !w.stopped {
		w.failure = err
	}
}

func (w *historyWatch) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	return w.failure
}

// sample is loadgen's OnSample.
func (w *historyWatch) sample(s loadgen.Sample) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending[s.EventID] = s.Sent
}

func (w *historyWatch) observe(ev watch.Event) {
	now := time.Now()
	rh, ok := ev.Object.(*tugboatv1alpha1.ReleaseHistory)
	if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
		return
	}
	if w.counting.Load() {
		w.writes.Add(1)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 {
		return
	}
	for _, rev := range rh.Status.Revisions {
		for _, e := range rev.Events {
			if sent, ok := w.pending[e.ID]; ok {
				w.lat = append(w.lat, now.Sub(sent))
				delete(w.pending, e.ID)
			}
		}
	}
}

// drain waits up to d for the samples still pending and returns how many
// never showed up.
func (w *historyWatch) drain(d time.Duration) int {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		w.mu.Lock()
		n := len(w.pending)
		w.mu.Unlock()
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		<-tick.C
	}
}

func (w *historyWatch) latencies() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(slices.Values(w.lat))
}
