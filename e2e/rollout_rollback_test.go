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
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/agent"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/devenv"
)

// eventsAbout lists the Events (events.k8s.io/v1) in ns regarding the
// object of kind and name, as "Type Reason: note".
func eventsAbout(g Gomega, c client.Client, ns, kind, name string) []string {
	var list eventsv1.EventList
	g.Expect(c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name {
			out = append(out, e.Type+" "+e.Reason+": "+e.Note)
		}
	}
	return out
}

// TestRollout_agentsRollBackAFailedCanary: two production spokes with real
// agents (helm strategy), canary prod-a first, onFailure Rollback. Version
// 1.1.0 of the demo chart lost the toleration of prod-a's dedicated node:
// the canary's agent upgrades it (revision 2), its pods never schedule, and
// past the progress deadline the canary fails. The rollout stops before
// prod-b is touched, and prod-a's agent rolls it back with a real Helm
// rollback (revision 3, "Rollback to 1", in its Helm history), within the
// spoke's limits (which allow no downgrade: a rollback returns to what
// the spoke ran). The Promotion fails (RolloutFailed, rollout RolledBack),
// production is held (RolloutFailed), and Events record both. Two spokes,
// not the four: on the shared 2-core machine each spoke is a whole
// control plane, and one spoke beside the canary shows "nothing else
// touched" as well as three.
func TestRollout_agentsRollBackAFailedCanary(t *testing.T) {
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
	// prod-a's node is dedicated: 1.0.0 tolerates it, 1.1.0 does not.
	var node corev1.Node
	g.Expect(clusters[0].Client.Get(ctx, client.ObjectKey{Name: clusters[0].NodeName}, &node)).To(Succeed())
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: devenv.DemoTaintKey, Value: "prod-a", Effect: corev1.TaintEffectNoSchedule})
	g.Expect(clusters[0].Client.Patch(ctx, &node, patch)).To(Succeed())
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
				Rollout: &tugboatv1alpha1.Rollout{
					Canary:           &tugboatv1alpha1.CanaryWave{Spokes: []string{"prod-a"}},
					ProgressDeadline: &metav1.Duration{Duration: 15 * time.Second},
					OnFailure:        tugboatv1alpha1.RolloutRollback,
				},
			}},
		},
	}
	g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())
	pr, err := request.Create(ctx, hubCluster.Client, p, "production", "1.1.0", tugboatv1alpha1.RequestedByUser, "test")
	g.Expect(err).NotTo(HaveOccurred())

	// The canary's agent upgrades it; its pods cannot schedule.
	g.Eventually(f.current("prod-a", "apps", "demo")).WithTimeout(120 * time.Second).WithPolling(100 * time.Millisecond).Should(
		HaveField("Version", "1.1.0"))
	// Past the deadline the rollout stops and the canary is rolled back.
	g.Eventually(f.phase(pr.Name)).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).
		Should(Equal(tugboatv1alpha1.PromotionFailed))
	got := f.promotion(g, pr.Name)
	g.Expect(got.Status.Rollout.Phase).To(Equal(tugboatv1alpha1.RolloutRolledBack))
	g.Expect(got.Status.Rollout.FailedTargets).To(HaveLen(1))
	g.Expect([]any{got.Status.Rollout.FailedTargets[0].Spoke, got.Status.Rollout.FailedTargets[0].Reason}).To(Equal(
		[]any{"prod-a", tugboatv1alpha1.TargetProgressDeadlineExceeded}))
	ready := apimeta.FindStatusCondition(got.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Reason).To(Equal(tugboatv1alpha1.RolloutFailedReason.String()))
	g.Expect(ready.Message).To(ContainSubstring("rolled back 1 target(s) to the revision they ran before: prod-a/apps/demo"))
	for _, ts := range f.targets(g, pr.Name) {
		switch ts.Spoke {
		case "prod-a":
			g.Expect(ts.Rollout.Rollback).NotTo(BeNil())
			g.Expect([]any{ts.Rollout.Rollback.Phase, ts.Rollout.Rollback.Revision}).To(Equal([]any{tugboatv1alpha1.ActionSucceeded, int32(3)}))
		case "prod-b":
			g.Expect(ts.Action).To(BeNil(), "prod-b was never acted on")
			g.Expect(ts.Rollout).To(BeNil())
		}
	}

	// helm history on the canary: the upgrade, then Helm's rollback to 1.
	h, err := newHelm(t, clusters[0], "apps").cfg.Releases.History("demo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h).To(HaveLen(3))
	byRev := map[int]string{}
	for _, r := range h {
		byRev[r.Version] = r.Chart.Metadata.Version + " " + string(r.Info.Status) + " " + r.Info.Description
	}
	g.Expect(byRev[2]).To(HavePrefix("1.1.0 superseded Upgrade by tugboat action"))
	g.Expect(byRev[3]).To(Equal("1.0.0 deployed Rollback to 1"))
	// prod-b's history is untouched.
	hb, err := newHelm(t, clusters[1], "apps").cfg.Releases.History("demo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hb).To(HaveLen(1))
	g.Eventually(f.current("prod-a", "apps", "demo")).WithTimeout(60*time.Second).Should(Equal(
		current{3, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}), "1.0.0 runs again, healthy")

	// production is held, with the reason; Events tell it.
	g.Eventually(func(g Gomega) []tugboatv1alpha1.HoldReason {
		var pl tugboatv1alpha1.Pipeline
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &pl)).To(Succeed())
		var reasons []tugboatv1alpha1.HoldReason
		for _, h := range pl.Status.HeldEnvironments {
			reasons = append(reasons, h.Reason)
		}
		return reasons
	}).WithTimeout(30 * time.Second).Should(Equal([]tugboatv1alpha1.HoldReason{tugboatv1alpha1.HoldRolloutFailed}))
	g.Eventually(func(g Gomega) []string { return eventsAbout(g, hubCluster.Client, f.ns, "Promotion", pr.Name) }).
		WithTimeout(30 * time.Second).Should(ContainElements(
		HavePrefix("Warning RollingBack: rollout of 1.1.0 into production stopped in wave canary"),
		HavePrefix("Warning RolledBack: rollout of 1.1.0 into production stopped in wave canary"),
	))
	g.Eventually(func(g Gomega) []string { return eventsAbout(g, hubCluster.Client, f.ns, "Pipeline", p.Name) }).
		WithTimeout(30 * time.Second).Should(ContainElement(
		HavePrefix("Warning HoldSet: automatic promotion into and out of production is held (RolloutFailed: ")))
}
