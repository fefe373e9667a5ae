package promotion_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/lifecycle"
	"tugboat.dev/tugboat/controllers/promotion"
)

// smokePostStep gives production the post step smoke: an external step of
// the Lifecycle smoke-tests (createSmokeLifecycle).
func smokePostStep(env *tugboatv1alpha1.Environment) {
	env.Steps = &tugboatv1alpha1.Steps{Post: []tugboatv1alpha1.Step{{
		Name: "smoke", Type: tugboatv1alpha1.StepExternal, External: &tugboatv1alpha1.ExternalStep{Lifecycle: "smoke-tests"},
	}}}
}

func (f *rolloutFixture) createSmokeLifecycle() {
	f.t.Helper()
	if err := cluster.Client.Create(context.Background(), &tugboatv1alpha1.Lifecycle{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "smoke-tests"},
		Spec:       tugboatv1alpha1.LifecycleSpec{EventKey: "smoke-tests", Description: "runs the smoke tests"},
	}); err != nil {
		f.t.Fatal(err)
	}
}

// failSmoke waits for the post step smoke's LifecycleEvent and marks it
// Error with msg, as the step's controller would (here the test's own
// user: the policy tugboat-lifecycles records it). It returns the failure
// message the Promotion's step records.
func (f *rolloutFixture) failSmoke(g Gomega, name, msg string) string {
	f.t.Helper()
	ev := promotion.EventName(name, "smoke", 1)
	g.Eventually(func() error {
		return cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: ev}, &tugboatv1alpha1.LifecycleEvent{})
	}).WithTimeout(30*time.Second).Should(Succeed(), "the post step runs once the last wave qualified")
	done, err := lifecycle.Finish(context.Background(), cluster.Client, f.ns, ev, tugboatv1alpha1.EventError, msg)
	g.Expect(err).NotTo(HaveOccurred())
	return "post step smoke (external) failed after 1 attempt(s): LifecycleEvent " + ev + " errored, by " + done.Status.FinishedBy + ": " + msg
}

// rollOutAll takes every wave of the fixture's rollout of version to done:
// the canary prod-a, then prod-b and prod-c, each reporting revision 4 of
// version deployed and Current (with the helm strategy, after its agent
// reported the upgrade that made it).
func (f *rolloutFixture) rollOutAll(g Gomega, name, version string) {
	f.t.Helper()
	upgraded := func(spoke string) {
		if f.typ == tugboatv1alpha1.StrategyHelm {
			g.Eventually(func() bool {
				for _, pt := range promotionTargets(f.t, f.ns, name) {
					if pt.Spec.Spoke == spoke {
						return pt.Status.Action != nil
					}
				}
				return false
			}).WithTimeout(10*time.Second).Should(BeTrue(), "%s's upgrade is queued", spoke)
			f.reportAction(name, spoke, false, tugboatv1alpha1.ActionSucceeded, 4, "upgraded to "+version+" (revision 4)")
		}
		f.report(spoke, 4, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	}
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))
	upgraded("prod-a")
	g.Eventually(f.acted).WithTimeout(10 * time.Second).Should(Equal([][]string{{webA}, {webB, webC}}))
	upgraded("prod-b")
	upgraded("prod-c")
}

