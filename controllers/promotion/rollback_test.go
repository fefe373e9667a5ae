package promotion_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// onFailureRollback makes the fixture's rollout roll back when its budget
// is spent.
func onFailureRollback(r *tugboatv1alpha1.Rollout) { r.OnFailure = tugboatv1alpha1.RolloutRollback }

// reportAction records the outcome of spoke's upgrade (rollback false) or
// rollback action, as the hub's actions store does when the agent reports
// it.
func (f *rolloutFixture) reportAction(name, spoke string, rollback bool, phase tugboatv1alpha1.ActionPhase, revision int32, msg string) {
	f.t.Helper()
	g := NewWithT(f.t)
	g.Eventually(func() error {
		return patchTarget(f.t, f.ns, name, spoke, func(t *tugboatv1alpha1.PromotionTargetStatus) {
			a := t.Action
			if rollback && t.Rollout != nil {
				a = t.Rollout.Rollback
			}
			g.Expect(a).NotTo(BeNil(), "spoke %s has no such action", spoke)
			a.Phase, a.Revision, a.Message = phase, revision, msg
		})
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

// rollbacks lists the rollbacks of Promotion name's targets as "spoke
// phase".
func (f *rolloutFixture) rollbacks(name string) []string {
	var out []string
	for _, pt := range promotionTargets(f.t, f.ns, name) {
		if t := pt.Status; t.Rollout != nil && t.Rollout.Rollback != nil {
			out = append(out, pt.Spec.Spoke+" "+string(t.Rollout.Rollback.Phase))
		}
	}
	return out
}

// TestReconciler_rollsBackTheCanaryWhenItFails: with onFailure Rollback
// and the helm strategy, the canary's new revision fails: the rollout
// stops before any other target is touched (RollingBack), a rollback
// action to the revision the canary ran before is queued for it alone;
// once its agent reports the rollback done, the Promotion fails with
// reason RolloutFailed, status.rollout.phase RolledBack, and Events
// RollingBack and RolledBack say so.
func TestReconciler_rollsBackTheCanaryWhenItFails(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyHelm, onFailureRollback)
	name := f.promote("1.6.0")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))
	g.Eventually(func() *tugboatv1alpha1.TargetAction { return firstAction(f, name) }).WithTimeout(10 * time.Second).ShouldNot(BeNil())

	f.reportAction(name, "prod-a", false, tugboatv1alpha1.ActionSucceeded, 4, "upgraded to 1.6.0 (revision 4)")
	f.report("prod-a", 4, "1.6.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed)
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionRollingBack))
	pr := f.get(name)
	g.Expect(waves(pr)).To(Equal("RollingBack current=0 [canary 1 0 0 0 1; final 2 2 0 0 0] failed=1/1"))
	g.Expect(pr.Status.Rollout.RollbackStartedAt).NotTo(BeNil())
	g.Expect(f.rollbacks(name)).To(Equal([]string{"prod-a Pending"}), "only the target the rollout changed is rolled back")
	pt := promotionTargets(t, f.ns, name)[0]
	a := pt.Status
	g.Expect(pt.Spec.Spoke).To(Equal("prod-a"))
	g.Expect(a.Rollout.Rollback.ID).To(Equal(wire.NewRollbackActionID(string(pr.UID), "prod-a", "apps", "web")))
	g.Expect([]any{a.Rollout.BaselineRevision, a.Rollout.BaselineVersion}).To(Equal([]any{int32(3), "1.3.0"}))
	ready := findCondition(pr, tugboatv1alpha1.ReadyCondition)
	g.Expect(ready.Reason).To(Equal(tugboatv1alpha1.RollingBackReason.String()))
	g.Expect(ready.Message).To(Equal("rollout of 1.6.0 into production stopped in wave canary: the failure budget is spent " +
		"(a canary target failed, and the canary tolerates none): prod-a/apps/web (wave canary) HealthFailed: revision 4 is Failed; " +
		"rolling back 0 of 1 changed target(s) done; waiting for prod-a/apps/web"))

	// The canary's agent rolls back (revision 5). Nothing else was touched.
	f.reportAction(name, "prod-a", true, tugboatv1alpha1.ActionSucceeded, 5, "rolled back release apps/web to revision 3, chart version 1.3.0 (revision 5)")
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionFailed))
	pr = f.get(name)
	g.Expect(f.acted()).To(Equal([][]string{{webA}}), "no other target was acted on")
	g.Expect(pr.Status.Rollout.Phase).To(Equal(tugboatv1alpha1.RolloutRolledBack))
	ready = findCondition(pr, tugboatv1alpha1.ReadyCondition)
	g.Expect(ready.Reason).To(Equal(tugboatv1alpha1.RolloutFailedReason.String()))
	g.Expect(ready.Message).To(Equal("rollout of 1.6.0 into production stopped in wave canary: the failure budget is spent " +
		"(a canary target failed, and the canary tolerates none): prod-a/apps/web (wave canary) HealthFailed: revision 4 is Failed; " +
		"rolled back 1 target(s) to the revision they ran before: prod-a/apps/web. production is held until someone resumes it (tugboat promote --resume)"))
	g.Expect(pr.Status.Rollout.Message).To(Equal(ready.Message))
	g.Eventually(func() []string { return promotionEvents(g, f.ns, name) }).WithTimeout(10 * time.Second).Should(ContainElements(
		HavePrefix("Warning RollingBack: rollout of 1.6.0 into production stopped in wave canary"),
		HavePrefix("Warning RolledBack: rollout of 1.6.0 into production stopped in wave canary"),
	))
	g.Expect(slices.ContainsFunc(promotionEvents(g, f.ns, name), func(e string) bool { return strings.HasPrefix(e, "Warning Paused") })).To(BeFalse())
}

