package request

import (
	"fmt"
	"strings"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// Tally is where a Promotion's approval gate stands, from its votes.
type Tally struct {
	// Required is how many distinct approvers the destination's gate needs
	// (gates.approvals, default 1).
	Required int
	// Approvals are the counted approvals, one per distinct identity, in
	// the order they were made.
	Approvals []tugboatv1alpha1.ApprovalVote
	// Rejection is the first counted rejection, if any: it decides.
	Rejection *tugboatv1alpha1.ApprovalVote
	// Ignored explains each vote that does not count.
	Ignored []string
}

// Count tallies the votes in pr's status.approvals against the gate of its
// destination environment in p. A vote counts once per identity (source
// and user; the first one stands). A vote does not count when it is the
// requester's own approval of a manual promotion, or when its Slack or CI
// identity is no longer listed in gates.approvers (MayApprove). Kubernetes
// votes were checked by the API server when written.
func Count(p *tugboatv1alpha1.Pipeline, pr *tugboatv1alpha1.Promotion) Tally {
	t := Tally{Required: 1}
	if idx := pipeline.EnvironmentIndex(p, pr.Spec.To); idx >= 0 {
		if n := p.Spec.Environments[idx].Gates.Approvals; n != nil && *n > 1 {
			t.Required = int(*n)
		}
	}
	seen := map[string]bool{}
	for _, v := range pr.Status.Approvals {
		key := string(v.Source) + "\x00" + v.User
		switch {
		case seen[key]:
			continue
		case v.Source != tugboatv1alpha1.ApprovalSourceKubernetes && !MayApprove(p, pr.Spec.To, v.Source, v.User):
			t.Ignored = append(t.Ignored, fmt.Sprintf("%s (%s) is not an approver of %s", describeVoter(v), v.Source, pr.Spec.To))
		case v.Decision == tugboatv1alpha1.DecisionApprove && IsRequester(pr, v):
			t.Ignored = append(t.Ignored, v.User+" requested it, so their approval does not count")
		case v.Decision == tugboatv1alpha1.DecisionReject:
			if t.Rejection == nil {
				t.Rejection = v.DeepCopy()
			}
		case v.Decision == tugboatv1alpha1.DecisionApprove:
			t.Approvals = append(t.Approvals, v)
		}
		seen[key] = true
	}
	return t
}

// Approved reports whether enough distinct approvals were counted and
// nobody rejected.
func (t Tally) Approved() bool { return t.Rejection == nil && len(t.Approvals) >= t.Required }

// ApprovedBy lists the counted approvers, comma-separated, as
// status.approval.approvedBy records them.
func (t Tally) ApprovedBy() string {
	names := make([]string, len(t.Approvals))
	for i, v := range t.Approvals {
		names[i] = describeVoter(v)
	}
	return strings.Join(names, ", ")
}

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
