package promotion_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// TestReconciler_writesAPromotionTargetOnlyOnATransition: once the
// canary's wave was acted on (its PromotionTarget created, its action
// queued), reconciles of a Promotion whose targets report nothing new
// write no PromotionTarget and no Promotion status; the agent's outcome is
// a transition, written to the canary's PromotionTarget alone. The
// PromotionTarget is owned by the Promotion and labeled with it and its
// spoke.
func TestReconciler_writesAPromotionTargetOnlyOnATransition(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyHelm)
	name := f.promote("1.6.0")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))
	g.Eventually(func() *tugboatv1alpha1.TargetAction { return firstAction(f, name) }).WithTimeout(10 * time.Second).ShouldNot(BeNil())
	// The Promotion's status follows its targets' write.
	g.Eventually(func() string { return waves(f.get(name)) }).WithTimeout(10 * time.Second).Should(HavePrefix("Progressing current=0 [canary 1 0 1 0 0;"))

	pts := promotionTargets(t, f.ns, name)
	g.Expect(pts).To(HaveLen(1), "only the canary was acted on")
	pr := f.get(name)
	pt := pts[0]
	g.Expect(pt.Name).To(Equal(tugboatv1alpha1.PromotionTargetName(name, "prod-a", "apps", "web")))
	g.Expect(pt.Labels).To(Equal(map[string]string{tugboatv1alpha1.LabelPromotion: name, tugboatv1alpha1.LabelSpoke: "prod-a"}))
	g.Expect(pt.OwnerReferences).To(ConsistOf(HaveField("UID", pr.UID)))
	g.Expect(*pt.OwnerReferences[0].Controller).To(BeTrue())
	g.Expect(pt.Spec).To(Equal(tugboatv1alpha1.PromotionTargetSpec{Promotion: name, Spoke: "prod-a", Namespace: "apps", Release: "web"}))

	// Reconciles with nothing new: each touch of the Promotion is one.
	versions := func() []string {
		var out []string
		for _, pt := range promotionTargets(t, f.ns, name) {
			out = append(out, pt.Name+"@"+pt.ResourceVersion)
		}
		return out
	}
	before := versions()
	var touched string
	touch := func() {
		cur := f.get(name)
		patch := client.MergeFrom(cur.DeepCopy())
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations["test.tugboat.dev/touch"] = time.Now().Format(time.RFC3339Nano)
		g.Expect(cluster.Client.Patch(ctx, cur, patch)).To(Succeed())
		touched = cur.ResourceVersion
	}
	// Touched every half second for 3 s: the reconciles span several
	// seconds (the API keeps times to the second), so a time written anew
	// on each would show.
	g.Consistently(func() []string {
		touch()
		return versions()
	}).WithTimeout(3*time.Second).WithPolling(500*time.Millisecond).Should(Equal(before), "no PromotionTarget written")
	g.Consistently(func() string { return f.get(name).ResourceVersion }).WithTimeout(time.Second).WithPolling(100*time.Millisecond).
		Should(Equal(touched), "no Promotion status written")

	// The agent's outcome is a transition: the canary's object changes.
	f.reportAction(name, "prod-a", false, tugboatv1alpha1.ActionSucceeded, 4, "upgraded to 1.6.0 (revision 4)")
	g.Expect(versions()).NotTo(Equal(before))
}
