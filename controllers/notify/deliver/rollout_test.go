package deliver_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// TestDeliver_tellsEachWaveAndEachPauseAndResumeOnce: a rollout's waves
// are told once each, in order, even when two qualify between passes, as
// are a person's pause and resume, and pausing again is told again; the
// end comes last. One notice per wave, never one per target.
func TestDeliver_tellsEachWaveAndEachPauseAndResumeOnce(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-waves"
	rcv, url := newReceiver(t)
	fixture(t, ns, webhookNotifier("hook", url, ""))
	startDeliverer(t, fastOptions())
	pr := newPromotion(t, ns)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionCreated"}))

	at := func(d time.Duration) *metav1.Time {
		t := metav1.NewTime(time.Now().Add(d).Truncate(time.Second))
		return &t
	}
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		s.Approval = &tugboatv1alpha1.Approval{ApprovedBy: "alice", Time: *at(0)}
		s.Phase, s.StartedAt = tugboatv1alpha1.PromotionRunning, at(0)
		s.StrategyResult = &tugboatv1alpha1.StrategyResult{Message: "acted on 1 target"}
		s.Rollout = &tugboatv1alpha1.RolloutStatus{Phase: tugboatv1alpha1.RolloutProgressing,
			Resolved: &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Count: ptr[int32](1)}},
			Waves: []tugboatv1alpha1.WaveStatus{
				{Name: "canary", Targets: 1, InProgress: 1, StartedAt: at(0)},
				{Name: "wave-1", Targets: 40, Pending: 40},
				{Name: "final", Targets: 59, Pending: 59},
			}}
	})
	start := []string{"PromotionCreated", "PromotionWaitingApproval", "PromotionRunning"}
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal(start))

	// The canary and wave-1 qualify before the deliverer looks again.
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		s.Rollout.CurrentWave = 2
		s.Rollout.Waves[0] = tugboatv1alpha1.WaveStatus{Name: "canary", Targets: 1, Succeeded: 1, StartedAt: at(0), CompletedAt: at(0)}
		s.Rollout.Waves[1] = tugboatv1alpha1.WaveStatus{Name: "wave-1", Targets: 40, Succeeded: 39, Failed: 1, StartedAt: at(0), CompletedAt: at(0)}
		s.Rollout.Waves[2] = tugboatv1alpha1.WaveStatus{Name: "final", Targets: 59, InProgress: 59, StartedAt: at(0)}
	})
	waves := append(append([]string{}, start...), "PromotionWaveCompleted", "PromotionWaveCompleted")
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal(waves))
	got := rcv.notices()
	g.Expect(got[3].Title).To(Equal("web 1.4.0 → production: wave canary (1 of 3) completed"))
	g.Expect(got[3].Promotion.Message).To(Equal("wave canary qualified: 1 of 1 targets succeeded, 0 failed"))
	g.Expect(got[4].Promotion.Wave).To(Equal("wave-1 (2 of 3)"))
	g.Expect(got[4].Promotion.Message).To(Equal("wave wave-1 qualified: 39 of 40 targets succeeded, 1 failed"))
	g.Expect(got[4].Promotion.Rollout).To(Equal("wave 3/3 (final), 40/100 succeeded, 0 failed of 0 allowed"))
	rec := records(g, ns, pr.Name)
	g.Expect(rec).To(ContainElement(And(HaveField("Event", tugboatv1alpha1.EventPromotionWaveCompleted), HaveField("Occurrence", int32(2)))))

	// alice pauses, carol resumes, alice pauses again.
	pause := func(n int32) {
		setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
			s.RolloutRequest = &tugboatv1alpha1.RolloutRequest{Action: tugboatv1alpha1.RolloutActionPause, Sequence: int64(2*n - 1), User: "alice", Time: *at(0)}
			s.Phase, s.Rollout.Phase, s.Rollout.PausedBy, s.Rollout.Pauses = tugboatv1alpha1.PromotionPaused, tugboatv1alpha1.RolloutPaused, "alice", n
			s.Conditions = ready(metav1.ConditionFalse, tugboatv1alpha1.PausedByUserReason, "rollout of 1.4.0 into production paused by alice in wave final")
		})
	}
	pause(1)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(HaveLen(len(waves) + 1))
	g.Expect(rcv.notices()[len(waves)].Event).To(Equal("PromotionPaused"))
	g.Expect(rcv.notices()[len(waves)].Promotion.Message).To(Equal("rollout of 1.4.0 into production paused by alice in wave final"))
	g.Expect(rcv.notices()[len(waves)].Promotion.Rollout).To(HavePrefix("Paused by alice: wave 3/3 (final)"))
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		s.RolloutRequest = &tugboatv1alpha1.RolloutRequest{Action: tugboatv1alpha1.RolloutActionResume, Sequence: 2, User: "carol", Time: *at(0), Message: "looks fine"}
		s.Phase, s.Rollout.Phase, s.Rollout.PausedBy, s.Rollout.Resumes = tugboatv1alpha1.PromotionVerifying, tugboatv1alpha1.RolloutProgressing, "", 1
	})
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(HaveLen(len(waves) + 2))
	resumed := rcv.notices()[len(waves)+1]
	g.Expect(resumed.Event).To(Equal("PromotionResumed"))
	g.Expect(resumed.Promotion.Message).To(Equal("the rollout of 1.4.0 into production was resumed by carol: looks fine"))
	pause(2)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(HaveLen(len(waves) + 3))
	g.Expect(rcv.notices()[len(waves)+2].Event).To(Equal("PromotionPaused"))

	// Aborted while paused: the end is told, and nothing again.
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		s.Phase, s.CompletedAt = tugboatv1alpha1.PromotionAborted, at(0)
		s.Conditions = ready(metav1.ConditionFalse, tugboatv1alpha1.AbortedReason, "aborted by alice")
	})
	want := append(append([]string{}, waves...), "PromotionPaused", "PromotionResumed", "PromotionPaused", "PromotionAborted")
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal(want))
	g.Consistently(rcv.events, time.Second, 100*time.Millisecond).Should(Equal(want), "each once")
}

