package deliver_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// TestDeliver_announcesARollback: a rollout that spends its budget with
// onFailure Rollback is announced as PromotionRollingBack (once), between
// the start and the end, which is PromotionFailed.
func TestDeliver_announcesARollback(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-rollback"
	rcv, url := newReceiver(t)
	fixture(t, ns, webhookNotifier("hook", url, ""))
	startDeliverer(t, fastOptions())
	pr := newPromotion(t, ns)

	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionCreated"}))
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		now := metav1.Now()
		s.Approval = &tugboatv1alpha1.Approval{ApprovedBy: "alice", Time: now}
		s.Phase, s.StartedAt = tugboatv1alpha1.PromotionRunning, &now
		s.StrategyResult = &tugboatv1alpha1.StrategyResult{Message: "queued an action for 1 target"}
		s.Rollout = &tugboatv1alpha1.RolloutStatus{Phase: tugboatv1alpha1.RolloutProgressing,
			Resolved: &tugboatv1alpha1.Rollout{OnFailure: tugboatv1alpha1.RolloutRollback}}
	})
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionCreated", "PromotionWaitingApproval", "PromotionRunning"}))

	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		now := metav1.Now()
		s.Phase = tugboatv1alpha1.PromotionRollingBack
		s.Rollout.Phase, s.Rollout.RollbackStartedAt = tugboatv1alpha1.RolloutRollingBack, &now
		s.Conditions = ready(metav1.ConditionUnknown, tugboatv1alpha1.RollingBackReason, "rollout of 1.4.0 into production stopped in wave canary; rolling back")
	})
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{
		"PromotionCreated", "PromotionWaitingApproval", "PromotionRunning", "PromotionRollingBack"}))

	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		now := metav1.Now()
		s.Phase, s.CompletedAt = tugboatv1alpha1.PromotionFailed, &now
		s.Rollout.Phase = tugboatv1alpha1.RolloutRolledBack
		s.Conditions = ready(metav1.ConditionFalse, tugboatv1alpha1.RolloutFailedReason, "rolled back 1 target(s)")
	})
	want := []string{"PromotionCreated", "PromotionWaitingApproval", "PromotionRunning", "PromotionRollingBack", "PromotionFailed"}
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal(want))
	g.Consistently(rcv.events, time.Second, 100*time.Millisecond).Should(Equal(want), "each once")
}
