package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/chaos"
	"tugboat.dev/tugboat/e2e/devenv"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/identity"
)

// chaosSpokes are the suite's spokes, in pipeline order: releases are made
// in dev with the helm CLI and promoted to staging by its agent (helm
// strategy).
var chaosSpokes = []string{"dev", "staging"}

// chaosEnv is the suite's fleet: a hub control plane with `tugboat hub` as
// a process (or, for the clock scenario, the same hub in-process with a
// skewed clock), two spoke clusters, and on each an agent process that
// reaches the hub through its own chaos.Proxy.
type chaosEnv struct {
	t        *testing.T
	cfg      chaos.Config
	bin      string // the tugboat binary: hub and agents
	helmCLI  string
	repo     *devenv.ChartRepo
	f        *fleet // the hub cluster, its namespace and the read helpers
	spokes   map[string]*harness.Cluster
	proxies  map[string]*chaos.Proxy
	keyFiles map[string]string

	hubProc       *hubProcess // nil while the hub is down or in-process
	stopInProcess func()
	agents        map[string]*exec.Cmd
	agentLogs     map[string][]string // every agent process's log, by spoke
}

// Protocol intervals before time scaling: the agent's and the hub's
// defaults (DefaultStateInterval, DefaultBackoffMax, the Spoke heartbeat
// timeout).
const (
	chaosStateInterval    = 30 * time.Second
	chaosBackoffMax       = 30 * time.Second
	chaosHeartbeatTimeout = 90 * time.Second
)

func newChaosEnv(t *testing.T, cfg chaos.Config, versions []string) *chaosEnv {
	t.Helper()
	return newChaosFleet(t, cfg, versions, "chaos", func(e *chaosEnv) string {
		e.startHub()
		return e.hubProc.addr
	})
}

// newChaosFleet starts what the chaos and HA suites share: the helm CLI,
// the tugboat binary, a chart repository serving versions, the hub control
// plane with namespace ns and the hub chart installed (the hub runs as its
// chart's ServiceAccount, with the chart's RBAC), and the spoke clusters.
// startHubs then starts the hub or hubs and returns the address the
// spokes' proxies forward to; last, each spoke is registered and gets its
// proxy and an agent process.
func newChaosFleet(t *testing.T, cfg chaos.Config, versions []string, ns string, startHubs func(e *chaosEnv) string) *chaosEnv {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	root, err := bins.FindRepoRoot(".")
	g.Expect(err).NotTo(HaveOccurred())
	e := &chaosEnv{t: t, cfg: cfg, spokes: map[string]*harness.Cluster{}, proxies: map[string]*chaos.Proxy{},
		keyFiles: map[string]string{}, agents: map[string]*exec.Cmd{}, agentLogs: map[string][]string{}}
	e.helmCLI, err = bins.EnsureHelm(ctx, root, nil)
	g.Expect(err).NotTo(HaveOccurred())
	e.bin = buildHubBinary(t) // the full binary: `tugboat hub` and `tugboat agent`
	e.repo, err = devenv.StartChartRepo(t.TempDir(), versions...)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(e.repo.Stop)

	hubCluster, clusters := startClusters(t, len(chaosSpokes))
	e.f = &fleet{t: t, hub: hubCluster, ns: ns}
	g.Expect(hubCluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.f.ns}})).To(Succeed())
	installHubChart(t, hubCluster, e.f.ns)
	upstream := startHubs(e)
	for i, name := range chaosSpokes {
		e.spokes[name] = clusters[i]
		p, err := chaos.NewProxy(upstream)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = p.Close() })
		e.proxies[name] = p
		e.keyFiles[name] = filepath.Join(t.TempDir(), name+".key")
		g.Expect(os.WriteFile(e.keyFiles[name], e.f.registerSpoke(name), 0o600)).To(Succeed())
		e.startAgent(name)
	}
	return e
}

