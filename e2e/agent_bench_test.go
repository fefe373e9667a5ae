package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/harness"
)

// Environment variables that size BenchmarkAgent_rss5000Pods.
const (
	// envBenchPods is how many Pods the releases run (default 5000).
	envBenchPods = "TUGBOAT_BENCH_PODS"
	// envBenchReplicas is the replicas of each release's Deployment
	// (default 100); the release count follows.
	envBenchReplicas = "TUGBOAT_BENCH_REPLICAS"
	// envBenchSettle is how long the agent idles before the final reading
	// (default 1m).
	envBenchSettle = "TUGBOAT_BENCH_SETTLE"
	// envBenchGOMEMLIMIT, when set, is the agent's GOMEMLIMIT (e.g. 64MiB).
	envBenchGOMEMLIMIT = "TUGBOAT_BENCH_AGENT_GOMEMLIMIT"
)

// BenchmarkAgent_rss5000Pods measures the resident memory of a real agent
// process (the tugboat binary, as deployed) tracking releases that run
// 5,000 Pods on a harness spoke: Helm installs of the web chart, 100
// replicas each, whose ReplicaSets and Pods the agent's webhook labels as
// the controller-manager creates them. Once the agent has reported every
// release healthy and an event for every Pod it tracks, it reports VmRSS
// (MiB-rss-ready), then, after the agent idled for TUGBOAT_BENCH_SETTLE,
// VmRSS (MiB-rss) split into RssAnon (its own memory) and RssFile (pages of
// the binary it touched), VmHWM (the peak), and the Go heap in use and the
// GC's goal from the agent's metrics. Goal: VmRSS under 100 MiB. It takes minutes (the controller-manager
// creates Pods at its default 20 requests per second); run it alone:
//
//	go test -run '^$' -bench BenchmarkAgent_rss5000Pods -benchtime 1x ./e2e/
func BenchmarkAgent_rss5000Pods(b *testing.B) {
	pods, replicas := envInt(b, envBenchPods, 5000), envInt(b, envBenchReplicas, 100)
	releases := (pods + replicas - 1) / replicas
	g := NewWithT(b)
	ctx := context.Background()
	start := time.Now()

	bin := buildTugboat(b)
	spoke := harness.StartT(b, harness.Options{Name: "bench-spoke", StartTimeout: 3 * time.Minute})
	addKwokNodes(b, spoke, pods)

	// A key as the hub generates them: 32 random bytes, hex.
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	key := []byte(hex.EncodeToString(raw))
	keyFile := filepath.Join(b.TempDir(), "key")
	g.Expect(os.WriteFile(keyFile, key, 0o600)).To(Succeed())
	rcv := newBenchReceiver(b, "bench", key)
	metricsAddr := closedAddr(b)
	agentProc, _ := startAgentProcess(b, bin, spoke.KubeconfigPath, "bench", rcv.url, keyFile, metricsAddr)

	// The agent registers its webhooks once its informers have synced.
	g.Eventually(func() error {
		return spoke.Client.Get(ctx, client.ObjectKey{Name: "tugboat-agent"}, &admissionregistrationv1.MutatingWebhookConfiguration{})
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	helmCfg := helmConfig(b, spoke, "bench")
	ch, err := loader.Load(webChart)
	g.Expect(err).NotTo(HaveOccurred())
	installStart := time.Now()
	for i := range releases {
		in := action.NewInstall(helmCfg)
		in.ReleaseName, in.Namespace, in.CreateNamespace = fmt.Sprintf("web-%03d", i), "bench", true
		if _, err := in.RunWithContext(ctx, ch, map[string]any{"replicaCount": min(replicas, pods-i*replicas)}); err != nil {
			b.Fatalf("helm install %s: %v", in.ReleaseName, err)
		}
	}

	// Every Pod runs. The webhook labels most as they are created; it fails
	// open (a 2 s timeout) when the machine is loaded, and the Pods it
	// missed stay unlabeled: the agent does not track them.
	var list corev1.PodList
	g.Eventually(func(g Gomega) int {
		g.Expect(spoke.Client.List(ctx, &list, client.InNamespace("bench"))).To(Succeed())
		running := 0
		for i := range list.Items {
			if list.Items[i].Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running
	}).WithTimeout(time.Duration(pods/5+120) * time.Second).WithPolling(5 * time.Second).Should(Equal(pods))
	labeled := 0
	for i := range list.Items {
		if _, ok := list.Items[i].Labels[tugboatv1alpha1.LabelRelease]; ok {
			labeled++
		}
	}
	b.Logf("%d pods running, %d labeled, %s after the installs", pods, labeled, time.Since(installStart).Round(time.Second))
	g.Expect(labeled).To(BeNumerically(">=", pods*9/10), "the webhook labeled too few Pods")

	// The agent has reported an event for every labeled Pod, and every
	// release healthy.
	g.Eventually(func(g Gomega) {
		g.Expect(rcv.podsCreated()).To(BeNumerically(">=", labeled))
		snap := rcv.snapshot()
		g.Expect(snap).NotTo(BeNil())
		healthy := 0
		for _, r := range snap.Releases {
			if r.Namespace == "bench" && r.Health == wire.HealthCurrent {
				healthy++
			}
		}
		g.Expect(healthy).To(Equal(releases))
	}).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	b.Logf("agent reported %d releases healthy and %d pods created, %s after start", releases, rcv.podsCreated(), time.Since(start).Round(time.Second))

	// Resident memory right away, then once the agent has idled for the
	// settle time (the Go runtime returns freed pages to the OS in the
	// background, over minutes).
	rssReady := procMemory(b, agentProc.Process.Pid)["VmRSS"]
	if settle := envDuration(b, envBenchSettle, time.Minute); settle > 0 {
		<-time.After(settle) // a measurement window, not a wait for a controller
	}
	var mem map[string]float64
	for b.Loop() {
		mem = procMemory(b, agentProc.Process.Pid)
	}
	b.ReportMetric(rssReady, "MiB-rss-ready")
	b.ReportMetric(mem["VmRSS"], "MiB-rss")
	b.ReportMetric(mem["RssAnon"], "MiB-rss-anon")
	b.ReportMetric(mem["RssFile"], "MiB-rss-file")
	b.ReportMetric(mem["VmHWM"], "MiB-hwm")
	b.ReportMetric(float64(pods), "pods")
	b.ReportMetric(float64(labeled), "pods-tracked")
	// The Go heap, to tell live data from what the runtime holds on to.
	heap := goMetrics(b, metricsAddr, "go_memstats_heap_inuse_bytes", "go_memstats_next_gc_bytes")
	b.ReportMetric(heap["go_memstats_heap_inuse_bytes"]/(1<<20), "MiB-heap-inuse")
	b.ReportMetric(heap["go_memstats_next_gc_bytes"]/(1<<20), "MiB-gc-goal")
}

// goMetrics scrapes the named unlabeled gauges from the agent's /metrics.
func goMetrics(b *testing.B, addr string, names ...string) map[string]float64 {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatalf("scraping the agent's metrics: %v", err)
	}
	defer resp.Body.Close()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			b.Fatalf("metric %s: %v", name, err)
		}
		out[name] = v
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			b.Fatalf("the agent's /metrics has no %s", n)
		}
	}
	return out
}

