package promotion

import (
	"cmp"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Drift on the way (issue 26, item 4). A preview goes Stale when a
// previewed release moves to another revision after its agent answered
// (refreshPreview). Once the approval completed, and before the strategy
// acts, the hub
//
//  1. records what the approvers saw: status.preview.approvedPhase and
//     approvedDigest (recordApprovedPreview);
//  2. when the preview is Stale, asks the agents again: a second
//     PromotionPreview, <promotion>-recheck, with new action ids, bounded
//     by the same --promotion-preview-timeout (recheckPreview); the
//     Promotion waits in WaitingApproval meanwhile, and never longer;
//  3. compares the new digest with the approved one. When it differs, or
//     the preview could not be computed again, it sets
//     status.preview.changedSinceApproval: every notifier is told
//     (PromotionPreviewChanged, with the new summary) and an Event
//     PreviewChanged is emitted.
//
// The promotion then proceeds: the approvers approved this version into
// this environment, and they are told that the change differs from what
// they saw (they can abort it: tugboat abort). Unless the environment's
// gate sets reapproveOnChange: then the approval is asked again
// (askApprovalAgain): the votes cast so far no longer count
// (status.preview.approvalsReset), status.approval is cleared, an Event
// ApprovalAskedAgain says why, and the Promotion waits for approval with
// the new preview (the notice PromotionPreviewChanged carries it). A
// preview that did not go stale is not computed again, and is computed
// again at most once per Promotion.

// Event reasons of the recheck.
const (
	// EventPreviewRecomputing: the preview went stale; the hub asks the
	// agents again before the strategy acts.
	EventPreviewRecomputing = "PreviewRecomputing"
	// EventPreviewChanged: the preview computed again differs from the
	// one approved, or could not be computed again.
	EventPreviewChanged = "PreviewChanged"
	// EventApprovalAskedAgain: the preview changed since the approval and
	// the environment's gate sets reapproveOnChange: the votes cast so far
	// no longer count.
	EventApprovalAskedAgain = "ApprovalAskedAgain"
)

// recheckSuffix names the second PromotionPreview of a Promotion.
const recheckSuffix = "-recheck"

// recheckName is the name of pr's second PromotionPreview.
func recheckName(pr *tugboatv1alpha1.Promotion) string {
	name := pr.Name
	if len(name)+len(recheckSuffix) > 253 {
		name = name[:253-len(recheckSuffix)]
	}
	return name + recheckSuffix
}

// recordApprovedPreview records, once, the preview the approvers saw when
// the approval completed.
func recordApprovedPreview(pr *tugboatv1alpha1.Promotion) {
	sum := pr.Status.Preview
	if sum == nil || sum.ApprovedPhase != "" || pr.Status.Approval == nil || pr.Status.Approval.ApprovedBy == "" {
		return
	}
	sum.ApprovedPhase, sum.ApprovedDigest = sum.Phase, sum.Digest
}

// recheckPreview computes a stale preview again after the approval and
// before the strategy acts, and says whether it differs from the one
// approved. It reports whether the Promotion waits for the agents'
// answers, and how long at most.
func (r *Reconciler) recheckPreview(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (bool, time.Duration, error) {
	sum := pr.Status.Preview
	if pr.StrategyType() != tugboatv1alpha1.StrategyHelm || !env.Gates.RequireApproval || sum == nil {
		return false, 0, nil
	}
	recordApprovedPreview(pr)
	if sum.RecomputedAt == nil {
		if sum.Phase != tugboatv1alpha1.PreviewStale {
			return false, 0, nil // what they approved is what the strategy does
		}
		stale := sum.Reason
		now := metav1.NewTime(r.Now())
		name, why, err := r.createPreview(ctx, pr, p, env, recheckName(pr), "/preview"+recheckSuffix)
		if err != nil {
			return false, 0, err
		}
		if name == "" {
			pr.Status.Preview = &tugboatv1alpha1.PreviewSummary{
				Phase: tugboatv1alpha1.PreviewFailed, Name: sum.Name, ApprovedPhase: sum.ApprovedPhase, ApprovedDigest: sum.ApprovedDigest,
				RecomputedAt: &now, ChangedSinceApproval: true, ComputedAt: &now,
				Reason: clip.String(stale+"; it could not be computed again: "+why, 1024),
			}
			if env.Gates.ReapproveOnChange {
				askApprovalAgain(pr)
			}
			return false, 0, nil
		}
		pr.Status.Preview = &tugboatv1alpha1.PreviewSummary{
			Phase: tugboatv1alpha1.PreviewPending, Name: name, ApprovedPhase: sum.ApprovedPhase, ApprovedDigest: sum.ApprovedDigest,
			RecomputedAt: &now, Reason: clip.String(stale, 1024),
		}
		return true, cmp.Or(r.Options.PreviewTimeout, DefaultPreviewTimeout), nil
	}
	if sum.Phase == tugboatv1alpha1.PreviewPending {
		pp, err := r.getPreview(ctx, pr, sum.Name)
		if err != nil {
			return false, 0, ignoreNotOurs(err)
		}
		return true, max(pp.Spec.Deadline.Sub(r.Now()), 0) + 100*time.Millisecond, nil
	}
	// Answered, failed or late: Failed says nothing of what the strategy
	// will do, so the approvers are told too.
	if sum.ChangedSinceApproval {
		return false, 0, nil // told already
	}
	sum.ChangedSinceApproval = sum.Phase == tugboatv1alpha1.PreviewFailed || sum.Digest != sum.ApprovedDigest
	if sum.Phase == tugboatv1alpha1.PreviewFailed {
		sum.Reason = clip.String("the preview went stale after the approval and could not be computed again: "+sum.Reason, 1024)
	}
	if sum.ChangedSinceApproval && env.Gates.ReapproveOnChange {
		askApprovalAgain(pr)
	}
	return false, 0, nil
}

// askApprovalAgain resets pr's approval gate because its preview changed
// since the approval (gates.reapproveOnChange): the votes cast so far no
// longer count (status.preview.approvalsReset; request.Count), and
// status.approval is cleared, so the Promotion waits for approval again.
// What the first approvers saw (approvedPhase, approvedDigest) stays.
func askApprovalAgain(pr *tugboatv1alpha1.Promotion) {
	pr.Status.Preview.ApprovalsReset = int32(min(len(pr.Status.Approvals), tugboatv1alpha1.MaxPreviewVotes))
	pr.Status.Approval = nil
}

// approvalAskedAgain is the Ready message of a Promotion whose approval
// was asked again, or "" when it was not.
func approvalAskedAgain(pr *tugboatv1alpha1.Promotion) string {
	sum := pr.Status.Preview
	if sum == nil || sum.ApprovalsReset == 0 {
		return ""
	}
	votes := fmt.Sprintf("the %d votes cast before no longer count", sum.ApprovalsReset)
	if sum.ApprovalsReset == 1 {
		votes = "the vote cast before no longer counts"
	}
	return fmt.Sprintf("approval asked again: the preview changed since the approval (%s; approved: digest %s), and the gate of %s sets reapproveOnChange, so %s",
		sum.Line(), short(sum.ApprovedDigest), pr.Spec.To, votes)
}

// recordPreviewRecheck emits the Events of the recheck: when it started,
// and when the preview turned out to differ from the one approved.
func recordPreviewRecheck(rec events.EventRecorder, before, after *tugboatv1alpha1.PreviewSummary, pr *tugboatv1alpha1.Promotion) {
	if rec == nil || after == nil {
		return
	}
	if after.RecomputedAt != nil && (before == nil || before.RecomputedAt == nil) {
		rec.Eventf(pr, nil, corev1.EventTypeNormal, EventPreviewRecomputing, "Preview", "%s",
			clip.String("approved, but the preview went stale; computing it again before promoting: "+after.Reason, 1000))
	}
	reset := after.ApprovalsReset > 0 && (before == nil || before.ApprovalsReset == 0)
	if after.ChangedSinceApproval && (before == nil || !before.ChangedSinceApproval) {
		next := "proceeding (tugboat diff " + pr.Name + ", tugboat abort " + pr.Name + ")"
		if reset {
			next = "approval asked again (tugboat diff " + pr.Name + ", tugboat approve " + pr.Name + ")"
		}
		rec.Eventf(pr, nil, corev1.EventTypeWarning, EventPreviewChanged, "Preview", "%s",
			clip.String("the change differs from what was approved (digest "+short(after.ApprovedDigest)+"): "+after.Line()+"; "+next, 1000))
	}
	if reset {
		rec.Eventf(pr, nil, corev1.EventTypeWarning, EventApprovalAskedAgain, "Approve", "%s", clip.String(approvalAskedAgain(pr), 1000))
	}
}

// short is the first 12 hex digits of a digest.
func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	if d == "" {
		return "none"
	}
	return d
}
