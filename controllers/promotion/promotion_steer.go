package promotion

// Steering a rollout (issue 24): a person pauses or resumes a Promotion's
// rollout by writing status.rolloutRequest (tugboat rollout pause|resume,
// the dashboard), which the admission policy tugboat-approvals
// authenticates. Each request carries the next sequence number; the hub
// honors the newest one once and records its sequence in
// status.rollout.observedRequest, so pause, resume and pause again each
// act once, across restarts of the hub.

import (
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/rollout"
)

// steer honors the newest status.rolloutRequest, if the hub has not yet:
//   - Pause stops the rollout at the next wave boundary: phase Paused,
//     reason PausedByUser, status.rollout.pausedBy the user. No target not
//     acted on yet is acted on; those acted on are still verified, and
//     count against the budget as before.
//   - Resume lets a paused rollout go on, whoever or whatever paused it. It
//     accepts the failures the rollout has now (status.rollout.
//     acceptedFailures) without refilling the budget: one more failure
//     than the budget or the accepted ones allow stops it again.
//
// A request that changes nothing (a pause of a paused rollout, a resume of
// one that is not paused: another person's request came first; a pause
// once every wave qualified, when only post steps are left, whose
// deadlines a pause would only run out) is recorded as honored and does
// nothing (a pause that came too late says so in status.rollout.message). replan is true when the plan must
// be made again (a resume changed the failures accepted).
func steer(pr *tugboatv1alpha1.Promotion, plan *rollout.Plan, obs []observation, now time.Time) (replan bool) {
	req, st := pr.Status.RolloutRequest, pr.Status.Rollout
	if req == nil || req.Sequence <= st.ObservedRequest {
		return false
	}
	st.ObservedRequest = req.Sequence
	paused := pr.Status.Phase == tugboatv1alpha1.PromotionPaused
	switch {
	case req.Action == tugboatv1alpha1.RolloutActionPause && !paused && plan.Done():
		// Every wave qualified: nothing is left to hold, and the post
		// steps, whose clocks run, would only time out while paused.
		st.Message = clip.String(fmt.Sprintf("pause by %s not applied: every wave of the rollout already qualified, and only its post steps are left "+
			"(to stop the promotion: tugboat rollout abort %s -n %s)", req.User, pr.Name, pr.Namespace), 1024)
	case req.Action == tugboatv1alpha1.RolloutActionPause && !paused:
		st.Phase, st.PausedBy = tugboatv1alpha1.RolloutPaused, req.User
		st.Pauses++
		recordPlan(pr, plan, obs, now)
		msg := clip.String(userPausedMessage(pr, plan, req), 1024)
		st.Message = msg
		pr.Status.Phase = tugboatv1alpha1.PromotionPaused
		apimeta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{
			Type: tugboatv1alpha1.ReadyCondition.String(), Status: metav1.ConditionFalse, Reason: tugboatv1alpha1.PausedByUserReason.String(),
			Message: msg, ObservedGeneration: pr.Generation,
		})
		apimeta.RemoveStatusCondition(&pr.Status.Conditions, tugboatv1alpha1.ReconcilingCondition.String())
	case req.Action == tugboatv1alpha1.RolloutActionResume && paused:
		st.Phase, st.PausedBy = tugboatv1alpha1.RolloutProgressing, ""
		st.Resumes++
		st.AcceptedFailures = max(st.AcceptedFailures, count32(plan.Budget.Used))
		// Running until advance says where the rollout stands; the Ready
		// condition follows.
		pr.Status.Phase = tugboatv1alpha1.PromotionRunning
		return true
	}
	return false
}

// userPausedMessage says who paused the rollout, where, and what a person
// can do.
func userPausedMessage(pr *tugboatv1alpha1.Promotion, plan *rollout.Plan, req *tugboatv1alpha1.RolloutRequest) string {
	where := "after its last wave"
	if !plan.Done() {
		w := plan.Waves[plan.Current]
		where = fmt.Sprintf("in wave %s (%d of %d, %d of %d targets qualified)", w.Name, plan.Current+1, len(plan.Waves), w.Succeeded, len(w.Targets))
	}
	return fmt.Sprintf("rollout of %s into %s paused by %s %s%s. The targets acted on are still verified; nothing more is acted on "+
		"until it is resumed (tugboat rollout resume %s -n %s) or aborted (tugboat rollout abort %s -n %s)",
		pr.Spec.Version, pr.Spec.To, req.User, where, suffix(req.Message), pr.Name, pr.Namespace, pr.Name, pr.Namespace)
}
