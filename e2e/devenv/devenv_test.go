package devenv_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
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
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/config"
	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/devenv"
	"tugboat.dev/tugboat/e2e/harness"
)

// binDir is the directory buildTugboat built into; TestMain removes it.
var binDir string

// TestMain removes the binary the package's tests built (about 160 MB;
// left behind, every run filled the disk a little more).
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildTugboat builds the real binary once for the package's tests.
var buildTugboat = sync.OnceValues(func() (string, error) {
	root, err := bins.FindRepoRoot(".")
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "tugboat-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	out := filepath.Join(dir, "tugboat")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/tugboat")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/tugboat: %w\n%s", err, b)
	}
	return out, nil
})

// upProcess is a running `tugboat dev up` or `tugboat dev demo`, whose
// stdout and stderr go to a pipe the test reads.
type upProcess struct {
	cmd    *exec.Cmd
	stdout io.ReadCloser
	lines  chan string
	output *strings.Builder
	mu     sync.Mutex
	done   chan struct{}
}

func startUp(t *testing.T, dir string, spokes string, extra ...string) *upProcess {
	t.Helper()
	return startTugboat(t, dir, append([]string{"dev", "up", "--spokes", spokes, "--dir", dir}, extra...)...)
}

// startTugboat runs the real tugboat binary with args; at the end of the
// test it kills it and cleans up the environment in dir.
func startTugboat(t *testing.T, dir string, args ...string) *upProcess {
	t.Helper()
	bin, err := buildTugboat()
	if err != nil {
		t.Fatalf("building tugboat: %v", err)
	}
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	p := &upProcess{cmd: cmd, stdout: stdout, lines: make(chan string, 1000), output: &strings.Builder{}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.output.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(p.lines)
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		_ = devenv.Down(dir, nil)
		if t.Failed() {
			t.Logf("tugboat %s output:\n%s", strings.Join(args[:2], " "), p.out())
		}
	})
	return p
}

func (p *upProcess) out() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

// waitForLine waits until a line containing substr is printed.
func (p *upProcess) waitForLine(t *testing.T, substr string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("tugboat dev up exited before printing %q", substr)
			}
			if strings.Contains(line, substr) {
				return
			}
		case <-deadline:
			t.Fatalf("tugboat dev up did not print %q within %s", substr, timeout)
		}
	}
}

// clusterPIDs returns every process of the environment: the clusters'
// and the hub's and agents'.
func clusterPIDs(g Gomega, dir string) []int {
	st, err := devenv.ReadState(dir)
	g.Expect(err).NotTo(HaveOccurred())
	var pids []int
	for _, c := range st.Clusters {
		pids = append(pids, c.PIDs...)
	}
	for _, p := range st.Processes {
		pids = append(pids, p.PID)
	}
	return pids
}

