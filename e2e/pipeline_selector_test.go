package e2e_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/e2e/harness"
)

// TestPipeline_spokeSelector runs the hub in-process (as its chart's
// ServiceAccount) against a real hub API server, with ReleaseHistories
// written as the recorder writes them and strategies that do nothing: the
// test plays the agents. Environment production selects the Spokes
// labeled env=production. A Spoke labeled so after a Promotion started
// joins the environment with no Pipeline edit: it is not part of that
// Promotion, and the next one reaches it; a Spoke that loses the label
// leaves, and is dropped from the running Promotion's verification.
func TestPipeline_spokeSelector(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hubCluster := harness.StartT(t, harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true})
	c := hubCluster.Client
	f := newFleetWith(t, hubCluster, func(o *hub.Options) { o.Strategies = noopStrategies() })
	ns := f.ns
	prodSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}}
	newPipeline := func(name string, production ...tugboatv1alpha1.Target) *tugboatv1alpha1.Pipeline {
		return &tugboatv1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: tugboatv1alpha1.PipelineSpec{
				Release: "web",
				Environments: []tugboatv1alpha1.Environment{
					{Name: "staging", Targets: []tugboatv1alpha1.Target{{Spoke: "staging", Namespace: "apps"}}},
					{Name: "production", Targets: production},
				},
				Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
			},
		}
	}

	t.Run("the API server takes a target naming exactly one of spoke and spokeSelector, never an empty selector", func(t *testing.T) {
		g := NewWithT(t)
		rejected := []struct {
			name   string
			target tugboatv1alpha1.Target
			want   string
		}{
			{"both", tugboatv1alpha1.Target{Spoke: "prod-1", SpokeSelector: prodSelector, Namespace: "apps"}, "a target names exactly one of spoke and spokeSelector"},
			{"neither", tugboatv1alpha1.Target{Namespace: "apps"}, "a target names exactly one of spoke and spokeSelector"},
			{"empty", tugboatv1alpha1.Target{SpokeSelector: &metav1.LabelSelector{}, Namespace: "apps"}, "spokeSelector must not be empty"},
			{"empty-labels", tugboatv1alpha1.Target{SpokeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{}}, Namespace: "apps"}, "spokeSelector must not be empty"},
		}
		for _, tc := range rejected {
			err := c.Create(ctx, newPipeline("bad-"+tc.name, tc.target))
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", tc.name, err)
			g.Expect(err.Error()).To(ContainSubstring("spec.environments[1].targets[0]"), tc.name)
			g.Expect(err.Error()).To(ContainSubstring(tc.want), tc.name)
		}

		// Valid: a selector next to a named spoke, and the same selector
		// twice (it counts once), round-trip unchanged.
		p := newPipeline("valid", tugboatv1alpha1.Target{Spoke: "dr-1", Namespace: "apps"},
			tugboatv1alpha1.Target{SpokeSelector: prodSelector, Namespace: "apps", Release: "web", HelmRelease: &tugboatv1alpha1.ObjectReference{Name: "web"}},
			tugboatv1alpha1.Target{SpokeSelector: prodSelector, Namespace: "apps", Release: "web"})
		p.Spec.Suspend = true
		g.Expect(c.Create(ctx, p)).To(Succeed())
		got := getPipeline(g, c, ns, "valid")
		g.Expect(got.Spec.Environments[1].Targets).To(Equal(p.Spec.Environments[1].Targets))
		g.Expect(c.Delete(ctx, got)).To(Succeed())
	})

	f.registerSpoke("staging")
	f.registerSpoke("prod-1")
	label := func(spoke string, lbls map[string]string) {
		sp := &tugboatv1alpha1.Spoke{}
		g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: spoke}, sp)).To(Succeed())
		patch := client.MergeFrom(sp.DeepCopy())
		sp.Labels = lbls
		g.Expect(c.Patch(ctx, sp, patch)).To(Succeed())
	}
	label("prod-1", map[string]string{"env": "production"})
	g.Expect(writeHistory(ctx, c, ns, "staging", "apps", "web", deployed(2, "1.1.0", tugboatv1alpha1.HealthCurrent))).To(Succeed())
	g.Expect(writeHistory(ctx, c, ns, "prod-1", "apps", "web", deployed(1, "1.0.0", tugboatv1alpha1.HealthCurrent))).To(Succeed())

	t.Run("a selector that matches no spoke makes the environment wait, saying so", func(t *testing.T) {
		g := NewWithT(t)
		qa := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "qa"}}
		g.Expect(c.Create(ctx, newPipeline("ghost", tugboatv1alpha1.Target{SpokeSelector: qa, Namespace: "apps"}))).To(Succeed())
		g.Eventually(func(g Gomega) {
			ready := apimeta.FindStatusCondition(getPipeline(g, c, ns, "ghost").Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Message).To(ContainSubstring("environment production: spokeSelector env=qa matches no spoke in namespace " + ns))
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		g.Consistently(func(g Gomega) []string { return promotionsOf(g, c, ns, "ghost") }).
			WithTimeout(time.Second).WithPolling(200 * time.Millisecond).Should(BeEmpty())
		g.Expect(c.Delete(ctx, getPipeline(g, c, ns, "ghost"))).To(Succeed())
	})

	g.Expect(c.Create(ctx, newPipeline("web", tugboatv1alpha1.Target{SpokeSelector: prodSelector, Namespace: "apps"}))).To(Succeed())
	promotion := func(g Gomega, version string) *tugboatv1alpha1.Promotion {
		pr := &tugboatv1alpha1.Promotion{}
		g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: pipeline.PromotionName("web", "production", version)}, pr)).To(Succeed())
		return pr
	}
	// targetsOf lists a Promotion's targets as spoke@version.
	targetsOf := func(pr *tugboatv1alpha1.Promotion) []string {
		var out []string
		for _, t := range f.targets(g, pr.Name) {
			out = append(out, t.Spoke+"@"+t.Version)
		}
		return out
	}
	// production lists the Pipeline's production targets as
	// spoke@version selector.
	production := func(g Gomega) []string {
		var out []string
		for _, es := range getPipeline(g, c, ns, "web").Status.Environments {
			if es.Name == "production" {
				for _, t := range es.Targets {
					out = append(out, t.Spoke+"@"+t.Version+" "+t.Selector)
				}
			}
		}
		return out
	}
	wait := func(check func(g Gomega)) {
		t.Helper()
		g.Eventually(check).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	}

	// 1.1.0 goes to production's one selected spoke.
	wait(func(g Gomega) {
		pr := promotion(g, "1.1.0")
		g.Expect(pr.Status.Phase).To(Equal(tugboatv1alpha1.PromotionVerifying))
		g.Expect(targetsOf(pr)).To(Equal([]string{"prod-1@1.0.0"}))
	})
	g.Expect(production(g)).To(Equal([]string{"prod-1@1.0.0 env=production"}))

	// prod-2 is created and labeled env=production while 1.1.0 is being
	// verified: it joins the environment, not the running Promotion.
	f.registerSpoke("prod-2")
	label("prod-2", map[string]string{"env": "production", "region": "us"})
	g.Expect(writeHistory(ctx, c, ns, "prod-2", "apps", "web", deployed(1, "1.0.0", tugboatv1alpha1.HealthCurrent))).To(Succeed())
	wait(func(g Gomega) {
		g.Expect(production(g)).To(Equal([]string{"prod-1@1.0.0 env=production", "prod-2@1.0.0 env=production"}))
	})
	g.Expect(writeHistory(ctx, c, ns, "prod-1", "apps", "web", deployed(2, "1.1.0", tugboatv1alpha1.HealthCurrent))).To(Succeed())
	wait(func(g Gomega) {
		pr := promotion(g, "1.1.0")
		g.Expect(pr.Status.Phase).To(Equal(tugboatv1alpha1.PromotionSucceeded), "prod-2 joined after the start: not waited for")
		g.Expect(targetsOf(pr)).To(Equal([]string{"prod-1@1.1.0"}))
	})
	g.Consistently(func(g Gomega) []string { return promotionsOf(g, c, ns, "web") }).
		WithTimeout(2*time.Second).WithPolling(200*time.Millisecond).
		Should(ConsistOf(pipeline.PromotionName("web", "production", "1.1.0")), "one Promotion per version")

	// The next version reaches both, with no Pipeline edit.
	g.Expect(writeHistory(ctx, c, ns, "staging", "apps", "web", deployed(3, "1.2.0", tugboatv1alpha1.HealthCurrent))).To(Succeed())
	wait(func(g Gomega) {
		pr := promotion(g, "1.2.0")
		g.Expect(pr.Status.Phase).To(Equal(tugboatv1alpha1.PromotionVerifying))
		g.Expect(targetsOf(pr)).To(Equal([]string{"prod-1@1.1.0", "prod-2@1.0.0"}))
	})
	g.Expect(writeHistory(ctx, c, ns, "prod-2", "apps", "web", deployed(2, "1.2.0", tugboatv1alpha1.HealthCurrent))).To(Succeed())
	wait(func(g Gomega) {
		g.Expect(targetsOf(promotion(g, "1.2.0"))).To(Equal([]string{"prod-1@1.1.0", "prod-2@1.2.0"}))
	})

	// prod-1 loses its label: it leaves the environment and the running
	// Promotion stops waiting for it.
	label("prod-1", nil)
	wait(func(g Gomega) {
		pr := promotion(g, "1.2.0")
		g.Expect(pr.Status.Phase).To(Equal(tugboatv1alpha1.PromotionSucceeded))
		g.Expect(targetsOf(pr)).To(Equal([]string{"prod-2@1.2.0"}))
	})
	wait(func(g Gomega) {
		g.Expect(production(g)).To(Equal([]string{"prod-2@1.2.0 env=production"}))
	})
}