// TestReconciler_endsARollbackAtTheProgressDeadline: a rollback whose
// agent never reports fails the Promotion once the rollout's progress
// deadline passed since the rollback started, naming the target.
func TestReconciler_endsARollbackAtTheProgressDeadline(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyHelm, onFailureRollback, func(r *tugboatv1alpha1.Rollout) {
		r.ProgressDeadline = &metav1.Duration{Duration: 3 * time.Second}
	})
	name := f.promote("1.6.1")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))
	g.Eventually(func() *tugboatv1alpha1.TargetAction { return firstAction(f, name) }).WithTimeout(10 * time.Second).ShouldNot(BeNil())
	f.reportAction(name, "prod-a", false, tugboatv1alpha1.ActionFailed, 4, "upgrading release apps/web to web 1.6.1: context deadline exceeded")
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionRollingBack))
	started := f.get(name).Status.Rollout.RollbackStartedAt.Time

	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionFailed))
	pr := f.get(name)
	g.Expect(pr.Status.CompletedAt.Time.Sub(started)).To(BeNumerically(">=", 2*time.Second), "not before the deadline (times are kept to the second)")
	g.Expect(pr.Status.Rollout.Phase).To(Equal(tugboatv1alpha1.RolloutRolledBack))
	g.Expect(f.rollbacks(name)).To(Equal([]string{"prod-a Pending"}))
	g.Expect(findCondition(pr, tugboatv1alpha1.ReadyCondition).Message).To(ContainSubstring(
		"rolled back 0 target(s) to the revision they ran before; no outcome within the progress deadline (3s) from prod-a/apps/web"))
}

// TestReconciler_rollsBackKubernetesTargetsToTheVersionTheyRan: with the
// kubernetes strategy, the rollback is the strategy called again with the
// version the changed targets ran before, for those targets only.
func TestReconciler_rollsBackKubernetesTargetsToTheVersionTheyRan(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyKubernetes, onFailureRollback)
	name := f.promote("1.6.2")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))
	f.report("prod-a", 4, "1.6.2", tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthInProgress)

	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionFailed))
	g.Expect(f.acted()).To(Equal([][]string{{webA}, {webA}}))
	f.mu.Lock()
	g.Expect(f.versions).To(Equal([]string{"1.6.2", "1.3.0 (rollback from 1.6.2)"}))
	f.mu.Unlock()
	pr := f.get(name)
	g.Expect(f.rollbacks(name)).To(Equal([]string{"prod-a Succeeded"}))
	g.Expect(findCondition(pr, tugboatv1alpha1.ReadyCondition).Reason).To(Equal(tugboatv1alpha1.RolloutFailedReason.String()))
	g.Expect(pr.Status.Rollout.Phase).To(Equal(tugboatv1alpha1.RolloutRolledBack))
}

// TestReconciler_opensARevertPullRequestForPullRequestTargets: with the
// pullRequest strategy, the rollback is one call of the strategy (a revert
// pull request) with the version the changed targets ran, marked as a
// rollback from the promoted version; the Promotion then fails
// RolloutFailed, the targets' rollbacks naming the pull request.
func TestReconciler_opensARevertPullRequestForPullRequestTargets(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyPullRequest, onFailureRollback)
	name := f.promote("1.6.3")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))
	f.report("prod-a", 4, "1.6.3", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed)

	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionFailed))
	g.Expect(f.acted()).To(Equal([][]string{{webA}, {webA}}))
	f.mu.Lock()
	g.Expect(f.versions).To(Equal([]string{"1.6.3", "1.3.0 (rollback from 1.6.3)"}))
	f.mu.Unlock()
	pr := f.get(name)
	g.Expect(f.rollbacks(name)).To(Equal([]string{"prod-a Succeeded"}))
	g.Expect(promotionTargets(t, f.ns, name)[0].Status.Rollout.Rollback.Message).To(Equal(
		"revert pull request to 1.3.0 (the target returns once it is merged): acted on " + webA))
	g.Expect(findCondition(pr, tugboatv1alpha1.ReadyCondition).Reason).To(Equal(tugboatv1alpha1.RolloutFailedReason.String()))
}

// firstAction returns the upgrade action of the first target of
// Promotion name, nil while it has none.
func firstAction(f *rolloutFixture, name string) *tugboatv1alpha1.TargetAction {
	if pts := promotionTargets(f.t, f.ns, name); len(pts) > 0 {
		return pts[0].Status.Action
	}
	return nil
}