// TestDevUp_hubAndTwoSpokes runs the real `tugboat dev up --spokes 2`: every
// kubeconfig reaches its own API server with a Ready node, the hub serves the
// tugboat CRDs, and Ctrl-C stops everything and cleans up.
func TestDevUp_hubAndTwoSpokes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	up := startUp(t, dir, "2")
	up.waitForLine(t, "Press Ctrl-C", 4*time.Minute)
	g.Expect(up.out()).To(ContainSubstring("export KUBECONFIG=" + filepath.Join(dir, "kubeconfig")))

	// Each context names the namespace the environment uses there, so
	// `tugboat status` and kubectl need no -n.
	merged, err := clientcmd.LoadFromFile(filepath.Join(dir, "kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(merged.CurrentContext).To(Equal("hub"))
	g.Expect(merged.Contexts).To(HaveKeyWithValue("hub", HaveField("Namespace", devenv.DefaultNamespace)))
	g.Expect(merged.Contexts).To(HaveKeyWithValue("dev", HaveField("Namespace", devenv.DemoNamespace)))
	hubOnly, err := clientcmd.LoadFromFile(filepath.Join(dir, "hub.kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hubOnly.Contexts[hubOnly.CurrentContext].Namespace).To(Equal(devenv.DefaultNamespace))

	st, err := devenv.ReadState(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Clusters).To(HaveLen(3))
	seen := map[string]string{}
	for _, c := range st.Clusters {
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, c.Name+".kubeconfig"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.Host).To(Equal(c.APIServer))
		for other, host := range seen {
			g.Expect(cfg.Host).NotTo(Equal(host), "%s and %s share an API server", c.Name, other)
		}
		seen[c.Name] = cfg.Host
		cl, err := client.New(cfg, client.Options{Scheme: harness.DefaultScheme()})
		g.Expect(err).NotTo(HaveOccurred())
		// The node's name is only known to the cluster that has it; list
		// and check readiness through this kubeconfig.
		var nodes corev1.NodeList
		g.Expect(cl.List(ctx, &nodes)).To(Succeed())
		g.Expect(nodes.Items).To(HaveLen(1))
		ready := false
		for _, cond := range nodes.Items[0].Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		g.Expect(ready).To(BeTrue(), "node of %s Ready", c.Name)

		// A marker written through this kubeconfig is not visible through
		// the others: each reaches its own cluster.
		ns := &corev1.Namespace{}
		ns.Name = "marker-" + c.Name
		g.Expect(cl.Create(ctx, ns)).To(Succeed())

		var crds apiextensionsv1.CustomResourceDefinitionList
		g.Expect(cl.List(ctx, &crds)).To(Succeed())
		tugboatCRDs := 0
		for _, crd := range crds.Items {
			if crd.Spec.Group == "tugboat.dev" {
				tugboatCRDs++
			}
		}
		if c.Role == "hub" {
			shipped, err := config.CRDs()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tugboatCRDs).To(Equal(len(shipped)), "every CRD the hub chart ships")
		} else {
			g.Expect(tugboatCRDs).To(BeZero())
		}
	}
	for _, c := range st.Clusters {
		cfg, _ := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, c.Name+".kubeconfig"))
		cl, _ := client.New(cfg, client.Options{})
		var nsList corev1.NamespaceList
		g.Expect(cl.List(ctx, &nsList)).To(Succeed())
		markers := 0
		for _, ns := range nsList.Items {
			if strings.HasPrefix(ns.Name, "marker-") {
				markers++
				g.Expect(ns.Name).To(Equal("marker-" + c.Name))
			}
		}
		g.Expect(markers).To(Equal(1))
	}

	// The hub and both agents run: the Spokes are Ready, and a Helm
	// install on a spoke shows up on the hub.
	g.Expect(up.out()).To(ContainSubstring("spoke staging is Ready on the hub"))
	hubCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "hub.kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	hubClient, err := client.New(hubCfg, client.Options{Scheme: harness.DefaultScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	installed := helmInstall(t, filepath.Join(dir, "dev.kubeconfig"), "apps", "web")
	g.Eventually(func(g Gomega) {
		var rh tugboatv1alpha1.ReleaseHistory
		g.Expect(hubClient.Get(ctx, client.ObjectKey{Namespace: devenv.DefaultNamespace, Name: "dev.apps.web"}, &rh)).To(Succeed())
		g.Expect(rh.Status.Current).NotTo(BeNil())
		g.Expect(rh.Status.Current.ChartVersion).To(Equal("1.0.0"))
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	t.Logf("helm install on dev reached the hub's ReleaseHistory %s after the install returned", time.Since(installed).Round(time.Millisecond))

	// The embedded default promotes for real: the user's helm CLI installs
	// the sample chart 1.0.0 in dev; the pipeline promotes it to staging,
	// where the staging agent installs it (helm strategy).
	st, err = devenv.ReadState(dir)
	g.Expect(err).NotTo(HaveOccurred())
	root, err := bins.FindRepoRoot(".")
	g.Expect(err).NotTo(HaveOccurred())
	helmCLI, err := bins.EnsureHelm(ctx, root, nil)
	g.Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(helmCLI, "--kubeconfig", filepath.Join(dir, "dev.kubeconfig"), "install", devenv.DemoChart,
		st.ChartRepoURL+"/"+devenv.DemoChart+"-1.0.0.tgz", "-n", devenv.DemoNamespace, "--create-namespace").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Eventually(func(g Gomega) {
		var pr tugboatv1alpha1.Promotion
		g.Expect(hubClient.Get(ctx, client.ObjectKey{Namespace: devenv.DefaultNamespace, Name: "demo-staging-1.0.0"}, &pr)).To(Succeed())
		g.Expect(pr.Status.Phase).To(Equal(tugboatv1alpha1.PromotionSucceeded))
		// Staging's smoke test (a helmTest post step) ran on the revision
		// the staging agent made, and passed.
		g.Expect(pr.Status.Steps).To(ConsistOf(And(HaveField("Name", devenv.DemoTestStep),
			HaveField("Type", tugboatv1alpha1.StepHelmTest), HaveField("Phase", tugboatv1alpha1.StepSucceeded))))
		var rh tugboatv1alpha1.ReleaseHistory
		g.Expect(hubClient.Get(ctx, client.ObjectKey{Namespace: devenv.DefaultNamespace, Name: "staging.demo.demo"}, &rh)).To(Succeed())
		g.Expect(rh.Status.Current.ChartVersion).To(Equal("1.0.0"))
		g.Expect(rh.Status.Current.Health).To(Equal(tugboatv1alpha1.HealthCurrent))
	}).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	// The hub runs as production does: as the hub chart's ServiceAccount,
	// with the chart's RBAC, and people's decisions go through its
	// approval policy (security review 3: the dev hub ran as cluster admin
	// and no policy was installed).
	hubProc, err := clientcmd.LoadFromFile(filepath.Join(dir, "hub-process.kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hubProc.AuthInfos[hubProc.Contexts[hubProc.CurrentContext].AuthInfo].Impersonate).To(Equal(devenv.HubUser))
	g.Expect(st.Commands).To(ContainElement(HaveField("Args", ContainElement(filepath.Join(dir, "hub-process.kubeconfig")))))
	var promoted tugboatv1alpha1.Promotion
	g.Expect(hubClient.Get(ctx, client.ObjectKey{Namespace: devenv.DefaultNamespace, Name: "demo-staging-1.0.0"}, &promoted)).To(Succeed())
	forged := promoted.DeepCopy()
	forged.Status.Approvals = append(forged.Status.Approvals, tugboatv1alpha1.ApprovalVote{
		Decision: tugboatv1alpha1.DecisionApprove, User: "someone-else", Source: tugboatv1alpha1.ApprovalSourceKubernetes, Time: metav1.Now()})
	g.Expect(hubClient.Status().Update(ctx, forged)).To(MatchError(ContainSubstring("tugboat-approvals")))

	// `tugboat status` with the merged kubeconfig and no -n shows the
	// sample Pipeline: the hub context's namespace is the environment's.
	bin, err := buildTugboat()
	g.Expect(err).NotTo(HaveOccurred())
	status, err := exec.Command(bin, "status", "--kubeconfig", filepath.Join(dir, "kubeconfig")).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(status))
	g.Expect(string(status)).To(ContainSubstring(devenv.DemoChart))
	g.Expect(string(status)).NotTo(ContainSubstring("No pipelines"))

	// The sample Pipeline's Slack notifier posted to the local stand-in: the
	// promotion's first message, then updates and replies in its thread.
	g.Expect(up.out()).To(ContainSubstring("Slack messages of the sample pipeline go to " + filepath.Join(dir, devenv.SlackCaptureFile)))
	g.Eventually(func(g Gomega) {
		data, err := os.ReadFile(filepath.Join(dir, devenv.SlackCaptureFile))
		g.Expect(err).NotTo(HaveOccurred())
		var posted, updated, succeeded int
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var m struct {
				Method  string          `json:"method"`
				Channel string          `json:"channel"`
				Blocks  json.RawMessage `json:"blocks"`
			}
			g.Expect(json.Unmarshal([]byte(line), &m)).To(Succeed(), line)
			switch {
			case m.Method == "chat.postMessage" && strings.Contains(string(m.Blocks), "demo-staging-1.0.0"):
				g.Expect(m.Channel).To(Equal("#tugboat-demo"))
				posted++
			case m.Method == "chat.update":
				updated++
			}
			if strings.Contains(string(m.Blocks), "Succeeded") {
				succeeded++
			}
		}
		g.Expect(posted).To(BeNumerically(">=", 1))
		g.Expect(updated).To(BeNumerically(">=", 1))
		g.Expect(succeeded).To(BeNumerically(">=", 1))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	// Ctrl-C under `make dev | tee log`: the same Ctrl-C ends tee, so the
	// lines dev up writes while it stops go to a pipe nobody reads. Close
	// the reading end, then interrupt: everything is still cleaned up.
	pids := clusterPIDs(g, dir)
	g.Expect(up.stdout.Close()).To(Succeed())
	g.Expect(up.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	select {
	case <-up.done:
	case <-time.After(time.Minute):
		t.Fatal("tugboat dev up did not exit within a minute of SIGINT")
	}
	g.Expect(up.cmd.ProcessState.ExitCode()).To(Equal(0), up.out())
	for _, pid := range pids {
		g.Expect(harness.ProcessAlive(pid)).To(BeFalse(), "pid %d after Ctrl-C", pid)
	}
	g.Expect(dir).NotTo(BeADirectory(), "the environment's directory, Slack capture included")
}

// TestDevUp_externalControllersRunByDevRun is the Tiltfile's no-Docker
// mode without Tilt: `dev up --external-controllers` starts the clusters and
// registers the Spoke but runs no hub or agent; `dev run hub` and
// `dev run agent-dev`, started before the environment is ready (as Tilt
// starts them), wait for it and run them; the Spoke becomes Ready and a Helm
// install on the spoke reaches the hub.
func TestDevUp_externalControllersRunByDevRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	bin, err := buildTugboat()
	g.Expect(err).NotTo(HaveOccurred())
	run := func(name string) {
		log, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
		g.Expect(err).NotTo(HaveOccurred())
		cmd := exec.Command(bin, "dev", "run", name, "--dir", dir, "--wait", "4m")
		cmd.Stdout, cmd.Stderr = log, log
		g.Expect(cmd.Start()).To(Succeed())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				data, _ := os.ReadFile(log.Name())
				t.Logf("tugboat dev run %s:\n%s", name, data)
			}
		})
	}
	run("hub")
	run("agent-dev")
	up := startUp(t, dir, "1", "--external-controllers")
	up.waitForLine(t, "Press Ctrl-C", 4*time.Minute)
	g.Expect(up.out()).To(ContainSubstring("tugboat dev run agent-dev --dir " + dir))
	g.Expect(up.out()).NotTo(ContainSubstring("starting the hub"))

	st, err := devenv.ReadState(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.ExternalControllers).To(BeTrue())
	g.Expect(st.Processes).To(BeEmpty(), "dev up runs no hub or agent itself")
	c, ok := st.Command("agent-dev")
	g.Expect(ok).To(BeTrue())
	g.Expect(c.Args).To(ContainElements("--hub-url", st.HubURL, "--hub-key-file", filepath.Join(dir, "keys", "dev.key")))

	hubCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "hub.kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	hubClient, err := client.New(hubCfg, client.Options{Scheme: harness.DefaultScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		var sp tugboatv1alpha1.Spoke
		g.Expect(hubClient.Get(ctx, client.ObjectKey{Namespace: devenv.DefaultNamespace, Name: "dev"}, &sp)).To(Succeed())
		g.Expect(sp.Status.Conditions).To(ContainElement(And(
			HaveField("Type", "Ready"), HaveField("Status", metav1.ConditionTrue))))
	}).WithTimeout(90*time.Second).WithPolling(100*time.Millisecond).Should(Succeed(), "the Spoke of the agent `dev run` started")
	// The key the agent signs with is the one on the hub.
	var key corev1.Secret
	g.Expect(hubClient.Get(ctx, client.ObjectKey{Namespace: devenv.DefaultNamespace, Name: "dev-key"}, &key)).To(Succeed())
	file, err := os.ReadFile(filepath.Join(dir, "keys", "dev.key"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(file).To(Equal(key.Data[tugboatv1alpha1.SpokeKeySecretKey]))
	// Written by dev up before any hub runs, it carries the marks of a key
	// the hub generates, which the agent bootstrap requires.
	g.Expect(key.Labels).To(HaveKeyWithValue("tugboat.dev/spoke", "dev"))
	g.Expect(metav1.GetControllerOf(&key)).To(And(Not(BeNil()), HaveField("Kind", "Spoke"), HaveField("Name", "dev")))

	helmInstall(t, filepath.Join(dir, "dev.kubeconfig"), "apps", "web")
	g.Eventually(func(g Gomega) {
		var rh tugboatv1alpha1.ReleaseHistory
		g.Expect(hubClient.Get(ctx, client.ObjectKey{Namespace: devenv.DefaultNamespace, Name: "dev.apps.web"}, &rh)).To(Succeed())
		g.Expect(rh.Status.Current).NotTo(BeNil())
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
}

// TestDevDown_cleansUpAfterKilledUp kills `dev up` without letting it clean
// up, then checks that `dev down` leaves no process and no files behind.
func TestDevDown_cleansUpAfterKilledUp(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	up := startUp(t, dir, "1")
	up.waitForLine(t, "Press Ctrl-C", 4*time.Minute)
	pids := clusterPIDs(g, dir)
	g.Expect(pids).To(HaveLen(12), "two clusters of five processes, the hub and one agent")
	g.Expect(up.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
	<-up.done

	bin, _ := buildTugboat()
	out, err := exec.Command(bin, "dev", "down", "--dir", dir).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(ContainSubstring("cleaned up"))
	for _, pid := range pids {
		g.Expect(harness.ProcessAlive(pid)).To(BeFalse(), "pid %d after dev down", pid)
	}
	g.Expect(filepath.Join(dir, devenv.StateFile)).NotTo(BeAnExistingFile())

	out, err = exec.Command(bin, "dev", "down", "--dir", dir).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(ContainSubstring("nothing to clean up"))
}

// helmInstall installs the test chart with the Helm SDK through a kubeconfig
// file, as `helm install` would, and returns when the install returned.
func helmInstall(t *testing.T, kubeconfig, ns, name string) time.Time {
	t.Helper()
	settings := cli.New()
	settings.KubeConfig = kubeconfig
	settings.SetNamespace(ns)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load("../../agent/testdata/charts/web")
	if err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace, in.Timeout = name, ns, true, 30*time.Second
	if _, err := in.Run(ch, nil); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	return time.Now()
}

// TestDevUp_namespacePortNoApprovalAndKeep runs the real `tugboat dev up`
// with --namespace, --port, --no-approval and --keep: the Spokes and the
// sample Pipeline live in that namespace (also the hub context's), the hub
// receives on that port, production has no approval gate, and after Ctrl-C
// no process survives while the directory keeps the logs and kubeconfigs
// (not the clusters' data, nor the state of a running environment).
func TestDevUp_namespacePortNoApprovalAndKeep(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	port := l.Addr().(*net.TCPAddr).Port
	g.Expect(l.Close()).To(Succeed())

	up := startUp(t, dir, "3", "--namespace", "team-a", "--port", strconv.Itoa(port), "--no-approval", "--keep")
	up.waitForLine(t, "Press Ctrl-C", 4*time.Minute)
	g.Expect(up.out()).NotTo(ContainSubstring("tugboat approve"), "no gate, no approve command to suggest")
	st, err := devenv.ReadState(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.HubURL).To(Equal(fmt.Sprintf("http://127.0.0.1:%d", port)))

	merged, err := clientcmd.LoadFromFile(filepath.Join(dir, "kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(merged.Contexts).To(HaveKeyWithValue("hub", HaveField("Namespace", "team-a")))
	hubCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "hub.kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	hub, err := client.New(hubCfg, client.Options{Scheme: harness.DefaultScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	var spokes tugboatv1alpha1.SpokeList
	g.Expect(hub.List(ctx, &spokes, client.InNamespace("team-a"))).To(Succeed())
	g.Expect(spokes.Items).To(HaveLen(3))
	var p tugboatv1alpha1.Pipeline
	g.Expect(hub.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: devenv.DemoChart}, &p)).To(Succeed())
	g.Expect(p.Spec.Environments).To(HaveLen(3))
	for _, env := range p.Spec.Environments {
		g.Expect(env.Gates.RequireApproval).To(BeFalse(), env.Name)
	}

	pids := clusterPIDs(g, dir)
	g.Expect(up.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	select {
	case <-up.done:
	case <-time.After(time.Minute):
		t.Fatal("tugboat dev up did not exit within a minute of SIGINT")
	}
	g.Expect(up.cmd.ProcessState.ExitCode()).To(Equal(0), up.out())
	for _, pid := range pids {
		g.Expect(harness.ProcessAlive(pid)).To(BeFalse(), "pid %d after Ctrl-C", pid)
	}
	g.Expect(filepath.Join(dir, "logs", "hub.log")).To(BeARegularFile())
	g.Expect(filepath.Join(dir, "kubeconfig")).To(BeARegularFile())
	g.Expect(filepath.Join(dir, devenv.StateFile)).NotTo(BeAnExistingFile())
	g.Expect(filepath.Join(dir, "clusters")).NotTo(BeADirectory())
}
