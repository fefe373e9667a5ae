package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"

	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/loadgen"
)

// BenchmarkHub_replicas measures what a second hub replica adds: the same
// load as BenchmarkHub_endToEnd (the load generator, 200 spokes × 20
// releases by default, TUGBOAT_BENCH_SPOKES, TUGBOAT_BENCH_RELEASES and
// TUGBOAT_BENCH_DURATION resize it) against 1 and then 2 `tugboat hub`
// processes with leader election, behind the loopback balancer of the HA
// tests, on one real hub control plane. Each sub-benchmark has its own
// namespace and spokes. It reports accepted events/s, requests/s, the
// request latency, the CPU the hub replicas and the hub control plane
// (etcd and kube-apiserver) used, in all and per accepted event, and how
// the accepted events split between the replicas. One iteration whatever b.N; it runs only when
// -bench selects it. The figures are in docs/scaling.md.
func BenchmarkHub_replicas(b *testing.B) {
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		b.Skip("runs only under -bench")
	}
	if testing.Short() {
		b.Skip("starts a control plane and hub processes")
	}
	load := replicaLoad{
		duration: hubBenchDuration(b, envBenchDuration, 20*time.Second),
		spokes:   hubBenchInt(b, envBenchSpokes, 200),
		releases: hubBenchInt(b, envBenchReleases, 20),
	}
	hubCluster := harness.StartT(b, harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true})
	bin := buildHubBinary(b)
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) { benchReplicas(b, hubCluster, bin, n, load) })
	}
}

type replicaLoad struct {
	duration         time.Duration
	spokes, releases int
}

// acceptedSeries is the receiver's count of accepted events.
const acceptedSeries = `tugboat_receiver_events_total{endpoint="events",result="accepted"}`

func benchReplicas(b *testing.B, hubCluster *harness.Cluster, bin string, n int, load replicaLoad) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("bench-replicas-%d", n)
	if err := hubCluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	// The next sub-benchmark starts from the same amount of data (the
	// harness runs no namespace controller to empty the namespace).
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer ccancel()
		for _, obj := range []client.Object{&tugboatv1alpha1.ReleaseHistory{}, &tugboatv1alpha1.Spoke{}, &corev1.Secret{}} {
			if err := hubCluster.Client.DeleteAllOf(cctx, obj, client.InNamespace(ns)); err != nil {
				b.Errorf("emptying %s: %v", ns, err)
			}
		}
	}()
	var hubs []*hubProcess
	var addrs []string
	for range n {
		hp := startHubProcess(b, bin, hubCluster.KubeconfigPath, "--leader-elect=true", "--leader-election-namespace", ns)
		hubs, addrs = append(hubs, hp), append(addrs, hp.addr)
	}
	lb := newBalancer(b, addrs...)
	spokes, err := loadgen.Register(ctx, hubCluster.Client, ns, "spoke", load.spokes)
	if err != nil {
		b.Fatal(err)
	}
	gen, err := loadgen.New(loadgen.Options{
		URL: "http://" + lb.Addr(), Spokes: spokes, Releases: load.releases,
		Duration: load.duration, MaxRequests: 1_000_000, RequestTimeout: 2 * time.Minute,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	ann, err := gen.Announce(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d replica(s); announce: %s", n, ann)

	loadBefore := loadAverage()
	hubCPU := func() time.Duration {
		var sum time.Duration
		for _, hp := range hubs {
			sum += hp.cpu(b)
		}
		return sum
	}
	cpBefore, hubBefore := controlPlaneCPU(b, hubCluster), hubCPU()
	acceptedBefore := make([]float64, n)
	for i, hp := range hubs {
		acceptedBefore[i] = hp.counter(b, acceptedSeries)
	}
	var runs []*loadgen.Result
	for b.Loop() {
		res, err := gen.Run(ctx)
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, res)
		b.Logf("run: %s", res)
	}
	b.StopTimer()
	cp, hubsUsed := controlPlaneCPU(b, hubCluster)-cpBefore, hubCPU()-hubBefore
	var accepted, requests, failed int
	var elapsed time.Duration
	for _, r := range runs {
		accepted += r.EventsAccepted
		requests += r.Requests
		elapsed += r.Elapsed
		for _, c := range r.Errors() {
			failed += c
		}
	}
	var shares []string
	for i, hp := range hubs {
		shares = append(shares, fmt.Sprintf("%.0f", hp.counter(b, acceptedSeries)-acceptedBefore[i]))
	}
	b.Logf("%d replica(s): load average %s before, %s after; accepted events per replica: %s; hub CPU %s, control plane CPU %s",
		n, loadBefore, loadAverage(), strings.Join(shares, ", "), hubsUsed, cp)
	secs := elapsed.Seconds()
	last := runs[len(runs)-1]
	b.ReportMetric(0, "ns/op") // one fixed-length run: ns/op means nothing
	b.ReportMetric(float64(accepted)/secs, "accepted-events/s")
	b.ReportMetric(float64(requests)/secs, "requests/s")
	b.ReportMetric(float64(failed), "failed-requests")
	b.ReportMetric(millis(last.Latency(0.50)), "request-p50-ms")
	b.ReportMetric(millis(last.Latency(0.99)), "request-p99-ms")
	b.ReportMetric(hubsUsed.Seconds()/secs, "hub-cpu-cores")
	b.ReportMetric(cp.Seconds()/secs, "control-plane-cpu-cores")
	// CPU per accepted event: what each side costs, whatever else the
	// machine runs meanwhile.
	if accepted > 0 {
		b.ReportMetric(millis(hubsUsed)/float64(accepted), "hub-cpu-ms/event")
		b.ReportMetric(millis(cp)/float64(accepted), "control-plane-cpu-ms/event")
	}
}

// controlPlaneCPU is the CPU time the cluster's processes (etcd and
// kube-apiserver for a control-plane-only cluster) used so far.
func controlPlaneCPU(b *testing.B, c *harness.Cluster) time.Duration {
	b.Helper()
	var sum time.Duration
	for _, pid := range c.PIDs() {
		d, err := processCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		sum += d
	}
	return sum
}

// processCPU reads the user and system CPU time of pid from
// /proc/<pid>/stat (clock ticks of 1/100 s).
func processCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %q", pid, raw)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}
