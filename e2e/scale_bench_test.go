package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/loadgen"
)

// Knobs of BenchmarkHub_fleet, read from the environment.
const (
	envFleetSpokes    = "TUGBOAT_FLEET_SPOKES"    // fleet sizes, comma-separated, run in order on one hub (default 500)
	envFleetReleases  = "TUGBOAT_FLEET_RELEASES"  // releases per spoke (default 10)
	envFleetDuration  = "TUGBOAT_FLEET_DURATION"  // the load's duration per size (default 2m)
	envFleetChange    = "TUGBOAT_FLEET_CHANGE"    // mean time between two release changes of one spoke (default 3m)
	envFleetState     = "TUGBOAT_FLEET_STATE"     // snapshot interval (default 30s, the agent's)
	envFleetTimeScale = "TUGBOAT_FLEET_TIMESCALE" // divides the change, step and snapshot intervals (default 1)
	envFleetBudget    = "TUGBOAT_FLEET_BUDGET"    // bounds the whole benchmark; past it, it fails and cleans up (default 50m)
	envFleetWarmup    = "TUGBOAT_FLEET_WARMUP"    // load run before the measured run, after the announce, measured by nothing (default 0)
)

// BenchmarkHub_fleet runs the real hub (`tugboat hub`, a subprocess) against
// a real hub control plane and drives it with a fleet of simulated agents
// at a realistic pace: each spoke with 10 releases, a release change every
// few minutes (a rollout of three event batches 2 s apart), a state
// snapshot every 30 s, both jittered. One sub-benchmark per fleet size
// (TUGBOAT_FLEET_SPOKES, e.g. 500,1000,2000,5000), in order on the same hub:
// each size registers the spokes it adds (the fleet grows: the spokes of
// the sizes before go on where they were) and has every spoke announce its
// state, then runs the load for TUGBOAT_FLEET_WARMUP, unmeasured (the
// steady state, past the announce's backlog), and for
// TUGBOAT_FLEET_DURATION, measured. It reports the hub's
// RSS, Go heap and CPU, the API server's writes per second (its own
// apiserver_request_total, by verb and resource), the time from sending a
// sampled event to the watch seeing it in its ReleaseHistory (p50, p99),
// what snapshots cost (their latency, the releases found unchanged, the
// heartbeats written) and the 429s. It runs only when -bench selects it.
func BenchmarkHub_fleet(b *testing.B) {
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		b.Skip("runs only under -bench")
	}
	if testing.Short() {
		b.Skip("starts a control plane and a hub process")
	}
	sizes := fleetSizes(b)
	nReleases := hubBenchInt(b, envFleetReleases, 10)
	duration := hubBenchDuration(b, envFleetDuration, 2*time.Minute)
	scale := hubBenchInt(b, envFleetTimeScale, 1)
	change := hubBenchDuration(b, envFleetChange, 3*time.Minute) / time.Duration(scale)
	state := hubBenchDuration(b, envFleetState, loadgen.DefaultStateInterval) / time.Duration(scale)
	step := loadgen.DefaultStepInterval / time.Duration(scale)
	warmup := hubBenchDuration(b, envFleetWarmup, 0)

	hubCluster := harness.StartT(b, harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true})
	// The hub records heartbeats in its digests, in the namespace a
	// deployed hub has (the admin kubeconfig may write there). Time-scaled,
	// the hub's heartbeat settings scale too.
	hubArgs := []string{"--heartbeat-namespace=default"}
	if scale > 1 {
		hubArgs = append(hubArgs,
			fmt.Sprintf("--heartbeat-digest-interval=%s", 5*time.Second/time.Duration(scale)),
			fmt.Sprintf("--spoke-heartbeat-refresh=%s", 5*time.Minute/time.Duration(scale)),
			fmt.Sprintf("--spoke-heartbeat-timeout=%s", 90*time.Second/time.Duration(scale)))
	}
	hp := startHubProcess(b, buildHubBinary(b), hubCluster.KubeconfigPath, hubArgs...)
	b.Logf("hub: %s", strings.Join(hp.cmd.Args[1:], " "))
	kube, err := kubernetes.NewForConfig(hubCluster.RESTConfig)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hubBenchDuration(b, envFleetBudget, 50*time.Minute))
	defer cancel()
	const ns = "fleet"
	if err := hubCluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	w := watchHistories(b, hubCluster, ns)
	var gen *loadgen.Generator
	defer func() {
		if gen != nil {
			gen.Close()
		}
	}()

	for _, n := range sizes {
		b.Run(fmt.Sprintf("spokes=%d", n), func(b *testing.B) {
			began := time.Now()
			spokes, err := loadgen.Register(ctx, hubCluster.Client, ns, "spoke", n)
			if err != nil {
				b.Fatal(err)
			}
			progress(b, "registered %d spokes in %s", n, time.Since(began).Round(time.Millisecond))
			if gen == nil {
				gen, err = loadgen.New(loadgen.Options{
					URL: "http://" + hp.addr, Spokes: spokes, Releases: nReleases,
					Duration: duration, MaxRequests: 100_000_000, RequestTimeout: 2 * time.Minute,
					ChangeInterval: change, StepInterval: step, StateInterval: state, AnnounceParallel: 64,
					SampleEvery: 2, OnSample: w.sample,
				})
				if err != nil {
					b.Fatal(err)
				}
			} else {
				gen.Grow(spokes)
			}
			// A large announce takes minutes: say how it goes every 30 s.
			w.writes.Store(0)
			w.counting.Store(true)
			annDone := make(chan struct{})
			go func() {
				tick := time.NewTicker(30 * time.Second)
				defer tick.Stop()
				for {
					select {
					case <-annDone:
						return
					case <-tick.C:
						fmt.Fprintf(os.Stderr, "%s announcing: %d ReleaseHistory versions written so far, load average %s\n",
							time.Now().UTC().Format(time.TimeOnly), w.writes.Load(), loadAverage())
					}
				}
			}()
			ann, err := gen.Announce(ctx)
			close(annDone)
			w.counting.Store(false)
			if err != nil {
				progress(b, "announce incomplete after %s: %s; hub %s", time.Since(began).Round(time.Second), ann, fleetHubState(b, hp))
				b.Fatal(err)
			}
			progress(b, "announce: %s", ann)
			if warmup > 0 {
				res, err := gen.RunFor(ctx, warmup)
				if err != nil {
					b.Fatal(err)
				}
				lost := w.drain(30 * time.Second)
				w.takeLatencies()
				progress(b, "warm-up, not measured: %s; %d samples not observed", res, lost)
			}

			loadBefore := loadAverage()
			api0 := apiserverRequests(ctx, b, kube)
			hub0 := hubMetrics(b, hp)
			cpu0 := hp.cpu(b)
			var res *loadgen.Result
			for b.Loop() {
				w.writes.Store(0)
				w.counting.Store(true)
				res, err = gen.Run(ctx)
				w.counting.Store(false)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			secs := res.Elapsed.Seconds()
			hubCPU := hp.cpu(b) - cpu0
			mem := hp.memory(b)
			hub1 := hubMetrics(b, hp)
			api1 := apiserverRequests(ctx, b, kube)
			unobserved := w.drain(30 * time.Second)
			if err := w.failed(); err != nil {
				b.Fatal(err)
			}
			lat := w.takeLatencies()
			d := func(name string) float64 { return hub1[name] - hub0[name] }

			writes, byKind := apiRequests(api0, api1, writeVerbs)
			reads, readKinds := apiRequests(api0, api1, map[string]bool{"GET": true, "LIST": true})
			var readList []string
			for _, k := range slices.Sorted(maps.Keys(readKinds)) {
				readList = append(readList, fmt.Sprintf("%s %.1f/s", k, readKinds[k]/secs))
			}
			var kinds []string
			for _, k := range slices.Sorted(maps.Keys(byKind)) {
				kinds = append(kinds, fmt.Sprintf("%s %.1f/s", k, byKind[k]/secs))
			}
			apiThrottled := 0.0
			for k, v := range api1 {
				if strings.Contains(k, `code="429"`) {
					apiThrottled += v - api0[k]
				}
			}
			snapDur := d(`tugboat_receiver_request_duration_seconds_sum{endpoint="state"}`)
			snapN := d(`tugboat_receiver_request_duration_seconds_count{endpoint="state"}`)
			unchanged := d("tugboat_recorder_snapshot_releases_unchanged_total")
			beats := d("tugboat_recorder_heartbeats_total")
			skipped := d("tugboat_recorder_heartbeats_skipped_total")

			progress(b, "load average: %s before the run, %s after", loadBefore, loadAverage())
			progress(b, "run: %s", res)
			progress(b, "receipt to persisted: %d samples, %d not observed; p50 %s p90 %s p99 %s max %s",
				len(lat), unobserved, loadgen.Quantile(lat, 0.5), loadgen.Quantile(lat, 0.9), loadgen.Quantile(lat, 0.99), loadgen.Quantile(lat, 1))
			progress(b, "hub: RSS %s (peak %s), Go heap in use %.1f MiB, CPU %.2f cores", mem.rss, mem.hwm,
				hub1["go_memstats_heap_inuse_bytes"]/(1<<20), hubCPU.Seconds()/secs)
			progress(b, "API server writes during the run: %.1f/s: %s", writes/secs, strings.Join(kinds, ", "))
			progress(b, "API server reads during the run: %.1f/s: %s", reads/secs, strings.Join(readList, ", "))
			progress(b, "recorder: %.0f queued writes applying %.0f ops (%.2f ops per write), %.0f started from its own last write (the cache behind)", d("tugboat_recorder_writes_total"),
				d("tugboat_recorder_written_ops_total"), d("tugboat_recorder_written_ops_total")/max(d("tugboat_recorder_writes_total"), 1),
				d("tugboat_recorder_writes_from_last_write_total"))
			progress(b, "snapshots: %d (%.1f/s), %d releases, %.0f found unchanged; hub time per snapshot %.1f ms (mean); p50 %s p99 %s as sent; heartbeats written %.0f, skipped %.0f",
				res.Snapshots, float64(res.Snapshots)/secs, res.SnapshotReleases, unchanged, 1000*snapDur/max(snapN, 1),
				res.StateLatency(0.5), res.StateLatency(0.99), beats, skipped)

			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(res.Requests)/secs, "requests/s")
			b.ReportMetric(float64(res.Snapshots)/secs, "snapshots/s")
			b.ReportMetric(float64(res.EventsAccepted)/secs, "accepted-events/s")
			b.ReportMetric(float64(w.writes.Load())/secs, "rh-writes/s")
			b.ReportMetric(writes/secs, "api-writes/s")
			b.ReportMetric(millis(loadgen.Quantile(lat, 0.50)), "persist-p50-ms")
			b.ReportMetric(millis(loadgen.Quantile(lat, 0.99)), "persist-p99-ms")
			b.ReportMetric(millis(res.StateLatency(0.99)), "snapshot-p99-ms")
			b.ReportMetric(1000*snapDur/max(snapN, 1), "snapshot-hub-ms")
			b.ReportMetric(float64(res.Codes[429]), "hub-429s")
			b.ReportMetric(apiThrottled, "apiserver-429s")
			b.ReportMetric(float64(len(res.Errors())), "error-kinds")
			b.ReportMetric(hubCPU.Seconds()/secs, "hub-cpu-cores")
			b.ReportMetric(mem.rss.mib(), "hub-rss-MiB")
			b.ReportMetric(mem.hwm.mib(), "hub-peak-rss-MiB")
			b.ReportMetric(hub1["go_memstats_heap_inuse_bytes"]/(1<<20), "hub-heap-MiB")
		})
	}
}

