package request

import (
	"fmt"
	"strings"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// Tally is where a Promotion's approval gate stands, from its votes.
type Tally struct {
	// Required is how many distinct people must approve (gates.approvals,
	// default 1).
	Required int
	// Approvals are the counted approvals, one per person, in the order
	// they were made.
	Approvals []tugboatv1alpha1.ApprovalVote
	// Rejection is the first counted rejection, if any: it decides.
	Rejection *tugboatv1alpha1.ApprovalVote
	// Ignored explains each vote that does not count.
	Ignored []string

	// approvers name the person of each of Approvals; rejecter the
	// Rejection's.
	approvers []string
	rejecter  string
}

// Count tallies the votes in pr's status.approvals against the gate of its
// destination environment in p. It counts people, not identities: a
// Slack user or CI credential that gates.approvers.people declares to be a
// Kubernetes user is that user (PersonOf), and a person's first counted
// vote stands, whichever identities they vote through. A vote does not
// count when it is the requester's approval of a manual promotion, through
// any identity (IsRequester), when its Slack or CI identity is no longer
// listed in gates.approvers (MayApprove), or when it is a Kubernetes vote
// among the first status.unverifiedVotes (written while the API server did
// not enforce the policy tugboat-approvals, which the Promotion controller
// records; the user may vote again). Other Kubernetes votes were checked
// by the API server when written. Votes cast before the preview changed
// since the approval, where the gate asks for approval again
// (gates.reapproveOnChange), do not count either (superseded).
func Count(p *tugboatv1alpha1.Pipeline, pr *tugboatv1alpha1.Promotion) Tally {
	t := Tally{Required: 1}
	if idx := pipeline.EnvironmentIndex(p, pr.Spec.To); idx >= 0 {
		if n := p.Spec.Environments[idx].Gates.Approvals; n != nil && *n > 1 {
			t.Required = int(*n)
		}
	}
	seen := map[string]bool{}       // identities (source and user): the first vote stands
	unverified := map[string]bool{} // identities of unverified votes, noted once
	voted := map[Person]string{}    // people counted → how they voted, described
	for i, v := range pr.Status.Approvals {
		key := string(v.Source) + "\x00" + v.User
		if superseded(pr, i) {
			continue // cast before the preview changed: asked again (reapproveOnChange)
		}
		if isUnverified(pr, i) {
			// Not the user's vote for all anyone knows: it neither counts
			// nor stands in the way of the user's own.
			if !unverified[key] {
				unverified[key] = true
				t.Ignored = append(t.Ignored, v.User+" (Kubernetes) was written while the API server did not enforce the policy "+PolicyName)
			}
			continue
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		who := PersonOf(p, pr.Spec.To, v)
		name := who.describe(v)
		switch {
		case v.Source != tugboatv1alpha1.ApprovalSourceKubernetes && !MayApprove(p, pr.Spec.To, v.Source, v.User):
			t.Ignored = append(t.Ignored, fmt.Sprintf("%s (%s) is not an approver of %s", describeVoter(v), v.Source, pr.Spec.To))
			continue
		case v.Decision == tugboatv1alpha1.DecisionApprove && IsRequester(p, pr, v):
			t.Ignored = append(t.Ignored, name+" requested it, so their approval does not count")
			continue
		case voted[who] != "":
			t.Ignored = append(t.Ignored, fmt.Sprintf("%s already voted as %s, and one person counts once", name, voted[who]))
			continue
		case v.Decision == tugboatv1alpha1.DecisionReject:
			if t.Rejection == nil {
				t.Rejection, t.rejecter = v.DeepCopy(), name
			}
		case v.Decision == tugboatv1alpha1.DecisionApprove:
			t.Approvals = append(t.Approvals, v)
			t.approvers = append(t.approvers, name)
		}
		voted[who] = name
	}
	return t
}

// Approved reports whether enough distinct approvals were counted and
// nobody rejected.
func (t Tally) Approved() bool { return t.Rejection == nil && len(t.Approvals) >= t.Required }

// ApprovedBy lists the counted approvers, comma-separated, as
// status.approval.approvedBy records them.
func (t Tally) ApprovedBy() string {
	return strings.Join(t.approvers, ", ")
}

// RejectedBy names who rejected (the counted Rejection), as
// status.approval.rejectedBy records it; "" when nobody did.
func (t Tally) RejectedBy() string { return t.rejecter }

// Summary says where the gate stands, e.g. "1 of 2 approvals (alice)".
func (t Tally) Summary() string {
	s := fmt.Sprintf("%d of %d approvals", len(t.Approvals), t.Required)
	if t.Required == 1 {
		s = fmt.Sprintf("%d of 1 approval", len(t.Approvals))
	}
	if len(t.Approvals) > 0 {
		s += " (" + t.ApprovedBy() + ")"
	}
	if len(t.Ignored) > 0 {
		s += "; not counted: " + strings.Join(t.Ignored, "; ")
	}
	return s
}

// Missing says what the gate still waits for, e.g. "1 more approval from
// someone other than alice"; "" once approved.
func (t Tally) Missing() string {
	n := t.Required - len(t.Approvals)
	if n <= 0 {
		return ""
	}
	s := fmt.Sprintf("%d more approval", n)
	if n > 1 {
		s += "s"
	}
	if len(t.Approvals) > 0 {
		s += " from someone other than " + t.ApprovedBy()
	}
	return s
}

// isUnverified reports whether pr's i-th vote is a Kubernetes vote among
// the first status.unverifiedVotes: written while the API server did not
// enforce the policy tugboat-approvals, so nothing checked who wrote it.
// superseded reports whether the i-th vote of pr was cast before its
// preview changed since the approval in an environment whose gate asks for
// approval again (gates.reapproveOnChange; status.preview.approvalsReset):
// it no longer counts, and whoever cast it may vote again.
func superseded(pr *tugboatv1alpha1.Promotion, i int) bool {
	return pr.Status.Preview != nil && i < int(pr.Status.Preview.ApprovalsReset)
}

func isUnverified(pr *tugboatv1alpha1.Promotion, i int) bool {
	return pr.Status.Approvals[i].Source == tugboatv1alpha1.ApprovalSourceKubernetes && i < int(pr.Status.UnverifiedVotes)
}
