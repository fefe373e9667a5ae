package promotion_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/identity"
)

// steerAs asks, as user (impersonated on the real API server, under the
// shipped policy tugboat-approvals), to pause or resume name's rollout.
func (f *rolloutFixture) steerAs(user string, action tugboatv1alpha1.RolloutAction, message string) (*tugboatv1alpha1.Promotion, error) {
	f.t.Helper()
	c, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), user)
	if err != nil {
		f.t.Fatal(err)
	}
	return request.SteerRollout(context.Background(), c, f.ns, f.name, tugboatv1alpha1.RolloutRequest{Action: action, User: user, Message: message})
}

func (f *rolloutFixture) phase() tugboatv1alpha1.PromotionPhase { return f.get(f.name).Status.Phase }

// TestReconciler_pausesAtAWaveBoundaryAndResumes: alice (verbs pause and
// resume) pauses the rollout while its canary is verified; the canary
// still qualifies, but the final wave is not acted on until she resumes;
// pausing again and resuming again each act once. carol (no verb) and a
// request in someone else's name are refused by the policy; a recorded
// request cannot be rewritten.
func TestReconciler_pausesAtAWaveBoundaryAndResumes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyNotification)
	g.Expect(identity.GrantVerb(ctx, cluster.Client, f.ns, "alice", "pause", "web/*")).To(Succeed())
	g.Expect(identity.GrantVerb(ctx, cluster.Client, f.ns, "alice", "resume", "web/production")).To(Succeed())
	g.Expect(identity.GrantVerb(ctx, cluster.Client, f.ns, "carol", "resume", "web/production")).To(Succeed())
	f.name = f.promote("1.4.0")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))

	_, err := f.steerAs("carol", tugboatv1alpha1.RolloutActionPause, "")
	g.Expect(err).To(MatchError(ContainSubstring("user carol may not pause rollouts into web/production: RBAC must allow the verb pause on environments.tugboat.dev named web/production or web/*")))
	g.Expect(err).To(MatchError(request.ErrNotAllowed))
	_, err = f.steerAs("alice", tugboatv1alpha1.RolloutActionResume, "")
	g.Expect(err).To(MatchError("promotion " + f.name + " is not paused (Running): there is nothing to resume"))

	// A forged name: alice may pause, but not in bob's name.
	as, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), "alice")
	g.Expect(err).NotTo(HaveOccurred())
	pr := f.get(f.name)
	orig := pr.DeepCopy()
	pr.Status.RolloutRequest = &tugboatv1alpha1.RolloutRequest{Action: tugboatv1alpha1.RolloutActionPause, Sequence: 1, User: "bob", Time: metav1.Now()}
	g.Expect(as.Status().Patch(ctx, pr, client.MergeFrom(orig))).To(MatchError(ContainSubstring("status.rolloutRequest must name you (user alice)")))

	_, err = f.steerAs("alice", tugboatv1alpha1.RolloutActionPause, "checking the dashboards")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.phase).WithTimeout(10 * time.Second).Should(Equal(tugboatv1alpha1.PromotionPaused))
	pr = f.get(f.name)
	g.Expect(pr.Status.Rollout.PausedBy).To(Equal("alice"))
	g.Expect(pr.Status.Rollout.ObservedRequest).To(Equal(int64(1)))
	ready := findCondition(pr, tugboatv1alpha1.ReadyCondition)
	g.Expect(ready.Reason).To(Equal(tugboatv1alpha1.PausedByUserReason.String()))
	g.Expect(ready.Message).To(Equal("rollout of 1.4.0 into production paused by alice in wave canary (1 of 2, 0 of 1 targets qualified): " +
		"checking the dashboards. The targets acted on are still verified; nothing more is acted on until it is resumed " +
		"(tugboat rollout resume " + f.name + " -n " + f.ns + ") or aborted (tugboat rollout abort " + f.name + " -n " + f.ns + ")"))
	g.Eventually(func() []string { return promotionEvents(g, f.ns, f.name) }).WithTimeout(10 * time.Second).Should(
		ContainElement(HavePrefix("Normal RolloutPaused: rollout of 1.4.0 into production paused by alice in wave canary")))

	// The canary, acted on before the pause, is still verified and
	// qualifies; the next wave is not started.
	f.report("prod-a", 4, "1.4.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Eventually(func() string { return waves(f.get(f.name)) }).WithTimeout(10 * time.Second).Should(Equal(
		"Paused current=1 [canary 1 0 0 1 0; final 2 2 0 0 0] failed=0/1"))
	g.Consistently(f.acted).WithTimeout(2*time.Second).Should(Equal([][]string{{webA}}), "nothing is acted on while paused")
	g.Expect(f.phase()).To(Equal(tugboatv1alpha1.PromotionPaused))

	_, err = f.steerAs("alice", tugboatv1alpha1.RolloutActionPause, "")
	g.Expect(err).To(MatchError("promotion " + f.name + " is already paused (by alice)"))
	g.Expect(err).To(MatchError(request.ErrNotWaiting))
	// The recorded request cannot be rewritten, not even by its author.
	pr = f.get(f.name)
	orig = pr.DeepCopy()
	pr.Status.RolloutRequest.Message = "changed"
	g.Expect(as.Status().Patch(ctx, pr, client.MergeFrom(orig))).To(MatchError(ContainSubstring(
		"status.rolloutRequest.sequence must be 2: a recorded request cannot be changed")))

	// carol may resume (she has the verb resume only).
	_, err = f.steerAs("carol", tugboatv1alpha1.RolloutActionResume, "looks fine")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.acted).WithTimeout(10 * time.Second).Should(Equal([][]string{{webA}, {webB, webC}}))
	g.Eventually(f.phase).WithTimeout(10 * time.Second).Should(Equal(tugboatv1alpha1.PromotionVerifying))
	pr = f.get(f.name)
	g.Expect(pr.Status.Rollout.PausedBy).To(BeEmpty())
	g.Expect(pr.Status.Rollout.ObservedRequest).To(Equal(int64(2)))
	g.Eventually(func() []string { return promotionEvents(g, f.ns, f.name) }).WithTimeout(10 * time.Second).Should(
		ContainElement("Normal RolloutResumed: rollout of 1.4.0 into production resumed by carol: looks fine"))

	// Pause again, resume again: each acts once.
	_, err = f.steerAs("alice", tugboatv1alpha1.RolloutActionPause, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.phase).WithTimeout(10 * time.Second).Should(Equal(tugboatv1alpha1.PromotionPaused))
	f.report("prod-b", 4, "1.4.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	f.report("prod-c", 7, "1.4.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Consistently(f.phase).WithTimeout(2*time.Second).Should(Equal(tugboatv1alpha1.PromotionPaused), "a paused rollout does not complete")
	_, err = f.steerAs("alice", tugboatv1alpha1.RolloutActionResume, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.phase).WithTimeout(10 * time.Second).Should(Equal(tugboatv1alpha1.PromotionSucceeded))
	g.Expect(f.get(f.name).Status.Rollout.ObservedRequest).To(Equal(int64(4)))
	g.Expect(f.acted()).To(HaveLen(2), "each target was acted on once")

	_, err = f.steerAs("alice", tugboatv1alpha1.RolloutActionPause, "")
	g.Expect(err).To(MatchError("promotion " + f.name + " has already finished (Succeeded): there is no rollout to pause"))
	pr = f.get(f.name)
	orig = pr.DeepCopy()
	pr.Status.RolloutRequest = &tugboatv1alpha1.RolloutRequest{Action: tugboatv1alpha1.RolloutActionPause, Sequence: 5, User: "alice", Time: metav1.Now()}
	g.Expect(as.Status().Patch(ctx, pr, client.MergeFrom(orig))).To(MatchError(ContainSubstring(
		"the promotion has no rollout in progress (phase Succeeded): there is nothing to pause or resume")))
}

