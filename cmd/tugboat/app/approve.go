//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

func newApproveCommand() *cobra.Command {
	return newDecisionCommand(true)
}

func newRejectCommand() *cobra.Command {
	return newDecisionCommand(false)
}

// newDecisionCommand returns `tugboat approve` or `tugboat reject`.
func newDecisionCommand(approve bool) *cobra.Command {
	var (
		hf      hubFlags
		out     outputFlag
		message string
	)
	verb, title, done, effect := "reject", "Reject", "rejected", "one rejection aborts it"
	decision := tugboatv1alpha1.DecisionReject
	if approve {
		verb, title, done, effect = "approve", "Approve", "approved", "once enough people approved (gates.approvals), it starts"
		decision = tugboatv1alpha1.DecisionApprove
	}
	cmd := &cobra.Command{
		Use:   verb + " <promotion>",
		Short: title + " a Promotion waiting for approval",
		Long: fmt.Sprintf(`%s records your decision in the Promotion's status.approvals, under the
user name the hub's API server authenticated (a SelfSubjectReview; never the
kubeconfig's user name or $USER). The hub counts the decisions: %s.

The API server checks the decision (the ValidatingAdmissionPolicy
tugboat-approvals): RBAC must allow you the verb "approve" on
environments.tugboat.dev named <pipeline>/<environment> or <pipeline>/*, and
you cannot approve a promotion you requested yourself. Only a Promotion
waiting for approval (WaitingApproval, or Pending into an environment whose
gate requires approval) takes a decision; the same decision twice is
harmless, and a decision cannot be changed. See docs/approvals.md.`, verb, effect),
		Example:           fmt.Sprintf("  tugboat %s web-production-1.4.0 -n fleet --message \"checked the canary\"", verb),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePromotionNames(&hf, awaitingDecision),
		RunE: func(cmd *cobra.Command, args []string) error {
			return actOnPromotion(cmd, &hf, out, args[0],
				func(ctx context.Context, s *hubSession, user string) (*tugboatv1alpha1.Promotion, error) {
					vote := tugboatv1alpha1.ApprovalVote{Decision: decision, User: user, Source: tugboatv1alpha1.ApprovalSourceKubernetes, Message: message}
					return request.Decide(ctx, s.client, s.namespace, args[0], vote)
				},
				func(ctx context.Context, w io.Writer, s *hubSession, pr *tugboatv1alpha1.Promotion, user string) {
					fmt.Fprintf(w, "Promotion %s (%s into %s) %s by %s.\n", pr.Name, pr.Spec.Version, pr.Spec.To, done, user)
					if !approve {
						return
					}
					if p, err := request.GetPipeline(ctx, s.client, pr.Namespace, pr.Spec.Pipeline); err == nil {
						tally := request.Count(p, pr)
						if missing := tally.Missing(); missing != "" {
							fmt.Fprintf(w, "It has %s; waiting for %s.\n", tally.Summary(), missing)
						}
					}
				})
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	cmd.Flags().StringVarP(&message, "message", "m", "", "a comment recorded with the decision")
	return cmd
}