func fleetSizes(b *testing.B) []int {
	v := strings.TrimSpace(getenvDefault(envFleetSpokes, "500"))
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want positive integers, comma-separated, e.g. 500,1000", envFleetSpokes, v)
		}
		out = append(out, n)
	}
	return out
}

// apiserverRequests reads the API server's apiserver_request_total, by
// its labels.
func apiserverRequests(ctx context.Context, b *testing.B, kube kubernetes.Interface) map[string]float64 {
	b.Helper()
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatalf("reading the API server's metrics: %v", err)
	}
	return promSeries(string(raw), "apiserver_request_total{")
}

var promLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

// writeVerbs are the verbs of apiserver_request_total that write.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "APPLY": true}

// apiRequests sums the requests of verbs between two readings of
// apiserver_request_total, in all and by "VERB resource[/subresource]".
func apiRequests(before, after map[string]float64, verbs map[string]bool) (float64, map[string]float64) {
	total := 0.0
	by := map[string]float64{}
	for k, v := range after {
		labels := map[string]string{}
		for _, m := range promLabel.FindAllStringSubmatch(k, -1) {
			labels[m[1]] = m[2]
		}
		if !verbs[labels["verb"]] {
			continue
		}
		d := v - before[k]
		if d <= 0 {
			continue
		}
		what := labels["resource"]
		if labels["subresource"] != "" {
			what += "/" + labels["subresource"]
		}
		total += d
		by[labels["verb"]+" "+what] += d
	}
	return total, by
}

