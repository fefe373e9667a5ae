package request

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// MaxVotes is how many decisions status.approvals holds (the CRD's
// MaxItems).
const MaxVotes = 20

// Decide appends vote, an authenticated decision, to the status.approvals
// of the Promotion namespace/name; the Promotion controller then counts the
// votes (see Count) and starts or aborts the Promotion.
//
// vote.User must be an identity something authenticated, named by
// vote.Source: the Kubernetes user (the API server checks it: the
// ValidatingAdmissionPolicy tugboat-approvals refuses a vote that names
// anyone but the user writing it, and a user without the RBAC verb
// "approve" on the environment), the Slack user ID of a verified
// interaction, or the name of the CI approval credential the hub verified.
// A Slack or CI identity must be listed in the destination environment's
// gates.approvers (MayApprove), else *NotAllowedError. A zero vote.Time is
// now.
//
// Slack and CI identities are checked first. Only a Promotion waiting for
// approval takes a vote: WaitingApproval, or
// Pending (not yet reconciled, or queued behind another promotion) into an
// environment whose gate requires approval, and whose gate has not decided
// yet (status.approval unset); otherwise *PhaseError. The same user's same
// decision again changes nothing and returns the Promotion, whatever its
// phase; a different decision by the same user is a *PhaseError (a vote
// cannot be changed). A vote is one person's (PersonOf: a Slack user or CI
// credential that gates.approvers.people declares to be a Kubernetes user
// is that user): their vote through another identity is the same vote. The
// requester of a manual promotion may not approve it, through any identity
// (*NotAllowedError); they may reject it. The patch carries the
// resourceVersion read, so a concurrent vote or phase change is seen and
// the checks run again.
//
// Errors: *InvalidError (a bad vote), *NotFoundError, *PhaseError,
// *NotAllowedError (also when the API server forbids the write), or the
// API's error.
func Decide(ctx context.Context, c client.Client, namespace, name string, vote tugboatv1alpha1.ApprovalVote) (*tugboatv1alpha1.Promotion, error) {
	if err := validateVote(&vote); err != nil {
		return nil, err
	}
	if vote.Time.IsZero() {
		vote.Time = metav1.NewTime(time.Now().Truncate(time.Second))
	}
	return patchStatus(ctx, c, namespace, name, "recording the decision on", NotAllowedError{Promotion: name, User: vote.User},
		func(pr *tugboatv1alpha1.Promotion) (bool, error) {
			p, err := GetPipeline(ctx, c, pr.Namespace, pr.Spec.Pipeline)
			if errors.Is(err, ErrNotFound) {
				p = nil // the controller aborts the Promotion
			} else if err != nil {
				return false, err
			}
			if vote.Source != tugboatv1alpha1.ApprovalSourceKubernetes && !MayApprove(p, pr.Spec.To, vote.Source, vote.User) {
				return false, &NotAllowedError{Promotion: name, User: vote.User,
					Detail: fmt.Sprintf("%s identity %s is not an approver of %s (gates.approvers of pipeline %s)", vote.Source, vote.User, pr.Spec.To, pr.Spec.Pipeline)}
			}
			if prev := voteOf(p, pr, vote); prev != nil {
				if prev.Decision == vote.Decision {
					return false, nil // asked twice, maybe through another identity: the first vote stands
				}
				return false, &PhaseError{Promotion: name, Phase: pr.Status.Phase,
					Detail: fmt.Sprintf("was already %s by %s: a decision cannot be changed", pastTense(prev.Decision), PersonOf(p, pr.Spec.To, *prev).describe(*prev))}
			}
			if a := pr.Status.Approval; a != nil {
				return false, &PhaseError{Promotion: name, Phase: pr.Status.Phase, Detail: "was already " + describe(a)}
			}
			if !waitsForApproval(p, pr) {
				return false, &PhaseError{Promotion: name, Phase: pr.Status.Phase}
			}
			if vote.Decision == tugboatv1alpha1.DecisionApprove && IsRequester(p, pr, vote) {
				return false, &NotAllowedError{Promotion: name, User: vote.User,
					Detail: PersonOf(p, pr.Spec.To, vote).describe(vote) + " requested this promotion: another person must approve it"}
			}
			if len(pr.Status.Approvals) >= MaxVotes {
				return false, &PhaseError{Promotion: name, Phase: pr.Status.Phase, Detail: fmt.Sprintf("already records %d decisions, the most it holds", MaxVotes)}
			}
			pr.Status.Approvals = append(slices.Clone(pr.Status.Approvals), vote)
			return true, nil
		})
}

