package request

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Abort records req, an authenticated request to stop it, in the
// status.abortRequest of the Promotion namespace/name; the Promotion
// controller then moves it to Aborted ("aborted by <user>: <message>") and
// notifies as for every abort.
//
// req.User must be the Kubernetes user name the API server authenticated
// (a SelfSubjectReview): the ValidatingAdmissionPolicy tugboat-approvals
// refuses a request that names anyone but the user writing it, and a user
// without the RBAC verb "abort" on environments.tugboat.dev named
// "<pipeline>/<environment>" or "<pipeline>/*". A zero req.Time is now.
//
// A finished Promotion (Succeeded, Failed, Aborted) is a *PhaseError, as is
// one whose abort someone else already asked for; the same user asking
// again changes nothing and returns the Promotion. The patch carries the
// resourceVersion read, so a concurrent change is seen and the checks run
// again.
//
// Errors: *InvalidError, *NotFoundError, *PhaseError, *NotAllowedError
// (when the API server forbids the write), or the API's error.
func Abort(ctx context.Context, c client.Client, namespace, name string, req tugboatv1alpha1.AbortRequest) (*tugboatv1alpha1.Promotion, error) {
	switch {
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
	return patchStatus(ctx, c, namespace, name, "asking to abort", NotAllowedError{Promotion: name, User: req.User, Action: "abort"},
		func(pr *tugboatv1alpha1.Promotion) (bool, error) {
			if prev := pr.Status.AbortRequest; prev != nil {
				if prev.User == req.User {
					return false, nil // asked twice: the first request stands
				}
				return false, &PhaseError{Promotion: name, Phase: pr.Status.Phase, Detail: "was already asked to abort by " + prev.User}
			}
			if pr.Status.Phase.Terminal() {
				return false, &PhaseError{Promotion: name, Phase: pr.Status.Phase,
					Detail: fmt.Sprintf("has already finished (%s): there is nothing to abort", pr.Status.Phase)}
			}
			pr.Status.AbortRequest = &req
			return true, nil
		})
}
