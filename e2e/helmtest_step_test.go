package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/agent"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/harness"
)

// smokeChart is a chart with a Helm test hook: a Pod that kwok finishes
// (the harness's kwok stages). From 1.2.0 on, its test Pod carries
// tugboat.dev/test-result: fail, so kwok fails it as a failing test
// would.
func smokeChart(version string) *chart.Chart {
	templates := map[string]string{
		"configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  version: {{ .Chart.Version | quote }}
`,
		"tests/test-connection.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-test
  annotations:
    helm.sh/hook: test
{{- if eq .Chart.Version "1.2.0" }}
    tugboat.dev/test-result: fail
{{- end }}
spec:
  restartPolicy: Never
  containers:
    - name: test
      image: registry.example/smoke-test:{{ .Chart.AppVersion }}
      command: ["sh", "-c", "wget -qO- http://{{ .Release.Name }}/healthz"]
`,
	}
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "smoke", Version: version, AppVersion: version}, Values: map[string]any{}}
	for name, data := range templates {
		ch.Templates = append(ch.Templates, &chart.File{Name: "templates/" + name, Data: []byte(data)})
	}
	return ch
}

// TestHelmTestStep_theAgentRunsTheChartsTestsAfterTheUpgrade (issue 25): a
// hub and a staging spoke whose real agent (as its ServiceAccount, with
// the agent chart's RBAC) carries out helm actions. Staging has a post
// step of type helmTest. Promoting 1.1.0, the agent upgrades the release,
// then runs its Helm test hook on the revision it made: the test Pod
// succeeds (kwok's stage), and the Promotion succeeds with the step's
// message naming the test. Promoting 1.2.0, whose test Pod fails, the
// step fails: the Promotion fails (StepFailed) naming the target and the
// failing test Pod, with the end of its log (kwok serves a stand-in log
// as the node's kubelet), and a StepFailed Event tells it.
func TestHelmTestStep_theAgentRunsTheChartsTestsAfterTheUpgrade(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0"} {
		_, err := chartutil.Save(smokeChart(v), dir)
		g.Expect(err).NotTo(HaveOccurred())
	}
	idx, err := repo.IndexDirectory(dir, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644)).To(Succeed())
	charts := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(charts.Close)

	hubCluster, clusters := startClusters(t, 1)
	staging := clusters[0]
	f := newFleetWith(t, hubCluster, func(o *hub.Options) { o.Receiver.ActionPollTimeout = 2 * time.Second })
	keyFile := filepath.Join(t.TempDir(), "staging.key")
	g.Expect(os.WriteFile(keyFile, f.registerSpoke("staging-ht"), 0o600)).To(Succeed())
	f.agentWith("staging-ht", f.agentConfig(staging, "apps"), keyFile, testr.New(t).WithName("staging-ht"), func(o *agent.Options) {
		o.Actions.Limits.Namespaces = []string{"apps"}
		o.Actions.Limits.ChartSources = []string{charts.URL}
	})
	in := action.NewInstall(newHelm(t, staging, "apps").cfg)
	in.ReleaseName, in.Namespace, in.Timeout = "smoke", "apps", 30*time.Second
	_, err = in.RunWithContext(ctx, smokeChart("1.0.0"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.current("staging-ht", "apps", "smoke")).WithTimeout(60 * time.Second).Should(Equal(
		current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "smoke"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release: "smoke",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm,
				Helm: &tugboatv1alpha1.HelmStrategy{Repository: charts.URL, Chart: "smoke"}},
			Environments: []tugboatv1alpha1.Environment{{
				Name:    "staging",
				Targets: []tugboatv1alpha1.Target{{Spoke: "staging-ht", Namespace: "apps"}},
				Steps: &tugboatv1alpha1.Steps{Post: []tugboatv1alpha1.Step{{
					Name: "smoke-test", Type: tugboatv1alpha1.StepHelmTest, Timeout: &metav1.Duration{Duration: 90 * time.Second},
				}}},
			}},
		},
	}
	g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())

	// 1.1.0: upgraded, tested, passed.
	pr, err := request.Create(ctx, hubCluster.Client, p, "staging", "1.1.0", tugboatv1alpha1.RequestedByUser, "test")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.phase(pr.Name)).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).
		Should(Equal(tugboatv1alpha1.PromotionSucceeded))
	got := f.promotion(g, pr.Name)
	g.Expect(got.Status.Steps).To(HaveLen(1))
	st := got.Status.Steps[0]
	g.Expect([]any{st.Name, st.Phase, st.Attempts}).To(Equal([]any{"smoke-test", tugboatv1alpha1.StepSucceeded, int32(1)}))
	g.Expect(st.Message).To(Equal("release apps/smoke (revision 2, chart version 1.1.0): 1 test(s) passed: smoke-test"))
	g.Expect(f.targets(g, pr.Name)).To(HaveLen(1))
	ht := f.targets(g, pr.Name)[0].HelmTest
	g.Expect(ht).NotTo(BeNil())
	g.Expect([]any{ht.Phase, ht.Revision}).To(Equal([]any{tugboatv1alpha1.ActionSucceeded, int32(2)}))
	// Offered again while it ran, as an upgrade is: the agent's poller
	// runs an action it is running already only once.
	g.Expect(ht.Deliveries).To(BeNumerically(">=", 1))
	// The test Pod ran on the spoke, and kwok finished it.
	var testPod corev1.Pod
	g.Expect(staging.Client.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "smoke-test"}, &testPod)).To(Succeed())
	g.Expect(testPod.Status.Phase).To(Equal(corev1.PodSucceeded))
	h, err := newHelm(t, staging, "apps").cfg.Releases.History("smoke")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h).To(HaveLen(2), "a helm test makes no revision")

	// 1.2.0: upgraded, its test fails: the Promotion fails with the step.
	pr2, err := request.Create(ctx, hubCluster.Client, p, "staging", "1.2.0", tugboatv1alpha1.RequestedByUser, "test")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.phase(pr2.Name)).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).
		Should(Equal(tugboatv1alpha1.PromotionFailed))
	got = f.promotion(g, pr2.Name)
	st = got.Status.Steps[0]
	g.Expect([]any{st.Phase, st.Attempts}).To(Equal([]any{tugboatv1alpha1.StepFailed, int32(1)}))
	g.Expect(st.Message).To(HavePrefix("helm test failed on staging-ht/apps/smoke: helm test of release apps/smoke (revision 3): test pod smoke-test failed: "))
	t.Logf("the failed step's message: %s", st.Message)
	// The end of the test Pod's log, read through the API server: kwok
	// serves the harness's stand-in log as the node's kubelet.
	g.Expect(st.Message).To(HaveSuffix("test pod smoke-test failed: log (last lines): " + strings.TrimSpace(harness.KwokPodLog)))
	ready := apimeta.FindStatusCondition(got.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Reason).To(Equal("StepFailed"))
	g.Expect(ready.Message).To(HavePrefix("post step smoke-test (helmTest) failed after 1 attempt(s): helm test failed on staging-ht/apps/smoke"))
	g.Expect(staging.Client.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "smoke-test"}, &testPod)).To(Succeed())
	g.Expect(testPod.Status.Phase).To(Equal(corev1.PodFailed))
	g.Eventually(func(g Gomega) []string { return eventsAbout(g, hubCluster.Client, f.ns, "Promotion", pr2.Name) }).
		WithTimeout(30 * time.Second).Should(ContainElements(
		HavePrefix("Normal StepStarted: post step smoke-test (helmTest) started attempt 1"),
		HavePrefix("Warning StepFailed: post step smoke-test (helmTest) failed after 1 attempt(s): helm test failed on staging-ht/apps/smoke"),
	))
}
