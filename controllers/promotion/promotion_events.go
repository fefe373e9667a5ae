package promotion

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Event reasons of a Promotion (kubectl events, kubectl describe): one per
// transition a person cares about.
const (
	EventWaitingForApproval = "WaitingForApproval"
	EventApproved           = "Approved"
	EventRejected           = "Rejected"
	EventStarted            = "Started"
	EventSucceeded          = "Succeeded"
	EventFailed             = "Failed"
	EventAborted            = "Aborted"
	EventPaused             = "Paused"
	// EventRolloutPaused: a person paused the rollout (tugboat rollout
	// pause); the note names them.
	EventRolloutPaused = "RolloutPaused"
	// EventRolloutResumed: a person resumed a paused rollout (tugboat
	// rollout resume); the note names them.
	EventRolloutResumed = "RolloutResumed"
	// EventRollingBack: a rollout spent its budget (onFailure Rollback);
	// the targets it changed are being rolled back.
	EventRollingBack = "RollingBack"
	// EventRolledBack: the rollback ended and the Promotion failed
	// (reason RolloutFailed); the note says what was rolled back.
	EventRolledBack = "RolledBack"
)

// recordTransition emits the Events of pr's move from phase before, and of
// an approval outcome recorded since approvedBefore: the Ready condition's
// message is the note (it names who approved, rejected or aborted, and
// why it failed; it holds no secret: the hub writes no credential into
// status, docs/security.md). A nil recorder records nothing.
func recordTransition(rec events.EventRecorder, pr *tugboatv1alpha1.Promotion, before tugboatv1alpha1.PromotionPhase, approvedBefore bool) {
	if rec == nil {
		return
	}
	note := ""
	if c := apimeta.FindStatusCondition(pr.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil {
		note = c.Message
	}
	emit := func(typ, reason, action, msg string) {
		// The note is bounded by the API (1 KiB); keep it well within.
		if len(msg) > 1000 {
			msg = strings.ToValidUTF8(msg[:1000], "") + "…"
		}
		rec.Eventf(pr, nil, typ, reason, action, "%s", msg)
	}
	if a := pr.Status.Approval; a != nil && !approvedBefore && a.ApprovedBy != "" {
		emit(corev1.EventTypeNormal, EventApproved, "Approve", "approved by "+a.ApprovedBy+suffix(a.Message))
	}
	if pr.Status.Phase == before {
		return
	}
	if req := pr.Status.RolloutRequest; req != nil && before == tugboatv1alpha1.PromotionPaused &&
		(pr.Status.Phase == tugboatv1alpha1.PromotionRunning || pr.Status.Phase == tugboatv1alpha1.PromotionVerifying) {
		emit(corev1.EventTypeNormal, EventRolloutResumed, "Resume",
			"rollout of "+pr.Spec.Version+" into "+pr.Spec.To+" resumed by "+req.User+suffix(req.Message))
		return
	}
	switch pr.Status.Phase {
	case tugboatv1alpha1.PromotionWaitingApproval:
		emit(corev1.EventTypeNormal, EventWaitingForApproval, "WaitForApproval", note)
	case tugboatv1alpha1.PromotionRunning:
		emit(corev1.EventTypeNormal, EventStarted, "Promote", note)
	case tugboatv1alpha1.PromotionPaused:
		if pr.Status.Rollout != nil && pr.Status.Rollout.PausedBy != "" {
			emit(corev1.EventTypeNormal, EventRolloutPaused, "Pause", note)
			return
		}
		emit(corev1.EventTypeWarning, EventPaused, "Pause", note)
	case tugboatv1alpha1.PromotionSucceeded:
		emit(corev1.EventTypeNormal, EventSucceeded, "Verify", note)
	case tugboatv1alpha1.PromotionRollingBack:
		emit(corev1.EventTypeWarning, EventRollingBack, "Rollback", note)
	case tugboatv1alpha1.PromotionFailed:
		if c := apimeta.FindStatusCondition(pr.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil && c.Reason == tugboatv1alpha1.RolloutFailedReason.String() {
			emit(corev1.EventTypeWarning, EventRolledBack, "Rollback", note)
			return
		}
		emit(corev1.EventTypeWarning, EventFailed, "Verify", note)
	case tugboatv1alpha1.PromotionAborted:
		if a := pr.Status.Approval; a != nil && a.RejectedBy != "" {
			emit(corev1.EventTypeWarning, EventRejected, "Reject", note)
			return
		}
		emit(corev1.EventTypeWarning, EventAborted, "Abort", note)
	}
}