// TestSteps_aFailedPostStepRollsBackWithOnFailureRollback: with the helm
// strategy and onFailure Rollback, every wave qualifies, then the post
// step fails: the rollout stops (RollingBack, the message naming the
// step), a rollback action to the revision each ran before is queued for
// every target the Promotion changed, and once the agents report them
// done, the Promotion fails with reason RolloutFailed, naming the step and
// what was rolled back; Events StepFailed, RollingBack and RolledBack say
// so.
func TestSteps_aFailedPostStepRollsBackWithOnFailureRollback(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixtureEnv(t, tugboatv1alpha1.StrategyHelm, smokePostStep, onFailureRollback)
	f.createSmokeLifecycle()
	name := f.promote("1.6.4")
	f.rollOutAll(g, name, "1.6.4")
	why := "rollout of 1.6.4 into production stopped after its last wave: " + f.failSmoke(g, name, "checkout answers 500")

	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionRollingBack))
	pr := f.get(name)
	g.Expect(f.rollbacks(name)).To(Equal([]string{"prod-a Pending", "prod-b Pending", "prod-c Pending"}), "every target the rollout changed")
	g.Expect(pr.Status.Rollout.Phase).To(Equal(tugboatv1alpha1.RolloutRollingBack))
	g.Expect(pr.Status.Rollout.RollbackStartedAt).NotTo(BeNil())
	ready := findCondition(pr, tugboatv1alpha1.ReadyCondition)
	g.Expect(ready.Reason).To(Equal(tugboatv1alpha1.RollingBackReason.String()))
	g.Expect(ready.Message).To(Equal(why + "; rolling back 0 of 3 changed target(s) done; waiting for prod-a/apps/web, prod-b/apps/web, prod-c/apps/web"))
	g.Expect(pr.Status.Steps).To(ConsistOf(HaveField("Phase", tugboatv1alpha1.StepFailed)))

	for i, spoke := range rolloutSpokes {
		f.reportAction(name, spoke, true, tugboatv1alpha1.ActionSucceeded, int32(5+i), "rolled back release apps/web to revision 3, chart version 1.3.0")
	}
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionFailed))
	pr = f.get(name)
	g.Expect(pr.Status.Rollout.Phase).To(Equal(tugboatv1alpha1.RolloutRolledBack))
	ready = findCondition(pr, tugboatv1alpha1.ReadyCondition)
	g.Expect(ready.Reason).To(Equal(tugboatv1alpha1.RolloutFailedReason.String()))
	g.Expect(ready.Message).To(Equal(why + "; rolled back 3 target(s) to the revision they ran before: prod-a/apps/web, prod-b/apps/web, prod-c/apps/web. " +
		"production is held until someone resumes it (tugboat promote --resume)"))
	g.Expect(f.acted()).To(HaveLen(2), "the helm strategy's rollback is the agents' action, not another call")
	g.Eventually(func() []string { return promotionEvents(g, f.ns, name) }).WithTimeout(10 * time.Second).Should(ContainElements(
		"Warning StepFailed: "+why[len("rollout of 1.6.4 into production stopped after its last wave: "):],
		HavePrefix("Warning RollingBack: "+why),
		HavePrefix("Warning RolledBack: "+why),
	))
}

// TestSteps_aFailedPostStepSetsFluxTargetsBack: with the kubernetes
// strategy and onFailure Rollback, a failed post step sets the targets'
// HelmReleases back to the version they ran, through the strategy, and
// the Promotion fails RolloutFailed.
func TestSteps_aFailedPostStepSetsFluxTargetsBack(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixtureEnv(t, tugboatv1alpha1.StrategyKubernetes, smokePostStep, onFailureRollback)
	f.createSmokeLifecycle()
	name := f.promote("1.6.5")
	f.rollOutAll(g, name, "1.6.5")
	f.failSmoke(g, name, "error rate 4%")

	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionFailed))
	g.Expect(f.acted()).To(Equal([][]string{{webA}, {webB, webC}, {webA, webB, webC}}))
	f.mu.Lock()
	g.Expect(f.versions).To(Equal([]string{"1.6.5", "1.6.5", "1.3.0 (rollback from 1.6.5)"}))
	f.mu.Unlock()
	pr := f.get(name)
	g.Expect(f.rollbacks(name)).To(Equal([]string{"prod-a Succeeded", "prod-b Succeeded", "prod-c Succeeded"}))
	g.Expect(findCondition(pr, tugboatv1alpha1.ReadyCondition).Reason).To(Equal(tugboatv1alpha1.RolloutFailedReason.String()))
	g.Expect(findCondition(pr, tugboatv1alpha1.ReadyCondition).Message).To(HavePrefix(
		"rollout of 1.6.5 into production stopped after its last wave: post step smoke (external) failed after 1 attempt(s): "))
}

// TestSteps_aFailedPostStepOfAPausingRolloutChangesNothing: with onFailure
// Pause (the default), a failed post step fails the Promotion with reason
// StepFailed, as without a rollout: nothing is rolled back, the targets
// keep the version.
func TestSteps_aFailedPostStepOfAPausingRolloutChangesNothing(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixtureEnv(t, tugboatv1alpha1.StrategyKubernetes, smokePostStep)
	f.createSmokeLifecycle()
	name := f.promote("1.6.6")
	f.rollOutAll(g, name, "1.6.6")
	want := f.failSmoke(g, name, "checkout answers 500")

	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionFailed))
	pr := f.get(name)
	ready := findCondition(pr, tugboatv1alpha1.ReadyCondition)
	g.Expect([]string{ready.Reason, ready.Message}).To(Equal([]string{promotion.StepFailedReason.String(), want}))
	g.Expect(f.rollbacks(name)).To(BeEmpty())
	g.Expect(pr.Status.Rollout.RollbackStartedAt).To(BeNil())
	g.Consistently(f.acted).WithTimeout(time.Second).Should(HaveLen(2), "no rollback")
}