func getenvDefault(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// hubMetrics reads every series of the hub's /metrics.
func hubMetrics(b *testing.B, hp *hubProcess) map[string]float64 {
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
	return promSeries(string(raw), "")
}

// promSeries parses the samples of a Prometheus text exposition whose
// series start with prefix, by their full name with labels.
func promSeries(raw, prefix string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(raw, "\n") {
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if f, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = f
		}
	}
	return out
}

// failed reports the watch's failure, if any, and keeps watching.
func (w *historyWatch) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failure
}

// takeLatencies returns the latencies observed so far, sorted, and
// forgets them.
func (w *historyWatch) takeLatencies() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	lat := slices.Sorted(slices.Values(w.lat))
	w.lat = nil
	return lat
}

// progress logs to the benchmark and, at once, to stderr: a long fleet run
// shows where it stands (go test -v streams stderr; b.Logf is printed when
// the benchmark ends).
func progress(b *testing.B, format string, args ...any) {
	b.Helper()
	b.Logf(format, args...)
	fmt.Fprintf(os.Stderr, "%s %s: %s\n", time.Now().UTC().Format(time.TimeOnly), b.Name(), fmt.Sprintf(format, args...))
}

// fleetHubState is the hub process's memory and CPU so far, for progress lines.
func fleetHubState(b *testing.B, hp *hubProcess) string {
	m := hp.memory(b)
	return fmt.Sprintf("RSS %s (peak %s), CPU %s so far", m.rss, m.hwm, hp.cpu(b))
}