// helmConfig is the Helm SDK configuration for namespace ns of c.
func helmConfig(b *testing.B, c *harness.Cluster, ns string) *action.Configuration {
	b.Helper()
	settings := cli.New()
	settings.KubeConfig = c.KubeconfigPath
	settings.SetNamespace(ns)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret", func(string, ...any) {}); err != nil {
		b.Fatalf("helm init: %v", err)
	}
	return cfg
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		b.Fatalf("%s=%q: want a duration", name, s)
	}
	return d
}

// buildTugboat builds the tugboat binary from this repository as the agent's
// image holds it: with only the agent's subcommands (-tags agentonly, see
// the Makefile's build target).
func buildTugboat(tb testing.TB) string {
	tb.Helper()
	wd, _ := os.Getwd()
	root, err := bins.FindRepoRoot(wd)
	if err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(tb.TempDir(), "tugboat")
	cmd := exec.Command("go", "build", "-tags", "agentonly", "-o", bin, "./cmd/tugboat")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build -tags agentonly ./cmd/tugboat: %v\n%s", err, out)
	}
	return bin
}

// addKwokNodes adds fake nodes for pods Pods (the harness's one node takes
// 110), each with its own pod CIDR so that kwok does not run out of IPs.
func addKwokNodes(b *testing.B, c *harness.Cluster, pods int) {
	b.Helper()
	const perNode = 1000
	for i := range (pods + perNode - 1) / perNode {
		capacity := corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("4Ti"),
			corev1.ResourcePods: resource.MustParse(strconv.Itoa(perNode)),
		}
		name := fmt.Sprintf("kwok-bench-%d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
				Labels:      map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"},
			},
			Spec:   corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.0.0/16", 100+i)},
			Status: corev1.NodeStatus{Allocatable: capacity, Capacity: capacity},
		}
		if err := c.Client.Create(context.Background(), node); err != nil {
			b.Fatalf("creating node %s: %v", name, err)
		}
	}
}

