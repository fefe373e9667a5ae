package promotion_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// eachWaveSmoke gives production the post step smoke: a helmTest step
// that tests each wave before the next one starts.
func eachWaveSmoke(env *tugboatv1alpha1.Environment) {
	env.Steps = &tugboatv1alpha1.Steps{Post: []tugboatv1alpha1.Step{{
		Name: "smoke", Type: tugboatv1alpha1.StepHelmTest, HelmTest: &tugboatv1alpha1.HelmTestStep{Waves: tugboatv1alpha1.HelmTestEach},
	}}}
}

// helmTests lists the targets' helm test actions as "spoke phase".
func (f *rolloutFixture) helmTests(pr *tugboatv1alpha1.Promotion) []string {
	var out []string
	for _, pt := range promotionTargets(f.t, f.ns, pr.Name) {
		if t := pt.Status.HelmTest; t != nil {
			out = append(out, pt.Spec.Spoke+" "+string(t.Phase))
		}
	}
	return out
}

// reportHelmTest records the outcome of spoke's helm test action, as the
// hub's actions store does when the agent reports it.
func (f *rolloutFixture) reportHelmTest(name, spoke string, phase tugboatv1alpha1.ActionPhase, msg string) {
	f.t.Helper()
	g := NewWithT(f.t)
	g.Eventually(func() error {
		return patchTarget(f.t, f.ns, name, spoke, func(t *tugboatv1alpha1.PromotionTargetStatus) {
			g.Expect(t.HelmTest).NotTo(BeNil(), "spoke %s has no helm test", spoke)
			t.HelmTest.Phase, t.HelmTest.Message = phase, msg
		})
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

// upgraded reports spoke's upgrade done (revision 4 of version) and the
// release deployed and Current, as its agent would.
func (f *rolloutFixture) upgraded(g Gomega, name, spoke, version string) {
	f.t.Helper()
	g.Eventually(func() bool {
		for _, pt := range promotionTargets(f.t, f.ns, name) {
			if pt.Spec.Spoke == spoke {
				return pt.Status.Action != nil
			}
		}
		return false
	}).WithTimeout(10*time.Second).Should(BeTrue(), "%s's upgrade is queued", spoke)
	f.reportAction(name, spoke, false, tugboatv1alpha1.ActionSucceeded, 4, "upgraded to "+version+" (revision 4)")
	f.report(spoke, 4, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
}

// TestSteps_aHelmTestOfEachWaveRunsBeforeTheNextWave: with waves Each, the
// canary qualifies, and the final wave is not acted on until the canary's
// Helm tests passed; once the final wave qualifies, its targets are tested
// (the canary is not tested again: same attempt), and the Promotion
// succeeds.
func TestSteps_aHelmTestOfEachWaveRunsBeforeTheNextWave(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixtureEnv(t, tugboatv1alpha1.StrategyHelm, eachWaveSmoke)
	name := f.promote("1.7.1")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))
	f.upgraded(g, name, "prod-a", "1.7.1")

	g.Eventually(func() []string { return f.helmTests(f.get(name)) }).WithTimeout(10 * time.Second).Should(Equal([]string{"prod-a Pending"}))
	g.Consistently(f.acted).WithTimeout(1500*time.Millisecond).Should(HaveLen(1), "the final wave waits for the canary's tests")
	pr := f.get(name)
	g.Expect(pr.Status.Phase).To(Equal(tugboatv1alpha1.PromotionRunning))
	g.Expect(findCondition(pr, tugboatv1alpha1.ReadyCondition).Message).To(HavePrefix(
		"post step smoke (helmTest, attempt 1 of 1) tests the waves before wave final before it is acted on: waiting for the Helm tests of 1 of 1 target(s): prod-a/apps/web (not fetched by its agent yet)"))
	g.Expect(pr.Status.Steps).To(ConsistOf(And(HaveField("Phase", tugboatv1alpha1.StepRunning), HaveField("Attempts", int32(1)))))

	f.reportHelmTest(name, "prod-a", tugboatv1alpha1.ActionSucceeded, "release apps/web (revision 4, chart version 1.7.1): 1 test(s) passed: web-smoke")
	g.Eventually(f.acted).WithTimeout(10*time.Second).Should(Equal([][]string{{webA}, {webB, webC}}), "the canary passed: the final wave is acted on")
	g.Eventually(func() string { return f.get(name).Status.Steps[0].Message }).WithTimeout(10 * time.Second).Should(HavePrefix(
		"the waves before wave final passed: release apps/web (revision 4, chart version 1.7.1): 1 test(s) passed: web-smoke; wave final is tested once it qualifies"))
	f.upgraded(g, name, "prod-b", "1.7.1")
	f.upgraded(g, name, "prod-c", "1.7.1")

	g.Eventually(func() []string { return f.helmTests(f.get(name)) }).WithTimeout(10*time.Second).Should(Equal([]string{"prod-a Succeeded", "prod-b Pending", "prod-c Pending"}),
		"the last wave is tested; the canary's outcome stands")
	g.Expect(f.get(name).Status.Phase).To(Equal(tugboatv1alpha1.PromotionVerifying))
	f.reportHelmTest(name, "prod-b", tugboatv1alpha1.ActionSucceeded, "passed")
	f.reportHelmTest(name, "prod-c", tugboatv1alpha1.ActionSucceeded, "passed")
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionSucceeded))
	st := f.get(name).Status.Steps[0]
	g.Expect([]any{st.Phase, st.Attempts, st.Message}).To(Equal([]any{tugboatv1alpha1.StepSucceeded, int32(1), "the Helm tests passed on 3 target(s)"}))
	g.Expect(f.acted()).To(HaveLen(2))
}