// hubFlags are the flags of `tugboat hub`, time-scaled.
func (e *chaosEnv) hubFlags() []string {
	return []string{
		"--spoke-heartbeat-timeout", e.cfg.Protocol(chaosHeartbeatTimeout, 10*time.Second).String(),
		"--receiver-action-poll-timeout", "2s",
		"--history-revisions", strconv.Itoa(tugboatv1alpha1.MaxRevisions),
		// Heartbeats go to the replica's digest in the chart's namespace,
		// as a deployed hub's do (its Role tugboat-hub-heartbeats).
		"--heartbeat-namespace", hubReleaseNamespace,
	}
}

// startHub starts `tugboat hub` and points the proxies at it.
func (e *chaosEnv) startHub() {
	e.t.Helper()
	e.hubProc = startHubProcess(e.t, e.bin, e.f.hubKubeconfig(), e.hubFlags()...)
	for _, p := range e.proxies {
		p.SetUpstream(e.hubProc.addr)
	}
}

// killHub kills the hub process with SIGKILL and waits until it is gone.
func (e *chaosEnv) killHub(g Gomega) {
	pid := e.hubProc.pid()
	g.Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
	g.Eventually(func() bool { return harness.ProcessAlive(pid) }).WithTimeout(30 * time.Second).Should(BeFalse())
	e.hubProc = nil
}

// startInProcessHub stops the hub process and runs the same hub in the test
// process, whose receiver reads the time from clock (receiver.Options.Clock,
// the hub's clock hook) and counts into reg.
func (e *chaosEnv) startInProcessHub(g Gomega, clock func() time.Time, reg *prometheus.Registry) {
	if e.hubProc != nil {
		e.killHub(g)
	}
	opts := hubtest.Options()
	opts.Receiver.BindAddress = freeAddr(e.t)
	opts.Receiver.Clock = clock
	opts.Receiver.Registerer = reg
	opts.Receiver.ActionPollTimeout = 2 * time.Second
	opts.Spoke.HeartbeatTimeout = e.cfg.Protocol(chaosHeartbeatTimeout, 10*time.Second)
	opts.History.RevisionLimit = tugboatv1alpha1.MaxRevisions
	opts.Heartbeats.Namespace = hubReleaseNamespace
	_, e.stopInProcess = hubtest.Start(e.t, identity.HubConfig(e.f.hub.RESTConfig), opts)
	for _, p := range e.proxies {
		p.SetUpstream(opts.Receiver.BindAddress)
	}
}

// startAgent starts the agent process of a spoke, reporting through its
// proxy.
func (e *chaosEnv) startAgent(name string) {
	e.t.Helper()
	cmd, logPath := startAgentProcess(e.t, e.bin, e.f.agentKubeconfig(e.spokes[name], "apps"), name, "http://"+e.proxies[name].Addr(), e.keyFiles[name], "0",
		"--hub-state-interval", e.cfg.Protocol(chaosStateInterval, time.Second).String(),
		"--hub-backoff-max", e.cfg.Protocol(chaosBackoffMax, time.Second).String(),
		"--actions-allowed-namespaces", "apps",
		"--actions-allowed-chart-sources", e.repo.URL,
		"--actions-pending-grace", "5s",
	)
	e.agents[name] = cmd
	e.agentLogs[name] = append(e.agentLogs[name], logPath)
}

// replacedPending counts, by revision, the pending revisions a spoke's
// agents replaced: an agent killed mid-upgrade leaves one, and the next
// agent deletes it and upgrades again (agent/actions), a second real
// start of that revision, which the hub rightly records twice.
func (e *chaosEnv) replacedPending(g Gomega, spoke string) map[int32]int32 {
	out := map[int32]int32{}
	for _, path := range e.agentLogs[spoke] {
		raw, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(string(raw), "\n") {
			var entry struct {
				Msg      string `json:"msg"`
				Revision int32  `json:"revision"`
			}
			if json.Unmarshal([]byte(line), &entry) == nil && strings.HasPrefix(entry.Msg, "Replacing the pending revision") {
				out[entry.Revision]++
			}
		}
	}
	return out
}

// killAgent kills a spoke's agent (SIGKILL to its process group) and waits
// until it is gone.
func (e *chaosEnv) killAgent(g Gomega, name string) {
	pid := e.agents[name].Process.Pid
	g.Expect(syscall.Kill(-pid, syscall.SIGKILL)).To(Succeed())
	g.Eventually(func() bool { return harness.ProcessAlive(pid) }).WithTimeout(30 * time.Second).Should(BeFalse())
}

