package admission_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/release"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/agent/admission"
	"tugboat.dev/tugboat/agent/ownership"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
)

// The package's cluster tests share one spoke cluster, started by the first
// test that needs it (so unit tests, benchmarks and fuzz workers never
// start one) and stopped by TestMain.
var spokeCluster struct {
	once    sync.Once
	cluster *harness.Cluster
	err     error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if c := spokeCluster.cluster; c != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "cluster %s: logs kept in %s\n", c.Name, c.LogDir)
			_ = c.StopKeepLogs()
		} else if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping cluster %s: %v\n", c.Name, err)
		}
	}
	os.Exit(code)
}

// spoke returns the shared cluster, starting it on first use.
func spoke(t *testing.T) *harness.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a local cluster; skipped with -short")
	}
	spokeCluster.once.Do(func() {
		spokeCluster.cluster, spokeCluster.err = harness.Start(context.Background(), harness.Options{Name: "spoke"})
	})
	if spokeCluster.err != nil {
		t.Fatalf("starting spoke cluster: %v", spokeCluster.err)
	}
	return spokeCluster.cluster
}

const agentNamespace = "tugboat-system"

// chartDir is the test chart: a Deployment (2 replicas), a Service and a
// ConfigMap.
var chartDir = filepath.Join("..", "..", "agent", "testdata", "charts", "web")

// webhookRun is a webhook server running in the test process and
// registered with the cluster for some namespaces.
type webhookRun struct {
	server   *admission.Server
	metrics  *admission.Metrics
	reg      admission.Registration
	stop     context.CancelFunc
	done     chan struct{} // closed when the server's Start returned
	startErr error
	secretMu sync.Mutex
	secrets  []string // "CREATE apps/sh.helm.release.v1.web.v1"
}

func (r *webhookRun) releaseSecrets() []string {
	r.secretMu.Lock()
	defer r.secretMu.Unlock()
	return append([]string(nil), r.secrets...)
}

// stopServer stops the server (the registration stays) and waits for it.
func (r *webhookRun) stopServer(t *testing.T) {
	t.Helper()
	r.stop()
	select {
	case <-r.done:
		if r.startErr != nil {
			t.Errorf("webhook server: %v", r.startErr)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("webhook server did not stop")
	}
}

// startWebhooks serves the webhooks on 127.0.0.1 with a generated
// certificate and registers them (clientConfig.url) for namespaces. It
// waits until kube-apiserver calls them, and undoes everything at cleanup.
func startWebhooks(t *testing.T, c *harness.Cluster, w *admission.Webhooks, namespaces ...string) *webhookRun {
	t.Helper()
	g := NewWithT(t)
	run := &webhookRun{done: make(chan struct{})}
	var err error
	run.metrics, err = admission.NewMetrics(prometheus.NewRegistry())
	g.Expect(err).NotTo(HaveOccurred())
	w.Metrics = run.metrics
	w.OnReleaseSecret = func(ns, name string, op admissionv1.Operation) {
		run.secretMu.Lock()
		defer run.secretMu.Unlock()
		run.secrets = append(run.secrets, fmt.Sprintf("%s %s/%s", op, ns, name))
	}
	run.server, err = admission.NewServer(admission.ServerOptions{BindAddress: "127.0.0.1:0", Webhooks: w})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(run.server.Listen()).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	run.stop = cancel
	go func() {
		defer close(run.done)
		run.startErr = run.server.Start(ctx)
	}()
	t.Cleanup(func() { run.stopServer(t) })

	run.reg = admission.Registration{
		Name:           "tugboat-agent-" + namespaces[0],
		AgentNamespace: agentNamespace,
		Namespaces:     namespaces,
		CABundle:       run.server.CABundle(),
		URL:            run.server.URL(),
	}
	apiCtx, apiCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer apiCancel()
	g.Expect(run.reg.Apply(apiCtx, c.Client)).To(Succeed())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := run.reg.Delete(ctx, c.Client); err != nil {
			t.Errorf("deleting webhook configurations: %v", err)
		}
	})
	waitForWebhooks(t, c, run, namespaces[0])
	return run
}

// waitForWebhooks waits until kube-apiserver has picked up both
// configurations: a dry-run create of a Helm-annotated ConfigMap comes back
// labeled, and a dry-run create of a Helm release Secret reaches the
// Secret webhook (dry runs change nothing and are never reported).
func waitForWebhooks(t *testing.T, c *harness.Cluster, run *webhookRun, ns string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: "webhook-probe", Namespace: ns,
			Annotations: map[string]string{
				ownership.AnnotationHelmReleaseName:      "probe",
				ownership.AnnotationHelmReleaseNamespace: ns,
			},
		}}
		g.Expect(c.Client.Create(ctx, cm, client.DryRunAll)).To(Succeed())
		g.Expect(cm.Labels).To(HaveKeyWithValue(tugboatv1alpha1.LabelRelease, "probe"))

		before := run.metrics.Decisions("validate-release-secrets", admission.ResultSkipped)
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.probe.v1", Namespace: ns, Labels: map[string]string{"owner": "helm"}},
			Type:       "helm.sh/release.v1",
		}
		g.Expect(c.Client.Create(ctx, secret, client.DryRunAll)).To(Succeed())
		g.Expect(run.metrics.Decisions("validate-release-secrets", admission.ResultSkipped)).To(BeNumerically(">", before))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// createNamespace creates ns and deletes it at cleanup.
func createNamespace(t *testing.T, c *harness.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := c.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), obj) })
}

// helmInstall installs the test chart as release name into ns with the
// Helm SDK (Secret storage, no wait), as `helm install` would.
func helmInstall(ctx context.Context, t *testing.T, c *harness.Cluster, ns, name string) (*release.Release, error) {
	t.Helper()
	settings := cli.New()
	settings.KubeConfig = c.KubeconfigPath
	settings.SetNamespace(ns)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret", func(string, ...any) {}); err != nil {
		return nil, err
	}
	chart, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(cfg)
	install.ReleaseName = name
	install.Namespace = ns
	install.Wait = false
	install.Timeout = 30 * time.Second
	return install.RunWithContext(ctx, chart, nil)
}
