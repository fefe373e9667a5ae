package e2e_test

import (
	"context"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/release"

	"tugboat.dev/tugboat/e2e/harness"
)

// webChart is the test chart every e2e suite installs.
const webChart = "../agent/testdata/charts/web"

// helmClient runs Helm SDK actions against one cluster, as `helm` would.
type helmClient struct {
	t   *testing.T
	cfg *action.Configuration
	ns  string
}

func newHelm(t *testing.T, c *harness.Cluster, ns string) *helmClient {
	t.Helper()
	settings := cli.New()
	settings.KubeConfig = c.KubeconfigPath
	settings.SetNamespace(ns)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatalf("helm init: %v", err)
	}
	return &helmClient{t: t, cfg: cfg, ns: ns}
}

// loadChart loads the web chart at the given version (app version follows).
func loadChart(t *testing.T, version string) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(webChart)
	if err != nil {
		t.Fatalf("loading chart: %v", err)
	}
	ch.Metadata.Version = version
	ch.Metadata.AppVersion = version
	return ch
}

func (h *helmClient) install(name, version string) *release.Release {
	h.t.Helper()
	in := action.NewInstall(h.cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace, in.Timeout = name, h.ns, true, 30*time.Second
	rel, err := in.RunWithContext(context.Background(), loadChart(h.t, version), nil)
	if err != nil {
		h.t.Fatalf("helm install %s %s: %v", name, version, err)
	}
	return rel
}

func (h *helmClient) upgrade(name, version string, values map[string]any) *release.Release {
	h.t.Helper()
	up := action.NewUpgrade(h.cfg)
	up.Namespace, up.Timeout, up.ReuseValues = h.ns, 30*time.Second, values == nil
	rel, err := up.RunWithContext(context.Background(), name, loadChart(h.t, version), values)
	if err != nil {
		h.t.Fatalf("helm upgrade %s %s: %v", name, version, err)
	}
	return rel
}

func (h *helmClient) rollback(name string, revision int) {
	h.t.Helper()
	rb := action.NewRollback(h.cfg)
	rb.Version, rb.Timeout = revision, 30*time.Second
	if err := rb.Run(name); err != nil {
		h.t.Fatalf("helm rollback %s %d: %v", name, revision, err)
	}
}

func (h *helmClient) uninstall(name string) {
	h.t.Helper()
	if _, err := action.NewUninstall(h.cfg).Run(name); err != nil {
		h.t.Fatalf("helm uninstall %s: %v", name, err)
	}
}

func (h *helmClient) get(name string) (*release.Release, error) {
	return action.NewGet(h.cfg).Run(name)
}
