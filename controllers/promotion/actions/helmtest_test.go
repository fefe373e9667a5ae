package actions_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// TestActions_helmTestStepRetriesAndSurvivesAHubRestart walks a helmTest
// post step through the real hub: once the target verified, the hub
// queues a helm test action with the revision the upgrade made and the
// step's timeout. The hub restarts while the agent runs it: the new hub
// offers the same action (deterministic id), with the attempt count
// unchanged. The test fails: the step's retry queues a new action (a new
// id; a late report of the old one is not found), which passes, and the
// Promotion succeeds with the step's message.
func TestActions_helmTestStepRetriesAndSurvivesAHubRestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "helmtest")
	dev, staging := registerSpoke(t, ns, "dev-ht"), registerSpoke(t, ns, "staging-ht")
	dev.report(g, release("apps", "web", "1.1.0", 1))
	staging.report(g, release("apps", "web", "1.0.0", 1))

	p := helmPipeline(ns, "dev-ht", &tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com", Chart: "web"},
		tugboatv1alpha1.Target{Spoke: "staging-ht", Namespace: "apps"})
	p.Spec.Environments[1].Steps = &tugboatv1alpha1.Steps{Post: []tugboatv1alpha1.Step{{
		Name: "smoke", Type: tugboatv1alpha1.StepHelmTest, Retries: 1, Timeout: &metav1.Duration{Duration: time.Minute},
	}}}
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
	name := pipeline.PromotionName("web", "staging", "1.1.0")
	g.Eventually(actionPhases(ns, name)).WithTimeout(30 * time.Second).Should(Equal(map[string]tugboatv1alpha1.ActionPhase{
		"apps": tugboatv1alpha1.ActionPending,
	}))
	acts := staging.poll(g)
	g.Expect(acts).To(HaveLen(1))
	g.Expect(acts[0].TypeOf()).To(Equal(wire.ActionUpgrade))
	g.Expect(staging.outcome(g, acts[0].ID, wire.ActionSucceeded, "upgraded to 1.1.0", 2)).To(Equal(http.StatusOK))
	staging.report(g, release("apps", "web", "1.1.0", 2))

	// Verified: the step's first attempt queues the helm test.
	pr := getPromotion(g, ns, name)
	uid := string(pr.UID)
	first := wire.NewHelmTestActionID(uid, "smoke", 1, "staging-ht", "apps", "web")
	g.Eventually(func(g Gomega) *tugboatv1alpha1.TargetAction {
		return getTargets(g, ns, name)[0].HelmTest
	}).WithTimeout(30 * time.Second).Should(And(Not(BeNil()), HaveField("ID", first), HaveField("Phase", tugboatv1alpha1.ActionPending)))
	// The targets are written before the Promotion's status.
	g.Eventually(func(g Gomega) string { return readyMessage(g, ns, name) }).WithTimeout(10 * time.Second).Should(HavePrefix("post step smoke (helmTest, attempt 1 of 2): waiting for the Helm tests of 1 of 1 target(s): staging-ht/apps/web (not fetched by its agent yet)"))
	acts = staging.poll(g)
	g.Expect(acts).To(HaveLen(1))
	g.Expect(acts[0].ID).To(Equal(first))
	g.Expect(acts[0].Type).To(Equal(wire.ActionHelmTest))
	g.Expect(acts[0].Version).To(BeEmpty(), "an older agent fails it as invalid rather than upgrading")
	g.Expect(acts[0].HelmTest).To(Equal(&wire.HelmTestAction{Revision: 2, Version: "1.1.0", TimeoutSeconds: 60}))
	g.Expect([]string{acts[0].Namespace, acts[0].Release, acts[0].Promotion}).To(Equal([]string{"apps", "web", ns + "/" + name}))

	// The hub restarts while the agent runs the tests.
	stopHub()
	restartHub(t)
	acts = staging.poll(g)
	g.Expect(acts).To(HaveLen(1))
	g.Expect(acts[0].ID).To(Equal(first), "the same action, not a new attempt")
	pr = getPromotion(g, ns, name)
	g.Expect(pr.Status.Steps[0].Attempts).To(BeEquivalentTo(1))
	g.Expect(getTargets(g, ns, name)[0].HelmTest.Deliveries).To(BeEquivalentTo(2))

	// Failed: the retry is a new action.
	g.Expect(staging.outcome(g, first, wire.ActionFailed, "helm test of release apps/web (revision 2): test pod web-test failed: log (last lines): connection refused", 2)).
		To(Equal(http.StatusOK))
	second := wire.NewHelmTestActionID(uid, "smoke", 2, "staging-ht", "apps", "web")
	g.Expect(second).NotTo(Equal(first))
	g.Eventually(func(g Gomega) string {
		return getTargets(g, ns, name)[0].HelmTest.ID
	}).WithTimeout(30 * time.Second).Should(Equal(second))
	g.Eventually(func(g Gomega) []any {
		st := getPromotion(g, ns, name).Status.Steps[0]
		return []any{st.Attempts, st.Phase}
	}).WithTimeout(10 * time.Second).Should(Equal([]any{int32(2), tugboatv1alpha1.StepRunning}))
	g.Expect(staging.outcome(g, first, wire.ActionFailed, "late", 2)).To(Equal(http.StatusNotFound), "an earlier attempt's action is done with")
	acts = staging.poll(g)
	g.Expect(acts).To(HaveLen(1))
	g.Expect(acts[0].ID).To(Equal(second))
	g.Expect(staging.outcome(g, second, wire.ActionSucceeded, "release apps/web (revision 2, chart version 1.1.0): 1 test(s) passed: web-test", 2)).
		To(Equal(http.StatusOK))
	g.Eventually(phase(ns, name)).WithTimeout(30 * time.Second).Should(Equal(tugboatv1alpha1.PromotionSucceeded))
	st := getPromotion(g, ns, name).Status.Steps[0]
	g.Expect([]any{st.Phase, st.Attempts, st.Message}).To(Equal([]any{tugboatv1alpha1.StepSucceeded, int32(2),
		"release apps/web (revision 2, chart version 1.1.0): 1 test(s) passed: web-test"}))
}