// startAgentProcess runs `tugboat agent` for spoke against the cluster c,
// reporting to hubURL, serving its metrics on metricsAddr, with extra flags
// appended; it runs in its own process group, logs to a file (returned; its
// tail is logged when tb failed) and is stopped (SIGTERM, then SIGKILL) at
// cleanup.
func startAgentProcess(tb testing.TB, bin, kubeconfig, spoke, hubURL, keyFile, metricsAddr string, extra ...string) (*exec.Cmd, string) {
	tb.Helper()
	logPath := filepath.Join(tb.TempDir(), "agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	args := []string{"agent",
		"--kubeconfig", kubeconfig,
		"--spoke", spoke,
		"--hub-url", hubURL, "--hub-insecure-http", "--hub-key-file", keyFile,
		"--hub-state-interval", "2s",
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", "0",
		"--webhook-bind-address", "127.0.0.1:0", "--webhook-url-host", "127.0.0.1",
	}
	cmd := exec.Command(bin, append(args, extra...)...)
	if limit := os.Getenv(envBenchGOMEMLIMIT); limit != "" {
		cmd.Env = append(os.Environ(), "GOMEMLIMIT="+limit)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting the agent: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logFile.Close()
		if tb.Failed() {
			if out, err := os.ReadFile(logPath); err == nil {
				tb.Logf("agent log %s (last 4 KiB):\n%s", logPath, tail(out, 4096))
			}
		}
	})
	return cmd, logPath
}

func tail(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return b[len(b)-n:]
}

// procMemory returns fields of /proc/<pid>/status in MiB: VmRSS (resident),
// VmHWM (peak resident), RssAnon (the process's own memory) and RssFile
// (mapped files: mostly the pages of the binary it touched).
func procMemory(b *testing.B, pid int) map[string]float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		field, value, ok := strings.Cut(line, ":")
		if !ok || (field != "VmRSS" && field != "VmHWM" && field != "RssAnon" && field != "RssFile") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		if err != nil {
			b.Fatalf("parsing %s %q: %v", field, value, err)
		}
		out[field] = kb / 1024
	}
	if len(out) != 4 {
		b.Fatalf("pid %d: memory fields %v", pid, out)
	}
	return out
}

// benchReceiver stands in for the hub: it verifies signatures, keeps the
// latest state snapshot and counts the Pods the agent reported created.
type benchReceiver struct {
	url      string
	spoke    string
	verifier *wire.Verifier

	mu   sync.Mutex
	snap *wire.StateSnapshot
	pods map[string]bool
}

func newBenchReceiver(b *testing.B, spoke string, key []byte) *benchReceiver {
	b.Helper()
	v, err := wire.NewVerifier(key, nil)
	if err != nil {
		b.Fatal(err)
	}
	r := &benchReceiver{spoke: spoke, verifier: v, pods: map[string]bool{}}
	srv := httptest.NewServer(r)
	b.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *benchReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 8<<20))
	if err != nil || req.Method != http.MethodPost {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if err := r.verifier.VerifyRequest(req, body); err != nil {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	n := 0
	switch req.URL.Path {
	case wire.StatePath(r.spoke):
		snap, err := wire.DecodeStateSnapshot(bytes.NewReader(body), int64(len(body)))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.snap = snap
		r.mu.Unlock()
		n = len(snap.Releases)
	case wire.EventsPath(r.spoke):
		batch, err := wire.DecodeEventBatch(bytes.NewReader(body), int64(len(body)))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, e := range batch.Events {
			if e.Kind == wire.EventObjectCreated && e.Object != nil && e.Object.Kind == "Pod" {
				r.pods[e.Object.UID] = true
			}
		}
		r.mu.Unlock()
		n = len(batch.Events)
	default:
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(wire.AcceptedResponse{Received: n, Accepted: n})
}

func (r *benchReceiver) snapshot() *wire.StateSnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snap
}

func (r *benchReceiver) podsCreated() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pods)
}