// TestSteps_aHelmTestThatFailsOnTheCanaryStopsTheRollout: with waves Each
// and onFailure Rollback, the canary's Helm tests fail: the final wave is
// never acted on, the canary is rolled back, and the Promotion fails
// RolloutFailed, naming the step and the wave it stopped before.
func TestSteps_aHelmTestThatFailsOnTheCanaryStopsTheRollout(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixtureEnv(t, tugboatv1alpha1.StrategyHelm, eachWaveSmoke, onFailureRollback)
	name := f.promote("1.7.2")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))
	f.upgraded(g, name, "prod-a", "1.7.2")
	g.Eventually(func() []string { return f.helmTests(f.get(name)) }).WithTimeout(10 * time.Second).Should(Equal([]string{"prod-a Pending"}))

	f.reportHelmTest(name, "prod-a", tugboatv1alpha1.ActionFailed, "helm test of release apps/web (revision 4): test pod web-smoke failed: log (last lines): connection refused")
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionRollingBack))
	g.Expect(f.rollbacks(name)).To(Equal([]string{"prod-a Pending"}), "only the canary was changed")
	f.reportAction(name, "prod-a", true, tugboatv1alpha1.ActionSucceeded, 5, "rolled back release apps/web to revision 3")
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionFailed))
	pr := f.get(name)
	ready := findCondition(pr, tugboatv1alpha1.ReadyCondition)
	g.Expect(ready.Reason).To(Equal(tugboatv1alpha1.RolloutFailedReason.String()))
	g.Expect(ready.Message).To(Equal("rollout of 1.7.2 into production stopped before wave final: post step smoke (helmTest) failed after 1 attempt(s): " +
		"helm test failed on prod-a/apps/web: helm test of release apps/web (revision 4): test pod web-smoke failed: log (last lines): connection refused; " +
		"rolled back 1 target(s) to the revision they ran before: prod-a/apps/web. production is held until someone resumes it (tugboat promote --resume)"))
	g.Expect(f.acted()).To(Equal([][]string{{webA}}), "the final wave was never acted on")
}