// validateVote checks a vote's fields against the CRD's rules, naming them
// as the ApprovalVote JSON does.
func validateVote(v *tugboatv1alpha1.ApprovalVote) error {
	switch {
	case v.Decision != tugboatv1alpha1.DecisionApprove && v.Decision != tugboatv1alpha1.DecisionReject:
		return invalid("decision", "must be %s or %s, got %q", tugboatv1alpha1.DecisionApprove, tugboatv1alpha1.DecisionReject, clip.String(string(v.Decision), 32))
	case v.Source != tugboatv1alpha1.ApprovalSourceKubernetes && v.Source != tugboatv1alpha1.ApprovalSourceSlack && v.Source != tugboatv1alpha1.ApprovalSourceCI:
		return invalid("source", "must be %s, %s or %s, got %q", tugboatv1alpha1.ApprovalSourceKubernetes, tugboatv1alpha1.ApprovalSourceSlack, tugboatv1alpha1.ApprovalSourceCI, clip.String(string(v.Source), 32))
	case v.User == "":
		return invalid("user", "required: the authenticated identity")
	case len(v.User) > MaxIdentityLength:
		return invalid("user", "at most %d characters, got %d", MaxIdentityLength, len(v.User))
	case len(v.DisplayName) > MaxIdentityLength:
		return invalid("displayName", "at most %d characters, got %d", MaxIdentityLength, len(v.DisplayName))
	case len(v.Message) > MaxMessageLength:
		return invalid("message", "at most %d characters, got %d", MaxMessageLength, len(v.Message))
	}
	return nil
}

// MayApprove reports whether user, authenticated by source, may decide on
// promotions into environment env of p: a Slack user ID listed in the
// environment's gates.approvers.slackUsers, or a CI approval credential
// listed in gates.approvers.ciCredentials. It is false for an unknown
// environment, one that does not require approval, and for every
// Kubernetes user: the API server decides those (the RBAC verb "approve"
// on environments, checked by the ValidatingAdmissionPolicy
// tugboat-approvals), not the hub.
func MayApprove(p *tugboatv1alpha1.Pipeline, env string, source tugboatv1alpha1.ApprovalSource, user string) bool {
	if p == nil || user == "" {
		return false
	}
	idx := pipeline.EnvironmentIndex(p, env)
	if idx < 0 {
		return false
	}
	g := p.Spec.Environments[idx].Gates
	if !g.RequireApproval || g.Approvers == nil {
		return false
	}
	switch source {
	case tugboatv1alpha1.ApprovalSourceSlack:
		return slices.Contains(g.Approvers.SlackUsers, user)
	case tugboatv1alpha1.ApprovalSourceCI:
		return slices.Contains(g.Approvers.CICredentials, user)
	}
	return false
}

// voteOf returns the first vote on pr of the person who cast v (PersonOf),
// through whichever identity, leaving out unverified votes (isUnverified)
// and votes cast before the approval was asked again (superseded).
func voteOf(p *tugboatv1alpha1.Pipeline, pr *tugboatv1alpha1.Promotion, v tugboatv1alpha1.ApprovalVote) *tugboatv1alpha1.ApprovalVote {
	who := PersonOf(p, pr.Spec.To, v)
	for i := range pr.Status.Approvals {
		if prev := &pr.Status.Approvals[i]; !isUnverified(pr, i) && !superseded(pr, i) && PersonOf(p, pr.Spec.To, *prev) == who {
			return prev
		}
	}
	return nil
}

// waitsForApproval reports whether pr, of Pipeline p (nil when gone), can
// take an approval decision now.
func waitsForApproval(p *tugboatv1alpha1.Pipeline, pr *tugboatv1alpha1.Promotion) bool {
	switch pr.Status.Phase {
	case "", tugboatv1alpha1.PromotionPending, tugboatv1alpha1.PromotionWaitingApproval:
	default:
		return false
	}
	if p == nil {
		return false
	}
	idx := pipeline.EnvironmentIndex(p, pr.Spec.To)
	return idx >= 0 && (pr.Status.Phase == tugboatv1alpha1.PromotionWaitingApproval || p.Spec.Environments[idx].Gates.RequireApproval)
}

func describe(a *tugboatv1alpha1.Approval) string {
	if a.ApprovedBy != "" {
		return "approved by " + a.ApprovedBy
	}
	return "rejected by " + a.RejectedBy
}

func pastTense(d tugboatv1alpha1.Decision) string {
	if d == tugboatv1alpha1.DecisionReject {
		return "rejected"
	}
	return "approved"
}

// describeVoter names a voter for people: the user, with the Slack display
// name where there is one.
// A Kubernetes vote's displayName is the voter's own text, not something
// the API server authenticated: it is never shown.
func describeVoter(v tugboatv1alpha1.ApprovalVote) string {
	if v.Source != tugboatv1alpha1.ApprovalSourceKubernetes && v.DisplayName != "" && v.DisplayName != v.User {
		return v.DisplayName + " (" + v.User + ")"
	}
	return v.User
}
