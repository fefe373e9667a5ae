package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"tugboat.dev/tugboat/agent"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
)

// Templates added in memory to the web chart, so that a value can make a
// release fail or stall without a second chart to maintain.
const (
	// brokenTemplate renders, with broken=true, a ConfigMap whose name the
	// API server rejects (not a DNS subdomain): Helm's upgrade fails while
	// applying it.
	brokenTemplate = `{{- if .Values.broken }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}_Not_A_DNS_Name
data:
  broken: "true"
{{- end }}
`
	// stuckTemplate renders, with stuck=true, a Deployment whose Pods kwok
	// leaves alone (the harness runs kwok with
	// --disregard-status-with-annotation-selector=kwok.x-k8s.io/status=custom),
	// so they stay Pending and never become ready; its one-second progress
	// deadline makes the deployment controller declare
	// ProgressDeadlineExceeded.
	stuckTemplate = `{{- if .Values.stuck }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-stuck
spec:
  replicas: 1
  progressDeadlineSeconds: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: web-stuck
      app.kubernetes.io/instance: {{ .Release.Name }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: web-stuck
        app.kubernetes.io/instance: {{ .Release.Name }}
      annotations:
        kwok.x-k8s.io/status: custom
    spec:
      containers:
        - name: web
          image: "registry.example/web:{{ .Chart.AppVersion }}"
{{- end }}
`
)

// webChartWith is the web chart at version with extra templates.
func webChartWith(h *helmClient, version string, templates map[string]string) *chart.Chart {
	ch := loadChart(h.t, version)
	for name, data := range templates {
		ch.Templates = append(ch.Templates, &chart.File{Name: "templates/" + name, Data: []byte(data)})
	}
	return ch
}

// tryInstall is helm install that returns the error instead of failing.
func (h *helmClient) tryInstall(ctx context.Context, name string, ch *chart.Chart, values map[string]any) (*release.Release, error) {
	in := action.NewInstall(h.cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace, in.Timeout = name, h.ns, true, 30*time.Second
	return in.RunWithContext(ctx, ch, values)
}

// tryUpgrade is helm upgrade that returns the error instead of failing.
func (h *helmClient) tryUpgrade(ctx context.Context, name string, ch *chart.Chart, values map[string]any) (*release.Release, error) {
	up := action.NewUpgrade(h.cfg)
	up.Namespace, up.Timeout = h.ns, 30*time.Second
	return up.RunWithContext(ctx, name, ch, values)
}

// agentWith starts an agent like fleet.startAgent, against the cluster cfg
// reaches and with mutate applied to its options, and returns the assembled
// agent and a function that stops it (also called at cleanup).
func (f *fleet) agentWith(name string, cfg *rest.Config, keyFile string, log logr.Logger, mutate func(*agent.Options)) (*agent.Agent, func()) {
	f.t.Helper()
	opts := agent.NewOptions()
	opts.Reporter.Spoke = name
	opts.Reporter.HubURL = "http://" + f.hubAddr
	opts.Reporter.HubInsecureHTTP = true
	opts.Reporter.KeyFile = keyFile
	opts.Reporter.StateInterval = 2 * time.Second
	opts.Reporter.BackoffMax = time.Second
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	opts.Webhook.BindAddress = "127.0.0.1:0"
	opts.Webhook.URLHost = "127.0.0.1"
	opts.Webhook.Name = "tugboat-agent-" + name
	if mutate != nil {
		mutate(&opts)
	}
	a, err := agent.New(cfg, opts, log)
	if err != nil {
		f.t.Fatalf("assembling agent %s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Start(ctx); err != nil {
			f.t.Logf("agent %s stopped: %v", name, err)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	f.t.Cleanup(stop)
	return a, stop
}

// counterValue sums the series of a counter in controller-runtime's
// metrics registry whose labels include match (all series when match is
// empty); 0 when it is not registered.
func counterValue(g Gomega, name string, match map[string]string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var sum float64
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		g.Expect(mf.GetType().String()).To(Equal("COUNTER"), "metric %s", name)
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range match {
				if labels[k] != v {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// revisionOf returns revision rev of a ReleaseHistory, or nil.
func revisionOf(rh *tugboatv1alpha1.ReleaseHistory, rev int32) *tugboatv1alpha1.Revision {
	if rh == nil {
		return nil
	}
	for i := range rh.Status.Revisions {
		if rh.Status.Revisions[i].Revision == rev {
			return &rh.Status.Revisions[i]
		}
	}
	return nil
}

// reasons lists the reasons of a revision's events, in recorded order.
func reasons(r *tugboatv1alpha1.Revision) []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.Events))
	for _, e := range r.Events {
		out = append(out, e.Reason)
	}
	return out
}

// eventWith returns the first event of r with the reason, or nil.
func eventWith(r *tugboatv1alpha1.Revision, reason string) *tugboatv1alpha1.ReleaseEvent {
	if r == nil {
		return nil
	}
	for i := range r.Events {
		if r.Events[i].Reason == reason {
			return &r.Events[i]
		}
	}
	return nil
}

// inOrder checks that want appears in got as a subsequence (other reasons
// may come in between), and returns a description of the mismatch.
func inOrder(got []string, want ...string) error {
	i := 0
	for _, r := range got {
		if i < len(want) && r == want[i] {
			i++
		}
	}
	if i < len(want) {
		return fmt.Errorf("reasons %v lack %v in order (matched up to %q)", got, want, want[:i])
	}
	return nil
}

// timesNonDecreasing checks that the events of r are in order of time.
func timesNonDecreasing(r *tugboatv1alpha1.Revision) error {
	for i := 1; i < len(r.Events); i++ {
		if r.Events[i].Time.Before(&r.Events[i-1].Time) {
			return fmt.Errorf("revision %d: event %d (%s at %s) is before event %d (%s at %s)", r.Revision,
				i, r.Events[i].Reason, r.Events[i].Time, i-1, r.Events[i-1].Reason, r.Events[i-1].Time)
		}
	}
	return nil
}

// logHistoryOnFailure logs a ReleaseHistory's revisions and events when t
// fails, to tell what the hub recorded from what was expected.
func (f *fleet) logHistoryOnFailure(t *testing.T, spoke, namespace, release string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		rh := f.history(NewWithT(t), spoke, namespace, release)
		if rh == nil {
			t.Logf("no ReleaseHistory for %s/%s/%s", spoke, namespace, release)
			return
		}
		for _, r := range rh.Status.Revisions {
			t.Logf("revision %d %s %s %s %s (%s)", r.Revision, r.ChartVersion, r.Status, r.Health, r.HealthReason, r.Chart)
			for _, e := range r.Events {
				t.Logf("  %s %s %s %s", e.Time.Format(time.RFC3339), e.Type, e.Reason, e.Message)
			}
		}
	})
}

// mountSecret does the kubelet's part for a Secret volume: until the test
// ends, it writes the Secret's keys as files into dir whenever they change
// (each file written aside and renamed into place, as atomic as the
// kubelet's symlink swap is for a reader of one file).
func mountSecret(t *testing.T, c *harness.Cluster, key client.ObjectKey, dir string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		var version string
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			var secret corev1.Secret
			if err := c.Client.Get(ctx, key, &secret); err == nil && secret.ResourceVersion != version {
				version = secret.ResourceVersion
				for name, data := range secret.Data {
					tmp := filepath.Join(dir, "."+name+".tmp")
					if os.WriteFile(tmp, data, 0o600) == nil {
						_ = os.Rename(tmp, filepath.Join(dir, name))
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}