// TestDeliver_summaryListsTheWaves: a summary notifier (email's default)
// tells a rollout once, at its end, with each wave that qualified in its
// timeline.
func TestDeliver_summaryListsTheWaves(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-waves-summary"
	rcv, url := newReceiver(t)
	fixture(t, ns, webhookNotifier("digest", url, tugboatv1alpha1.NotifySummary))
	startDeliverer(t, fastOptions())
	pr := newPromotion(t, ns)
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		s.Phase, s.StartedAt, s.CompletedAt = tugboatv1alpha1.PromotionSucceeded, &now, &now
		s.Rollout = &tugboatv1alpha1.RolloutStatus{Phase: tugboatv1alpha1.RolloutCompleted, CurrentWave: 2,
			Resolved: &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Count: ptr[int32](1)}},
			Waves: []tugboatv1alpha1.WaveStatus{
				{Name: "canary", Targets: 1, Succeeded: 1, StartedAt: &now, CompletedAt: &now},
				{Name: "final", Targets: 9, Succeeded: 9, StartedAt: &now, CompletedAt: &now},
			}}
		s.Conditions = ready(metav1.ConditionTrue, tugboatv1alpha1.SucceededReason, "every target runs 1.4.0")
	})
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionSucceeded"}))
	var lines []string
	for _, s := range rcv.notices()[0].Timeline {
		lines = append(lines, s.Text)
	}
	g.Expect(lines).To(ContainElements(
		"wave canary (1 of 2) qualified: 1 of 1 targets succeeded, 0 failed",
		"wave final (2 of 2) qualified: 9 of 9 targets succeeded, 0 failed"))
	g.Consistently(rcv.events, time.Second, 100*time.Millisecond).Should(HaveLen(1), "no wave notice of its own")
}
