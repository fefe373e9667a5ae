package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/devenv"
	"tugboat.dev/tugboat/e2e/harness"
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

// TestRollout_aFluxCanaryIsRolledBackByRestoringItsChartVersion: a
// rollout into production spokes whose release demo is managed by a Flux
// HelmRelease, canary first, onFailure Rollback, once per strategy that
// rolls Flux targets back, side by side on one spoke control plane (each
// spoke its own namespace and agent, as fourSpokes shares them):
//   - kubernetes: the hub sets spec.chart.spec.version through the
//     Spoke's kubeconfig, and sets it back;
//   - helm: the spoke's agent sets it (an upgrade action naming the
//     HelmRelease), and sets it back (a rollback action).
//
// helm-controller does not run here (its main module does not build from
// the proxy; TestHelmController_capture runs a real one only when given
// one): its stand-in, fluxtest.HelmController, reconciles each HelmRelease
// as v1.6 does, with real Helm upgrades by the helm CLI. The node is
// dedicated, and demo 1.1.0 lost its toleration: the canary's upgrade
// succeeds but its pods never schedule, and past the progress deadline the
// canary fails. The rollout stops before the other target is touched, and
// the canary is rolled back by restoring the chart version it ran (1.0.0)
// in its HelmRelease; helm-controller upgrades to it (revision 3, 1.0.0
// again, healthy). The Promotion fails (RolloutFailed, rollout RolledBack)
// and production is held.
func TestRollout_aFluxCanaryIsRolledBackByRestoringItsChartVersion(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	root, err := bins.FindRepoRoot(".")
	g.Expect(err).NotTo(HaveOccurred())
	helmCLI, err := bins.EnsureHelm(ctx, root, nil)
	g.Expect(err).NotTo(HaveOccurred())
	repo, err := devenv.StartChartRepo(t.TempDir(), "1.0.0", "1.1.0")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(repo.Stop)

	hubCluster, clusters := startClusters(t, 1)
	c := clusters[0]
	g.Expect(harness.InstallCRDs(ctx, c.Client, fluxCRDs)).To(Succeed())
	f := newFleetWith(t, hubCluster, func(o *hub.Options) { o.Receiver.ActionPollTimeout = 2 * time.Second })
	pairs := map[tugboatv1alpha1.StrategyType][]rolloutSpoke{
		tugboatv1alpha1.StrategyKubernetes: {{"prod-a", "apps-a", c}, {"prod-b", "apps-b", c}},
		tugboatv1alpha1.StrategyHelm:       {{"prod-c", "apps-c", c}, {"prod-d", "apps-d", c}},
	}
	var spokes []rolloutSpoke
	for _, strategy := range []tugboatv1alpha1.StrategyType{tugboatv1alpha1.StrategyKubernetes, tugboatv1alpha1.StrategyHelm} {
		spokes = append(spokes, pairs[strategy]...)
	}
	f.startRolloutAgents(spokes, repo, helmCLI, nil)

	// The node is dedicated: 1.0.0 tolerates it, 1.1.0 does not.
	var node corev1.Node
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: c.NodeName}, &node)).To(Succeed())
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: devenv.DemoTaintKey, Value: "production", Effect: corev1.TaintEffectNoSchedule})
	g.Expect(c.Client.Patch(ctx, &node, patch)).To(Succeed())

	kubeconfig, err := os.ReadFile(c.KubeconfigPath)
	g.Expect(err).NotTo(HaveOccurred())
	var mu sync.Mutex
	upgrades := map[string][]string{}
	for _, s := range spokes {
		if slices.Contains(pairs[tugboatv1alpha1.StrategyKubernetes], s) {
			// The hub reaches the spoke through a kubeconfig Secret.
			g.Expect(hubCluster.Client.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: s.name + "-kubeconfig"},
				Data:       map[string][]byte{"value": kubeconfig},
			})).To(Succeed())
			var sp tugboatv1alpha1.Spoke
			g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: s.name}, &sp)).To(Succeed())
			spPatch := client.MergeFrom(sp.DeepCopy())
			sp.Spec.KubeConfigSecretRef = &tugboatv1alpha1.SecretKeyReference{Name: s.name + "-kubeconfig"}
			g.Expect(hubCluster.Client.Patch(ctx, &sp, spPatch)).To(Succeed())
		}

		// The HelmRelease names the chart its release runs (demo), as with
		// a real helm-controller: the agent refuses an action for another.
		hr := newHelmRelease(s.namespace, "demo", "1.0.0")
		g.Expect(unstructured.SetNestedField(hr.Object, "demo", "spec", "chart", "spec", "chart")).To(Succeed())
		g.Expect(c.Client.Create(ctx, hr)).To(Succeed())
		// helm-controller's upgrade: the chart at the version, from the
		// repository (as source-controller would fetch it).
		hc := helmControllerFor(t, c, newHelm(t, c, s.namespace), "demo", func(ctx context.Context, version string) error {
			out, err := exec.CommandContext(ctx, helmCLI, "--kubeconfig", c.KubeconfigPath, "upgrade", "demo", repo.ChartURL(version),
				"-n", s.namespace).CombinedOutput()
			if err != nil {
				return fmt.Errorf("helm upgrade: %w: %s", err, out)
			}
			mu.Lock()
			upgrades[s.name] = append(upgrades[s.name], version)
			mu.Unlock()
			return nil
		})
		wg.Go(func() { hc.Run(ctx) })
	}
	upgradesOf := func(spoke string) []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(upgrades[spoke])
	}
	for _, s := range spokes {
		g.Eventually(func(g Gomega) {
			rh := f.history(g, s.name, s.namespace, "demo")
			g.Expect(rh).NotTo(BeNil())
			g.Expect(rh.Status.HelmRelease).NotTo(BeNil())
			g.Expect(rh.Status.HelmRelease.Ready).To(Equal(metav1.ConditionTrue))
			g.Expect(rh.Status.Current.Health).To(Equal(tugboatv1alpha1.HealthCurrent))
		}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "%s is Flux's and healthy", s.name)
	}

	for strategy, pair := range pairs {
		t.Run(string(strategy), func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			canary, other := pair[0], pair[1]
			p := rolloutPipeline(f.ns, repo, pair, &tugboatv1alpha1.Rollout{
				Canary:           &tugboatv1alpha1.CanaryWave{Spokes: []string{canary.name}},
				ProgressDeadline: &metav1.Duration{Duration: 15 * time.Second},
				OnFailure:        tugboatv1alpha1.RolloutRollback,
			})
			p.Name = "demo-" + strings.ToLower(string(strategy))
			if strategy == tugboatv1alpha1.StrategyKubernetes {
				p.Spec.Promotion = tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyKubernetes}
			}
			for i := range p.Spec.Environments[0].Targets {
				p.Spec.Environments[0].Targets[i].HelmRelease = &tugboatv1alpha1.ObjectReference{Name: "demo"}
			}
			g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())
			pr, err := request.Create(ctx, hubCluster.Client, p, "production", "1.1.0", tugboatv1alpha1.RequestedByUser, "test")
			g.Expect(err).NotTo(HaveOccurred())

			// The canary's HelmRelease is set to 1.1.0; helm-controller
			// upgrades; the pods cannot schedule.
			g.Eventually(f.current(canary.name, canary.namespace, "demo")).WithTimeout(120 * time.Second).WithPolling(100 * time.Millisecond).Should(
				HaveField("Version", "1.1.0"))
			// Past the deadline the rollout stops, and the canary's chart
			// version is restored.
			g.Eventually(f.phase(pr.Name)).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).
				Should(Equal(tugboatv1alpha1.PromotionFailed))
			got := f.promotion(g, pr.Name)
			st := got.Status.Rollout
			g.Expect(st.Phase).To(Equal(tugboatv1alpha1.RolloutRolledBack))
			g.Expect(st.FailedTargets).To(HaveLen(1))
			g.Expect([]any{st.FailedTargets[0].Spoke, st.FailedTargets[0].Reason}).To(Equal(
				[]any{canary.name, tugboatv1alpha1.TargetProgressDeadlineExceeded}))
			ready := apimeta.FindStatusCondition(got.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(tugboatv1alpha1.RolloutFailedReason.String()))
			g.Expect(ready.Message).To(ContainSubstring("rolled back 1 target(s) to the revision they ran before: " + canary.name + "/" + canary.namespace + "/demo"))
			targets := f.rolloutTargets(g, got)
			rb := targets[canary.name].Rollback
			g.Expect(targets[canary.name].Wave).To(Equal(int32(0)))
			g.Expect(rb).NotTo(BeNil())
			g.Expect(rb.Phase).To(Equal(tugboatv1alpha1.ActionSucceeded), rb.Message)
			if strategy == tugboatv1alpha1.StrategyKubernetes {
				g.Expect(rb.Message).To(HavePrefix("HelmRelease set back to 1.0.0"))
				g.Expect(targets[canary.name].Action).To(BeNil(), "no agent action")
			} else {
				g.Expect(rb.Message).To(ContainSubstring("set HelmRelease " + canary.namespace + "/demo spec.chart.spec.version to 1.0.0 (was 1.1.0)"))
				g.Expect(targets[canary.name].Action).NotTo(BeNil(), "the agent's upgrade")
			}
			g.Expect(targets).NotTo(HaveKey(other.name), "%s was never acted on: it has no PromotionTarget", other.name)

			// The canary's HelmRelease asks for 1.0.0 again, set by
			// tugboat; the other's was never changed.
			hrOf := func(s rolloutSpoke) *unstructured.Unstructured {
				hr := &unstructured.Unstructured{}
				hr.SetGroupVersionKind(helmReleaseGVK)
				g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: "demo"}, hr)).To(Succeed())
				return hr
			}
			hr := hrOf(canary)
			v, _, _ := unstructured.NestedString(hr.Object, "spec", "chart", "spec", "version")
			g.Expect(v).To(Equal("1.0.0"))
			g.Expect(hr.GetGeneration()).To(Equal(int64(3)), "set to 1.1.0, then back to 1.0.0")
			var managers []string
			for _, mf := range hr.GetManagedFields() {
				managers = append(managers, mf.Manager)
			}
			g.Expect(managers).To(ContainElement("tugboat"))
			hr = hrOf(other)
			v, _, _ = unstructured.NestedString(hr.Object, "spec", "chart", "spec", "version")
			g.Expect([]any{v, hr.GetGeneration()}).To(Equal([]any{"1.0.0", int64(1)}), "%s's HelmRelease is untouched", other.name)

			// helm-controller followed the restored version: revision 3
			// runs 1.0.0 again, healthy; the other's history is untouched.
			g.Eventually(f.current(canary.name, canary.namespace, "demo")).WithTimeout(60*time.Second).Should(Equal(
				current{3, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}), "1.0.0 runs again, healthy")
			h := helmHistory(g, t, canary)
			g.Expect(h).To(HaveLen(3))
			g.Expect(describe(h[2])).To(HavePrefix("1.1.0 superseded "))
			g.Expect(describe(h[3])).To(HavePrefix("1.0.0 deployed "))
			g.Expect(upgradesOf(canary.name)).To(Equal([]string{"1.1.0", "1.0.0"}))
			g.Expect(helmHistory(g, t, other)).To(HaveLen(1))
			g.Expect(upgradesOf(other.name)).To(BeEmpty())

			g.Eventually(func(g Gomega) []tugboatv1alpha1.HoldReason {
				var pl tugboatv1alpha1.Pipeline
				g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &pl)).To(Succeed())
				var reasons []tugboatv1alpha1.HoldReason
				for _, h := range pl.Status.HeldEnvironments {
					reasons = append(reasons, h.Reason)
				}
				return reasons
			}).WithTimeout(30 * time.Second).Should(Equal([]tugboatv1alpha1.HoldReason{tugboatv1alpha1.HoldRolloutFailed}))
		})
	}
}
