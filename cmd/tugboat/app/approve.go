//go:build !agentonly

package app

import (
	"fmt"

	"github.com/spf13/cobra"

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
		message string
	)
	verb, title, done, effect := "reject", "Reject", "rejected", "it is aborted"
	if approve {
		verb, title, done, effect = "approve", "Approve", "approved", "it starts"
	}
	cmd := &cobra.Command{
		Use:   verb + " <promotion>",
		Short: title + " a Promotion waiting for approval",
		Long: fmt.Sprintf(`%s records your decision (your kubeconfig user name, else $USER) in the
Promotion's status.approval; the hub then sees it and %s. Only a Promotion
waiting for approval (WaitingApproval, or Pending into an environment whose
gate requires approval) takes a decision; the first decision stands.`, verb, effect),
		Example: fmt.Sprintf("  tugboat %s web-production-1.4.0 -n fleet --message \"checked the canary\"", verb),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := hf.connect()
			if err != nil {
				return err
			}
			if s.user == "" {
				return fmt.Errorf("cannot tell who you are: the kubeconfig context names no user and $USER is empty")
			}
			decide := request.Reject
			if approve {
				decide = request.Approve
			}
			pr, err := decide(cmd.Context(), s.client, s.namespace, args[0], s.user, message)
			if err != nil {
				return err
			}
			by := pr.Status.Approval.RejectedBy
			if pr.Status.Approval.ApprovedBy != "" {
				by = pr.Status.Approval.ApprovedBy
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Promotion %s (%s into %s) %s by %s.\n", pr.Name, pr.Spec.Version, pr.Spec.To, done, by)
			return nil
		},
	}
	hf.bind(cmd)
	cmd.Flags().StringVarP(&message, "message", "m", "", "a comment recorded with the decision")
	return cmd
}