// helm runs the real helm CLI against a spoke and fails on an error.
func (e *chaosEnv) helm(g Gomega, spoke string, args ...string) {
	args = append([]string{"--kubeconfig", e.spokes[spoke].KubeconfigPath, "-n", "apps"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, e.helmCLI, args...).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "helm %v:\n%s", args, out)
}

// release is `helm upgrade --install` of the demo chart at version on a
// spoke: one new Helm revision.
func (e *chaosEnv) release(g Gomega, spoke, name, version string) {
	// --history-max 0: Helm keeps every revision (the CLI's default prunes
	// past 10), so that each can be compared with the hub's record.
	e.helm(g, spoke, "upgrade", "--install", name, e.repo.ChartURL(version), "--create-namespace", "--history-max", "0")
}

// storage returns a release's revisions as the spoke's Helm storage
// (its release Secrets) holds them.
func (e *chaosEnv) storage(g Gomega, spoke, name string) []*release.Release {
	cfg, err := helmActions(e.spokes[spoke], "apps")
	g.Expect(err).NotTo(HaveOccurred())
	revs, err := cfg.Releases.History(name)
	g.Expect(err).NotTo(HaveOccurred())
	return revs
}

// waitPromoted waits until staging's Helm storage has the release deployed
// at version: the staging agent applied the promotion.
func (e *chaosEnv) waitPromoted(g Gomega, name, version string, bound time.Duration) {
	cfg, err := helmActions(e.spokes["staging"], "apps")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		rel, err := action.NewGet(cfg).Run(name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rel.Chart.Metadata.Version).To(Equal(version))
		g.Expect(rel.Info.Status).To(Equal(release.StatusDeployed))
	}).WithTimeout(bound).WithPolling(250*time.Millisecond).Should(Succeed(), "%s %s promoted to staging", name, version)
}

// setup installs a scenario's release at 1.0.0 in both spokes and creates
// its Pipeline (dev → staging, helm strategy, no soak).
func (e *chaosEnv) setup(g Gomega, name string) {
	for _, s := range chaosSpokes {
		e.release(g, s, name, "1.0.0")
	}
	// Both recorded at 1.0.0 before the Pipeline exists: it has nothing
	// to promote until dev moves on.
	for _, s := range chaosSpokes {
		g.Eventually(e.f.current(s, "apps", name)).WithTimeout(promoteBound).WithPolling(250*time.Millisecond).
			Should(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}), "%s on %s", name, s)
	}
	p := webPipeline(e.f.ns, tugboatv1alpha1.StrategyHelm)
	p.Name, p.Spec.Release = name, name
	p.Spec.Environments = p.Spec.Environments[:2]
	p.Spec.Promotion.Helm = &tugboatv1alpha1.HelmStrategy{Repository: e.repo.URL, Chart: devenv.DemoChart}
	// Longer than any outage of the run: a promotion waits them out.
	p.Spec.Timeout = &metav1.Duration{Duration: 30 * time.Minute}
	// Every Promotion of the run is kept, to be counted.
	p.Spec.HistoryLimit = ptr.To(int32(100))
	g.Expect(e.f.hub.Client.Create(context.Background(), p)).To(Succeed())
}

// after returns a channel that fires after d: the point at which a fault
// is injected (not a wait for a controller).
func after(d time.Duration) <-chan time.Time { return time.After(d) }

// inject waits for a drawn offset in [lo, hi] and then runs fault,
// logging what it did when.
func (e *chaosEnv) inject(r *rand.Rand, lo, hi time.Duration, what string, fault func()) {
	d := chaos.Between(r, lo, hi)
	<-after(d)
	fault()
	e.t.Logf("fault: %s, %s after the release", what, d.Round(time.Millisecond))
}

func versionN(i int) string { return fmt.Sprintf("1.0.%d", i) }

// chaosVersions are the chart versions a run needs: 1.0.0 to 1.0.n.
func chaosVersions(n int) []string {
	out := make([]string, 0, n+1)
	for i := 0; i <= n; i++ {
		out = append(out, versionN(i))
	}
	return out
}