// TestReconciler_resumesABudgetPauseAcceptingItsFailures: the canary
// fails and spends the budget (Paused, reason RolloutPaused); a resume
// accepts that failure without refilling the budget: the final wave is
// acted on, and the next failure pauses the rollout again.
func TestReconciler_resumesABudgetPauseAcceptingItsFailures(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyNotification)
	g.Expect(identity.GrantVerb(ctx, cluster.Client, f.ns, "alice", "resume", "web/production")).To(Succeed())
	f.name = f.promote("1.5.0")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))
	f.report("prod-a", 4, "1.5.0", tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthInProgress)
	g.Eventually(f.phase).WithTimeout(10 * time.Second).Should(Equal(tugboatv1alpha1.PromotionPaused))
	g.Expect(findCondition(f.get(f.name), tugboatv1alpha1.ReadyCondition).Reason).To(Equal(tugboatv1alpha1.RolloutPausedReason.String()))

	_, err := f.steerAs("alice", tugboatv1alpha1.RolloutActionResume, "canary is a known flake")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.acted).WithTimeout(10 * time.Second).Should(Equal([][]string{{webA}, {webB, webC}}))
	g.Eventually(func() string { return waves(f.get(f.name)) }).WithTimeout(10 * time.Second).Should(Equal(
		"Progressing current=1 [canary 1 0 0 0 1; final 2 0 2 0 0] failed=1/1"))
	g.Expect(f.get(f.name).Status.Rollout.AcceptedFailures).To(Equal(int32(1)))

	// One more failure than the budget (1) or the accepted ones (1) allow.
	f.report("prod-b", 4, "1.5.0", tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthInProgress)
	g.Eventually(f.phase).WithTimeout(10 * time.Second).Should(Equal(tugboatv1alpha1.PromotionPaused))
	pr := f.get(f.name)
	g.Expect(waves(pr)).To(Equal("Paused current=1 [canary 1 0 0 0 1; final 2 0 1 0 1] failed=2/1"))
	g.Expect(findCondition(pr, tugboatv1alpha1.ReadyCondition).Reason).To(Equal(tugboatv1alpha1.RolloutPausedReason.String()))
	g.Expect(pr.Status.Rollout.PausedBy).To(BeEmpty())
}

