package request

import (
	"slices"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// Person is who cast a vote: a Kubernetes user, or a Slack user or CI
// credential that gates.approvers.people does not declare to be one (a
// person of its own).
type Person struct {
	// Source and User name the person: the Kubernetes user (Source
	// Kubernetes) when the vote's identity is one or is declared to be
	// one, else the vote's own identity.
	Source tugboatv1alpha1.ApprovalSource
	User   string
}

// PersonOf says who cast v on a promotion into environment env of p (nil
// when gone): a Kubernetes vote is its user's; a Slack user or CI
// credential listed in the environment's gates.approvers.people is that
// Kubernetes user; any other identity is a person of its own.
func PersonOf(p *tugboatv1alpha1.Pipeline, env string, v tugboatv1alpha1.ApprovalVote) Person {
	if v.Source != tugboatv1alpha1.ApprovalSourceKubernetes && p != nil {
		if idx := pipeline.EnvironmentIndex(p, env); idx >= 0 {
			if a := p.Spec.Environments[idx].Gates.Approvers; a != nil {
				for _, who := range a.People {
					if v.Source == tugboatv1alpha1.ApprovalSourceSlack && slices.Contains(who.SlackUsers, v.User) ||
						v.Source == tugboatv1alpha1.ApprovalSourceCI && slices.Contains(who.CICredentials, v.User) {
						return Person{Source: tugboatv1alpha1.ApprovalSourceKubernetes, User: who.User}
					}
				}
			}
		}
	}
	return Person{Source: v.Source, User: v.User}
}

// mappedFrom reports whether the person is a Kubernetes user that v, a
// Slack or CI vote, was declared to be.
func (w Person) mappedFrom(v tugboatv1alpha1.ApprovalVote) bool {
	return w.Source != v.Source || w.User != v.User
}

// describe names the person who cast v, for people: the voter
// (describeVoter), or for a Slack or CI identity declared to be a
// Kubernetes user, that user and the identity, e.g.
// "alice (Slack U024BE7LH)".
func (w Person) describe(v tugboatv1alpha1.ApprovalVote) string {
	if !w.mappedFrom(v) {
		return describeVoter(v)
	}
	return w.User + " (" + string(v.Source) + " " + v.User + ")"
}

// IsRequester reports whether v, on pr of Pipeline p (nil when gone), is
// by the person who requested pr by hand (requestedBy user, requester the
// Kubernetes user name that the policy tugboat-approvals made sure of):
// their own Kubernetes vote, or a Slack or CI identity that
// gates.approvers.people declares to be them. Their approval never counts.
func IsRequester(p *tugboatv1alpha1.Pipeline, pr *tugboatv1alpha1.Promotion, v tugboatv1alpha1.ApprovalVote) bool {
	if pr.Spec.RequestedBy != tugboatv1alpha1.RequestedByUser || pr.Spec.Requester == "" {
		return false
	}
	w := PersonOf(p, pr.Spec.To, v)
	return w.Source == tugboatv1alpha1.ApprovalSourceKubernetes && w.User == pr.Spec.Requester
}
