package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tugboat.dev/tugboat/agent"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/devenv"
)

// TestRollout_agentsUpgradeTheCanaryFirst: two production spokes with real
// agents (helm strategy), rolled out canary prod-a (soaking 5s) first. The
// canary's agent upgrades it; prod-b's agent gets no action until the
// canary's new revision, the one its agent made, is deployed, Current and
// soaked; then prod-b is upgraded, and the Promotion succeeds with both
// waves counted.
func TestRollout_agentsUpgradeTheCanaryFirst(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root, err := bins.FindRepoRoot(".")
	g.Expect(err).NotTo(HaveOccurred())
	helmCLI, err := bins.EnsureHelm(ctx, root, nil)
	g.Expect(err).NotTo(HaveOccurred())
	repo, err := devenv.StartChartRepo(t.TempDir(), "1.0.0", "1.1.0")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(repo.Stop)

	hubCluster, clusters := startClusters(t, 2)
	f := newFleetWith(t, hubCluster, func(o *hub.Options) { o.Receiver.ActionPollTimeout = 2 * time.Second })
	names := []string{"prod-a", "prod-b"}
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 0})
	for i, n := range names {
		keyFile := filepath.Join(t.TempDir(), n+".key")
		g.Expect(os.WriteFile(keyFile, f.registerSpoke(n), 0o600)).To(Succeed())
		f.agentWith(n, f.agentConfig(clusters[i], "apps"), keyFile, log.WithName(n), func(o *agent.Options) {
			o.Actions.Limits.Namespaces = []string{"apps"}
			o.Actions.Limits.ChartSources = []string{repo.URL}
		})
		out, err := exec.Command(helmCLI, "--kubeconfig", clusters[i].KubeconfigPath, "install", "demo", repo.ChartURL("1.0.0"),
			"-n", "apps", "--create-namespace").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
	}
	for _, n := range names {
		g.Eventually(f.current(n, "apps", "demo")).WithTimeout(60 * time.Second).Should(Equal(
			current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
	}

	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "demo"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release: "demo",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm,
				Helm: &tugboatv1alpha1.HelmStrategy{Repository: repo.URL, Chart: "demo"}},
			Environments: []tugboatv1alpha1.Environment{{
				Name:    "production",
				Targets: []tugboatv1alpha1.Target{{Spoke: "prod-a", Namespace: "apps"}, {Spoke: "prod-b", Namespace: "apps"}},
				Rollout: &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{
					Spokes: []string{"prod-a"}, SoakTime: &metav1.Duration{Duration: 5 * time.Second}}},
			}},
		},
	}
	g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())
	pr, err := request.Create(ctx, hubCluster.Client, p, "production", "1.1.0", tugboatv1alpha1.RequestedByUser, "test")
	g.Expect(err).NotTo(HaveOccurred())

	// The canary's agent upgrades it: revision 2, made by its action.
	g.Eventually(f.current("prod-a", "apps", "demo")).WithTimeout(120 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(
		current{2, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
	// prod-b is not touched while the canary soaks.
	g.Consistently(f.current("prod-b", "apps", "demo")).WithTimeout(3 * time.Second).Should(Equal(
		current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

	g.Eventually(f.phase(pr.Name)).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).
		Should(Equal(tugboatv1alpha1.PromotionSucceeded))
	got := f.promotion(g, pr.Name)
	st := got.Status.Rollout
	g.Expect(st).NotTo(BeNil())
	g.Expect(st.Phase).To(Equal(tugboatv1alpha1.RolloutCompleted))
	g.Expect(st.Waves).To(HaveLen(2))
	for _, w := range st.Waves {
		g.Expect([]any{w.Targets, w.Succeeded}).To(Equal([]any{int32(1), int32(1)}), "wave %s", w.Name)
	}
	g.Expect(st.Waves[1].StartedAt.Time).NotTo(BeTemporally("<", st.Waves[0].CompletedAt.Time), "the final wave started after the canary qualified")
	for _, ts := range f.targets(g, pr.Name) {
		g.Expect(ts.Action).NotTo(BeNil())
		g.Expect([]any{ts.Spoke, ts.Action.Phase, ts.Action.Revision}).To(Equal([]any{ts.Spoke, tugboatv1alpha1.ActionSucceeded, int32(2)}))
	}
	rel, err := newHelm(t, clusters[1], "apps").get("demo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Version).To(Equal(2))
	g.Expect(rel.Info.Description).To(ContainSubstring("tugboat action"))
	g.Expect(rel.Info.LastDeployed.Time).NotTo(BeTemporally("<", st.Waves[1].StartedAt.Time), "prod-b was upgraded in the final wave")
}
