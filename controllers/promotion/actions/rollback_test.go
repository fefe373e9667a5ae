package actions_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// TestActions_offersTheRollbackOfAFailedCanary walks a helm rollout with
// onFailure Rollback through the real hub: the canary's agent gets the
// upgrade, reports it done and its new revision failed; the rollout
// stops, and the same agent's next poll gets the rollback action alone
// (the revision and version the target ran before, the upgrade it undoes;
// no version, no chart), which the store marks Delivered. Its outcome is
// recorded like an upgrade's (a repeat is fine, another outcome a
// conflict), and the Promotion fails, RolloutFailed. The other target's
// agent was never offered anything.
func TestActions_offersTheRollbackOfAFailedCanary(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "rollback")
	dev, canary, other := registerSpoke(t, ns, "dev-r"), registerSpoke(t, ns, "canary-r"), registerSpoke(t, ns, "other-r")
	dev.report(g, release("apps", "web", "1.0.0", 1))
	canary.report(g, release("apps", "web", "0.9.0", 4))
	other.report(g, release("apps", "web", "0.9.0", 2))

	p := helmPipeline(ns, "dev-r", &tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com", Chart: "web"},
		tugboatv1alpha1.Target{Spoke: "canary-r", Namespace: "apps"}, tugboatv1alpha1.Target{Spoke: "other-r", Namespace: "apps"})
	p.Spec.Environments[1].Rollout = &tugboatv1alpha1.Rollout{
		Canary: &tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}, OnFailure: tugboatv1alpha1.RolloutRollback,
	}
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
	name := pipeline.PromotionName("web", "staging", "1.0.0")

	var up wire.Action
	g.Eventually(func(g Gomega) {
		acts := canary.poll(g)
		g.Expect(acts).To(HaveLen(1))
		up = acts[0]
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(up.TypeOf()).To(Equal(wire.ActionUpgrade))
	g.Expect(canary.outcome(g, up.ID, wire.ActionSucceeded, "upgraded to 1.0.0 (revision 5)", 5)).To(Equal(http.StatusOK))
	failed := release("apps", "web", "1.0.0", 5)
	failed.Health = wire.HealthFailed
	canary.report(g, failed)
	g.Eventually(phase(ns, name)).WithTimeout(30 * time.Second).Should(Equal(tugboatv1alpha1.PromotionRollingBack))

	pr := getPromotion(g, ns, name)
	acts := canary.poll(g)
	g.Expect(acts).To(HaveLen(1), "the rollback alone, not the upgrade again")
	rb := acts[0]
	g.Expect(rb.ID).To(Equal(wire.NewRollbackActionID(string(pr.UID), "canary-r", "apps", "web")))
	g.Expect(rb.Type).To(Equal(wire.ActionRollback))
	g.Expect(rb.Promotion).To(Equal(ns + "/" + name))
	g.Expect([]string{rb.Namespace, rb.Release, rb.Version}).To(Equal([]string{"apps", "web", ""}))
	g.Expect(rb.Chart).To(Equal(wire.ChartSource{}))
	g.Expect(rb.Rollback).To(Equal(&wire.RollbackAction{Revision: 4, Version: "0.9.0", From: "1.0.0", Undoes: up.ID}))
	g.Expect(rb.Created).To(Equal(pr.Status.Rollout.RollbackStartedAt.UTC()))
	tr := getTargets(g, ns, name)[0]
	g.Expect(tr.Spoke).To(Equal("canary-r"))
	g.Expect(tr.Rollout.Rollback.Phase).To(Equal(tugboatv1alpha1.ActionDelivered))
	g.Expect(tr.Rollout.Rollback.Deliveries).To(BeEquivalentTo(1))

	// other-r's agent gets nothing (its poll would be held: ask the status).
	// No wave acted on it: it has no PromotionTarget at all.
	g.Expect(getTargets(g, ns, name)).To(HaveEach(HaveField("Spoke", Not(Equal("other-r")))))

	msg := "rolled back release apps/web to revision 4, chart version 0.9.0 (revision 6)"
	for range 2 {
		g.Expect(canary.outcome(g, rb.ID, wire.ActionSucceeded, msg, 6)).To(Equal(http.StatusOK))
	}
	g.Expect(canary.outcome(g, rb.ID, wire.ActionFailed, "changed its mind", 0)).To(Equal(http.StatusConflict))
	g.Eventually(phase(ns, name)).WithTimeout(30 * time.Second).Should(Equal(tugboatv1alpha1.PromotionFailed))
	done := getTargets(g, ns, name)[0].Rollout.Rollback
	g.Expect([]any{done.Phase, done.Revision, done.Message}).To(Equal([]any{tugboatv1alpha1.ActionSucceeded, int32(6), msg}))
	g.Expect(getTargets(g, ns, name)[0].Action.Phase).To(Equal(tugboatv1alpha1.ActionSucceeded), "the upgrade's outcome stays")
	g.Expect(readyMessage(g, ns, name)).To(ContainSubstring("rolled back 1 target(s) to the revision they ran before: canary-r/apps/web"))
}
