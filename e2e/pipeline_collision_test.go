package e2e_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/e2e/harness"
)

// TestPipeline_collidingPromotionNamesBothPromote runs the hub in-process
// against a real hub API server, with ReleaseHistories written directly.
// Pipeline "a-b" into environment "c" and pipeline "a" into environment
// "b-c" both promote 1.0.0: their readable Promotion names are both
// a-b-c-1.0.0, and each must still get exactly one Promotion.
func TestPipeline_collidingPromotionNamesBothPromote(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hubCluster := harness.StartT(t, harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true})
	c := hubCluster.Client
	f := newFleetWith(t, hubCluster, func(o *hub.Options) { o.Strategies = noopStrategies() })
	ns := f.ns
	f.registerSpoke("dev")
	f.registerSpoke("staging")
	for _, release := range []string{"x", "y", "z"} {
		g.Expect(writeHistory(ctx, c, ns, "dev", "apps", release, deployed(2, "1.0.0", tugboatv1alpha1.HealthCurrent))).To(Succeed())
		g.Expect(writeHistory(ctx, c, ns, "staging", "apps", release, deployed(1, "0.9.0", tugboatv1alpha1.HealthCurrent))).To(Succeed())
	}
	newPipeline := func(name, release, to string) *tugboatv1alpha1.Pipeline {
		return &tugboatv1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: tugboatv1alpha1.PipelineSpec{
				Release: release,
				Environments: []tugboatv1alpha1.Environment{
					{Name: "dev", Targets: []tugboatv1alpha1.Target{{Spoke: "dev", Namespace: "apps"}}},
					{Name: to, Targets: []tugboatv1alpha1.Target{{Spoke: "staging", Namespace: "apps"}}},
				},
				Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
			},
		}
	}
	g.Expect(pipeline.PromotionName("a-b", "c", "1.0.0")).To(Equal(pipeline.PromotionName("a", "b-c", "1.0.0")), "the names collide")
	g.Expect(c.Create(ctx, newPipeline("a-b", "x", "c"))).To(Succeed())
	g.Expect(c.Create(ctx, newPipeline("a", "y", "b-c"))).To(Succeed())

	// promotionOf returns the single Promotion of the pipeline, failing g
	// unless there is exactly one and it promotes 1.0.0 into to.
	promotionOf := func(g Gomega, name, to string) *tugboatv1alpha1.Promotion {
		var list tugboatv1alpha1.PromotionList
		g.Expect(c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{pipeline.LabelPipeline: name})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1), "pipeline %s has exactly one Promotion", name)
		pr := &list.Items[0]
		g.Expect(pr.Spec.Pipeline).To(Equal(name))
		g.Expect(pr.Spec.To).To(Equal(to))
		g.Expect(pr.Spec.Version).To(Equal("1.0.0"))
		return pr
	}
	both := func(g Gomega) {
		promotionOf(g, "a-b", "c")
		promotionOf(g, "a", "b-c")
	}
	g.Eventually(both).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	// Re-reconciling (the promotions' own status changes requeue both
	// Pipelines) never creates a second one.
	g.Consistently(both).WithTimeout(3 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	// Whichever came first has the readable name; the other the alternate
	// name of its own (pipeline, environment, version).
	ab, a := promotionOf(g, "a-b", "c"), promotionOf(g, "a", "b-c")
	primary := pipeline.PromotionName("a", "b-c", "1.0.0")
	g.Expect([]string{ab.Name, a.Name}).To(Or(
		Equal([]string{primary, pipeline.AlternatePromotionName("a", "b-c", "1.0.0")}),
		Equal([]string{pipeline.AlternatePromotionName("a-b", "c", "1.0.0"), primary}),
	))
	for _, name := range []string{"a-b", "a"} {
		ready := apimeta.FindStatusCondition(getPipeline(g, c, ns, name).Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).NotTo(Equal(tugboatv1alpha1.ReconciliationFailedReason.String()))
	}

	t.Run("both names held by other promotions: Ready=False names both, until one is deleted", func(t *testing.T) {
		g := NewWithT(t)
		names := []string{pipeline.PromotionName("d", "e", "1.0.0"), pipeline.AlternatePromotionName("d", "e", "1.0.0")}
		for _, name := range names {
			g.Expect(c.Create(ctx, &tugboatv1alpha1.Promotion{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: tugboatv1alpha1.PromotionSpec{Pipeline: "other", To: "elsewhere", Version: "2.0.0",
					RequestedBy: tugboatv1alpha1.RequestedByUser},
			})).To(Succeed())
		}
		p := newPipeline("d", "z", "e")
		g.Expect(c.Create(ctx, p)).To(Succeed())
		g.Eventually(func(g Gomega) {
			ready := apimeta.FindStatusCondition(getPipeline(g, c, ns, "d").Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(tugboatv1alpha1.ReconciliationFailedReason.String()))
			g.Expect(ready.Message).To(ContainSubstring("1.0.0 into e"))
			g.Expect(ready.Message).To(ContainSubstring(names[0] + " (pipeline other, environment elsewhere, version 2.0.0)"))
			g.Expect(ready.Message).To(ContainSubstring(names[1] + " (pipeline other, environment elsewhere, version 2.0.0)"))
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		g.Expect(promotionsOf(g, c, ns, "d")).To(BeEmpty())

		// Deleting a holder frees its name; a change to the Pipeline looks
		// again at once (the back-off would, later).
		g.Expect(c.Delete(ctx, &tugboatv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[1]}})).To(Succeed())
		patch := client.MergeFrom(p.DeepCopy())
		p.Annotations = map[string]string{"test.tugboat.dev/poke": "1"}
		g.Expect(c.Patch(ctx, p, patch)).To(Succeed())
		g.Eventually(func(g Gomega) []string { return promotionsOf(g, c, ns, "d") }).
			WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(ConsistOf(names[1]))
		g.Eventually(func(g Gomega) string {
			ready := apimeta.FindStatusCondition(getPipeline(g, c, ns, "d").Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
			g.Expect(ready).NotTo(BeNil())
			return ready.Reason
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).ShouldNot(Equal(tugboatv1alpha1.ReconciliationFailedReason.String()))
	})
}