// TestActions_helmTestOfEachWaveIsOfferedBetweenWaves: with a rollout and
// a helmTest step with waves Each, the canary's helm test is queued once
// the canary qualified, while the Promotion is still Running, and the
// canary's agent is offered it; the final wave is acted on only once it
// passed.
func TestActions_helmTestOfEachWaveIsOfferedBetweenWaves(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "helmtest-each")
	dev := registerSpoke(t, ns, "dev-he")
	canary, other := registerSpoke(t, ns, "staging-he-a"), registerSpoke(t, ns, "staging-he-b")
	dev.report(g, release("apps", "web", "1.1.0", 1))
	canary.report(g, release("apps", "web", "1.0.0", 1))
	other.report(g, release("apps", "web", "1.0.0", 1))

	p := helmPipeline(ns, "dev-he", &tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com", Chart: "web"},
		tugboatv1alpha1.Target{Spoke: "staging-he-a", Namespace: "apps"}, tugboatv1alpha1.Target{Spoke: "staging-he-b", Namespace: "apps"})
	p.Spec.Environments[1].Rollout = &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}}
	p.Spec.Environments[1].Steps = &tugboatv1alpha1.Steps{Post: []tugboatv1alpha1.Step{{
		Name: "smoke", Type: tugboatv1alpha1.StepHelmTest, Timeout: &metav1.Duration{Duration: time.Minute},
		HelmTest: &tugboatv1alpha1.HelmTestStep{Waves: tugboatv1alpha1.HelmTestEach},
	}}}
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
	name := pipeline.PromotionName("web", "staging", "1.1.0")
	spokes := func(g Gomega) []string {
		var out []string
		for _, t := range getTargets(g, ns, name) {
			out = append(out, t.Spoke)
		}
		return out
	}
	g.Eventually(spokes).WithTimeout(30*time.Second).Should(Equal([]string{"staging-he-a"}), "the canary is acted on alone")
	acts := canary.poll(g)
	g.Expect(acts).To(HaveLen(1))
	g.Expect(acts[0].TypeOf()).To(Equal(wire.ActionUpgrade))
	g.Expect(canary.outcome(g, acts[0].ID, wire.ActionSucceeded, "upgraded to 1.1.0", 2)).To(Equal(http.StatusOK))
	canary.report(g, release("apps", "web", "1.1.0", 2))

	// The canary qualified: its helm test is queued while the rollout runs.
	g.Eventually(func(g Gomega) *tugboatv1alpha1.TargetAction {
		return getTargets(g, ns, name)[0].HelmTest
	}).WithTimeout(30 * time.Second).Should(And(Not(BeNil()), HaveField("Phase", tugboatv1alpha1.ActionPending)))
	g.Expect(getPromotion(g, ns, name).Status.Phase).To(Equal(tugboatv1alpha1.PromotionRunning))
	acts = canary.poll(g)
	g.Expect(acts).To(HaveLen(1), "the canary's agent is offered its helm test between the waves")
	g.Expect(acts[0].Type).To(Equal(wire.ActionHelmTest))
	g.Expect(spokes(g)).To(Equal([]string{"staging-he-a"}), "the final wave waits for the canary's tests")
	g.Expect(canary.outcome(g, acts[0].ID, wire.ActionSucceeded, "release apps/web (revision 2, chart version 1.1.0): 1 test(s) passed: web-test", 2)).
		To(Equal(http.StatusOK))
	g.Eventually(spokes).WithTimeout(30*time.Second).Should(Equal([]string{"staging-he-a", "staging-he-b"}), "then the final wave is acted on")
}