// TestReconciler_honorsEachRolloutRequestOnceAcrossHubRestarts: a pause
// honored before the hub stops stays honored; a resume written while no
// hub runs is honored by the next one, whose final wave is acted on once;
// another restart repeats neither the resume nor the action.
func TestReconciler_honorsEachRolloutRequestOnceAcrossHubRestarts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyNotification)
	g.Expect(identity.GrantVerb(ctx, cluster.Client, f.ns, "alice", "pause", "web/production")).To(Succeed())
	g.Expect(identity.GrantVerb(ctx, cluster.Client, f.ns, "alice", "resume", "web/production")).To(Succeed())
	f.name = f.promote("1.4.0")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))
	_, err := f.steerAs("alice", tugboatv1alpha1.RolloutActionPause, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.phase).WithTimeout(10 * time.Second).Should(Equal(tugboatv1alpha1.PromotionPaused))

	f.stopHub()
	f.report("prod-a", 4, "1.4.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	_, err = f.steerAs("alice", tugboatv1alpha1.RolloutActionResume, "")
	g.Expect(err).NotTo(HaveOccurred(), "the API server checks the request; no hub needs to run")
	g.Consistently(f.phase).WithTimeout(time.Second).Should(Equal(tugboatv1alpha1.PromotionPaused), "no hub, nothing honored")

	f.startHub()
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}, {webB, webC}}))
	g.Eventually(func() int64 { return f.get(f.name).Status.Rollout.ObservedRequest }).WithTimeout(10 * time.Second).Should(Equal(int64(2)))
	// Events are written asynchronously: wait for it before the hub stops.
	resumed := func(g Gomega) int {
		n := 0
		for _, e := range promotionEvents(g, f.ns, f.name) {
			if strings.HasPrefix(e, "Normal RolloutResumed") {
				n++
			}
		}
		return n
	}
	g.Eventually(resumed).WithTimeout(10*time.Second).Should(Equal(1), "one Event for the resume")

	f.stopHub()
	f.startHub()
	g.Consistently(f.acted).WithTimeout(3*time.Second).Should(HaveLen(2), "no action repeated")
	pr := f.get(f.name)
	g.Expect(pr.Status.Phase).To(Equal(tugboatv1alpha1.PromotionVerifying))
	g.Expect([]int32{pr.Status.Rollout.Pauses, pr.Status.Rollout.Resumes}).To(Equal([]int32{1, 1}))
	g.Consistently(resumed).WithTimeout(time.Second).Should(Equal(1), "one Event for one resume, none again after the restart")
}
