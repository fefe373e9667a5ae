package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/agent"
	actionsagent "tugboat.dev/tugboat/agent/actions"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// preUpgradeHookTemplate is a pre-upgrade hook that blocks an upgrade until
// the test says so: a bare Pod (kwok completes only Job Pods) that kwok
// leaves alone altogether (the harness runs kwok with
// --disregard-status-with-annotation-selector=kwok.x-k8s.io/status=custom),
// so Helm waits for it until the test, acting as the kubelet, sets its
// phase. before-hook-creation replaces it on the next attempt; a zero grace
// period lets it go at once (no kubelet confirms its deletion).
const preUpgradeHookTemplate = `apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-pre-upgrade
  annotations:
    helm.sh/hook: pre-upgrade
    helm.sh/hook-delete-policy: before-hook-creation
    kwok.x-k8s.io/status: custom
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
  containers:
    - name: migrate
      image: "registry.example/migrate:{{ .Chart.AppVersion }}"
`

// hookChartRepo serves the web chart, with the blocking pre-upgrade hook,
// at versions from a Helm repository on loopback, and returns its URL and
// the charts.
func hookChartRepo(t *testing.T, versions ...string) (string, map[string]*chart.Chart) {
	t.Helper()
	dir := t.TempDir()
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	charts := map[string]*chart.Chart{}
	for _, v := range versions {
		ch := loadChart(t, v)
		ch.Templates = append(ch.Templates, &chart.File{Name: "templates/pre-upgrade-hook.yaml", Data: []byte(preUpgradeHookTemplate)})
		if _, err := chartutil.Save(ch, dir); err != nil {
			t.Fatalf("packaging the web chart %s: %v", v, err)
		}
		charts[v] = ch
	}
	idx, err := repo.IndexDirectory(dir, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	idx.SortEntries()
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv.URL, charts
}

// TestHelmStrategy_agentKilledMidUpgradeCompletesOnce kills a production
// agent (a real process, SIGKILL to its process group) while its Helm
// upgrade waits on a pre-upgrade hook, leaving revision 2 pending-upgrade.
// A new agent process gets the action again from the hub, replaces the
// pending revision its predecessor left (older than --actions-pending-grace)
// and upgrades: the Promotion succeeds with one new revision, not two.
func TestHelmStrategy_agentKilledMidUpgradeCompletesOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	bin := buildTugboat(t)
	repoURL, charts := hookChartRepo(t, "1.0.0", "1.1.0")

	hubCluster, clusters := startClusters(t, 2)
	dev, prod := clusters[0], clusters[1]
	f := newFleetWith(t, hubCluster, func(o *hub.Options) { o.Receiver.ActionPollTimeout = 2 * time.Second })
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 0})

	devKey := filepath.Join(t.TempDir(), "dev.key")
	g.Expect(os.WriteFile(devKey, f.registerSpoke("dev"), 0o600)).To(Succeed())
	f.agentWith("dev", f.agentConfig(dev, "apps"), devKey, log.WithName("dev"), func(o *agent.Options) {
		o.Actions.Limits.Namespaces = []string{"apps"}
		o.Actions.Limits.ChartSources = []string{repoURL}
	})
	prodKey := filepath.Join(t.TempDir(), "production.key")
	g.Expect(os.WriteFile(prodKey, f.registerSpoke("production"), 0o600)).To(Succeed())
	startProd := func() (*exec.Cmd, string) {
		t.Helper()
		return startAgentProcess(t, bin, f.agentKubeconfig(prod, "apps"), "production", "http://"+f.hubAddr, prodKey, "0",
			"--actions-allowed-namespaces", "apps",
			"--actions-allowed-chart-sources", repoURL,
			"--actions-pending-grace", "5s",
		)
	}

	// production runs 1.0.0 (revision 1; an install runs no pre-upgrade
	// hook).
	prodHelm := newHelm(t, prod, "apps")
	in := action.NewInstall(prodHelm.cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace, in.Timeout = "web", "apps", true, 30*time.Second
	_, err := in.RunWithContext(ctx, charts["1.0.0"], nil)
	g.Expect(err).NotTo(HaveOccurred())
	first, firstLog := startProd()
	g.Eventually(f.current("production", "apps", "web")).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).
		Should(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
	f.logHistoryOnFailure(t, "production", "apps", "web")

	p := webPipeline(f.ns, tugboatv1alpha1.StrategyHelm)
	p.Spec.Environments = []tugboatv1alpha1.Environment{p.Spec.Environments[0], p.Spec.Environments[2]}
	p.Spec.Promotion.Helm = &tugboatv1alpha1.HelmStrategy{Repository: repoURL, Chart: "web"}
	p.Spec.Timeout = &metav1.Duration{Duration: 10 * time.Minute}
	g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())

	// 1.1.0 in dev: the production agent gets the action and its upgrade
	// stops at the hook.
	newHelm(t, dev, "apps").install("web", "1.1.0")
	name := pipeline.PromotionName("web", "production", "1.1.0")
	hookKey := types.NamespacedName{Namespace: "apps", Name: "web-pre-upgrade"}
	var hook corev1.Pod
	g.Eventually(func(g Gomega) {
		rel, err := prodHelm.cfg.Releases.Get("web", 2)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rel.Info.Status).To(Equal(release.StatusPendingUpgrade))
		g.Expect(prod.Client.Get(ctx, hookKey, &hook)).To(Succeed())
	}).WithTimeout(180 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	pr := f.promotion(g, name)
	g.Expect(pr).NotTo(BeNil())
	g.Expect(f.targets(g, name)).To(HaveLen(1))
	g.Expect(f.targets(g, name)[0].Action).NotTo(BeNil())
	actionID := f.targets(g, name)[0].Action.ID

	// A real kill, mid-upgrade: nothing gets to finish or report.
	g.Expect(syscall.Kill(-first.Process.Pid, syscall.SIGKILL)).To(Succeed())
	g.Eventually(func() error { return syscall.Kill(first.Process.Pid, 0) }).
		WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(MatchError(syscall.ESRCH))
	rel, err := prodHelm.cfg.Releases.Last("web")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Version).To(Equal(2))
	g.Expect(rel.Info.Status).To(Equal(release.StatusPendingUpgrade), "the killed agent left revision 2 pending")
	g.Expect(rel.Labels).To(HaveKeyWithValue(actionsagent.LabelAction, actionID))
	v1, err := prodHelm.cfg.Releases.Get("web", 1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v1.Info.Status).To(Equal(release.StatusDeployed))
	pr = f.promotion(g, name)
	g.Expect(pr.Status.Phase).NotTo(Equal(tugboatv1alpha1.PromotionSucceeded))
	g.Expect(f.targets(g, name)[0].Action.Phase).To(Equal(tugboatv1alpha1.ActionDelivered), "delivered, never reported")
	deliveriesAtKill := f.targets(g, name)[0].Action.Deliveries
	g.Expect(deliveriesAtKill).To(BeNumerically(">=", 1))
	t.Logf("agent killed with revision 2 pending-upgrade; action %s delivered %d times", actionID, deliveriesAtKill)

	// A new agent process. Once the pending revision is older than the
	// grace it replaces it and upgrades again: the hook Pod is made anew.
	_, secondLog := startProd()
	var again corev1.Pod
	g.Eventually(func(g Gomega) {
		g.Expect(prod.Client.Get(ctx, hookKey, &again)).To(Succeed())
		g.Expect(again.UID).NotTo(Equal(hook.UID))
	}).WithTimeout(180 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	// The kubelet's part: the hook ran to completion.
	patch := client.MergeFrom(again.DeepCopy())
	again.Status.Phase = corev1.PodSucceeded
	g.Expect(prod.Client.Status().Patch(ctx, &again, patch)).To(Succeed())

	g.Eventually(f.phase(name)).WithTimeout(180*time.Second).WithPolling(200*time.Millisecond).
		Should(Equal(tugboatv1alpha1.PromotionSucceeded), "promotion %s", name)
	g.Expect(f.targets(g, name)).To(HaveLen(1))
	act := f.targets(g, name)[0].Action
	g.Expect(act).NotTo(BeNil())
	g.Expect(act.ID).To(Equal(actionID))
	g.Expect(act.Phase).To(Equal(tugboatv1alpha1.ActionSucceeded), act.Message)
	g.Expect(act.Revision).To(Equal(int32(2)))
	g.Expect(act.Deliveries).To(BeNumerically(">", deliveriesAtKill), "the hub delivered the action again to the new agent")
	g.Expect(act.Deliveries).To(BeNumerically(">=", 2))

	// Helm's storage on production: two revisions, no duplicate.
	var secrets corev1.SecretList
	g.Expect(prod.Client.List(ctx, &secrets, client.InNamespace("apps"), client.MatchingLabels{"owner": "helm", "name": "web"})).To(Succeed())
	g.Expect(secrets.Items).To(HaveLen(2), "release Secrets: %v", secretNames(secrets.Items))
	hist, err := prodHelm.cfg.Releases.History("web")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hist).To(HaveLen(2))
	slices.SortFunc(hist, func(a, b *release.Release) int { return a.Version - b.Version })
	g.Expect(hist[0].Version).To(Equal(1))
	g.Expect(hist[0].Info.Status).To(Equal(release.StatusSuperseded))
	g.Expect(hist[0].Chart.Metadata.Version).To(Equal("1.0.0"))
	g.Expect(hist[1].Version).To(Equal(2))
	g.Expect(hist[1].Info.Status).To(Equal(release.StatusDeployed))
	g.Expect(hist[1].Chart.Metadata.Version).To(Equal("1.1.0"))
	g.Expect(hist[1].Labels).To(HaveKeyWithValue(actionsagent.LabelAction, actionID))
	g.Expect(hist[1].Info.Description).To(ContainSubstring("tugboat action " + actionID))
	// The hook that completed is the second agent's.
	var done corev1.Pod
	g.Expect(prod.Client.Get(ctx, hookKey, &done)).To(Succeed())
	g.Expect(done.UID).To(Equal(again.UID))

	// The second agent took the documented path: it replaced the pending
	// revision its predecessor left; the first never finished.
	out, err := os.ReadFile(secondLog)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring("Replacing the pending revision"))
	out, err = os.ReadFile(firstLog)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring("Upgrading release"))
	g.Expect(string(out)).NotTo(ContainSubstring("Action succeeded"))

	// The hub's ReleaseHistory: revision 2 at 1.1.0, no third.
	g.Eventually(f.current("production", "apps", "web")).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).
		Should(Equal(current{2, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
	rh := f.history(g, "production", "apps", "web")
	g.Expect(rh).NotTo(BeNil())
	g.Expect(revisionOf(rh, 2)).NotTo(BeNil())
	g.Expect(revisionOf(rh, 2).ChartVersion).To(Equal("1.1.0"))
	g.Expect(revisionOf(rh, 3)).To(BeNil(), "no duplicate revision")
}

func secretNames(items []corev1.Secret) []string {
	out := make([]string, 0, len(items))
	for _, s := range items {
		out = append(out, s.Name)
	}
	return out
}
