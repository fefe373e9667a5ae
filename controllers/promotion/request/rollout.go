package request

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// SteerRollout records req, an authenticated request to pause or resume
// its rollout, in the status.rolloutRequest of the Promotion
// namespace/name, with the next sequence number; the Promotion controller
// then pauses the rollout at the next wave boundary (phase Paused, reason
// PausedByUser) or lets it go on, and records the sequence it honored in
// status.rollout.observedRequest.
//
// req.User must be the Kubernetes user name the API server authenticated
// (a SelfSubjectReview): the ValidatingAdmissionPolicy tugboat-approvals
// refuses a request that names anyone but the user writing it, and a user
// without the RBAC verb "pause" or "resume" on environments.tugboat.dev
// named "<pipeline>/<environment>" or "<pipeline>/*". req.Sequence is
// ignored (the next one is taken); a zero req.Time is now.
//
// A Promotion without a rollout in progress (no rollout, not started, or
// finished), a pause of a paused rollout and a resume of one that is not
// paused are a *PhaseError; the same request again before the hub honored
// it changes nothing and returns the Promotion. The patch carries the
// resourceVersion read, so a concurrent change is seen and the checks run
// again.
//
// Errors: *InvalidError, *NotFoundError, *PhaseError, *NotAllowedError
// (when the API server forbids the write), or the API's error.
func SteerRollout(ctx context.Context, c client.Client, namespace, name string, req tugboatv1alpha1.RolloutRequest) (*tugboatv1alpha1.Promotion, error) {
	switch {
	case req.Action != tugboatv1alpha1.RolloutActionPause && req.Action != tugboatv1alpha1.RolloutActionResume:
		return nil, invalid("action", "must be %s or %s, got %q", tugboatv1alpha1.RolloutActionPause, tugboatv1alpha1.RolloutActionResume, req.Action)
	case req.User == "":
		return nil, invalid("user", "required: the authenticated identity")
	case len(req.User) > MaxIdentityLength:
		return nil, invalid("user", "at most %d characters, got %d", MaxIdentityLength, len(req.User))
	case len(req.Message) > MaxMessageLength:
		return nil, invalid("message", "at most %d characters, got %d", MaxMessageLength, len(req.Message))
	}
	if req.Time.IsZero() {
		req.Time = metav1.NewTime(time.Now().Truncate(time.Second))
	}
	verb := strings.ToLower(string(req.Action))
	return patchStatus(ctx, c, namespace, name, "asking to "+verb+" the rollout of", NotAllowedError{Promotion: name, User: req.User, Action: verb + " the rollout of"},
		func(pr *tugboatv1alpha1.Promotion) (bool, error) {
			phase := pr.Status.Phase
			st := pr.Status.Rollout
			switch {
			case phase.Terminal():
				return false, &PhaseError{Promotion: name, Phase: phase,
					Detail: fmt.Sprintf("has already finished (%s): there is no rollout to %s", phase, verb)}
			case st == nil || st.Resolved == nil:
				return false, &PhaseError{Promotion: name, Phase: phase,
					Detail: fmt.Sprintf("has no rollout: its environment %s is promoted as one wave (spec.environments[].rollout); there is nothing to %s", pr.Spec.To, verb)}
			case phase == tugboatv1alpha1.PromotionRollingBack:
				return false, &PhaseError{Promotion: name, Phase: phase,
					Detail: fmt.Sprintf("is rolling back: there is nothing to %s (tugboat rollout abort stops it)", verb)}
			case !phase.Started():
				return false, &PhaseError{Promotion: name, Phase: phase,
					Detail: fmt.Sprintf("has not started its rollout yet (%s): there is nothing to %s", phaseName(phase), verb)}
			}
			prev := pr.Status.RolloutRequest
			pending := prev != nil && prev.Sequence > st.ObservedRequest
			if pending && prev.Action == req.Action && prev.User == req.User {
				return false, nil // asked twice: the first request stands
			}
			paused := phase == tugboatv1alpha1.PromotionPaused
			if pending {
				paused = prev.Action == tugboatv1alpha1.RolloutActionPause
			}
			switch {
			case req.Action == tugboatv1alpha1.RolloutActionPause && paused:
				return false, &PhaseError{Promotion: name, Phase: phase, Detail: "is already paused " + pausedBy(pr, pending)}
			case req.Action == tugboatv1alpha1.RolloutActionResume && !paused:
				return false, &PhaseError{Promotion: name, Phase: phase, Detail: fmt.Sprintf("is not paused (%s): there is nothing to resume", phaseName(phase))}
			}
			req.Sequence = 1
			if prev != nil {
				req.Sequence = prev.Sequence + 1
			}
			pr.Status.RolloutRequest = &req
			return true, nil
		})
}

// pausedBy says who or what paused pr's rollout.
func pausedBy(pr *tugboatv1alpha1.Promotion, pending bool) string {
	switch {
	case pending:
		return "(" + pr.Status.RolloutRequest.User + " asked to pause it)"
	case pr.Status.Rollout.PausedBy != "":
		return "(by " + pr.Status.Rollout.PausedBy + ")"
	}
	return "(its failure budget is spent): resume it (tugboat rollout resume) or abort it"
}
