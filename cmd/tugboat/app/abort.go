//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// promotionView is what the promotion verbs (promote, approve, reject,
// abort) print with -o json|yaml: the Promotion they acted on.
type promotionView struct {
	Namespace    string                         `json:"namespace"`
	Name         string                         `json:"name"`
	Pipeline     string                         `json:"pipeline"`
	From         string                         `json:"from,omitempty"`
	To           string                         `json:"to"`
	Version      string                         `json:"version"`
	Phase        string                         `json:"phase"`
	Message      string                         `json:"message,omitempty"`
	RequestedBy  string                         `json:"requestedBy,omitempty"`
	Requester    string                         `json:"requester,omitempty"`
	Created      bool                           `json:"created,omitempty"`
	Approvals    []tugboatv1alpha1.ApprovalVote `json:"approvals,omitempty"`
	Approval     *tugboatv1alpha1.Approval      `json:"approval,omitempty"`
	AbortRequest *tugboatv1alpha1.AbortRequest  `json:"abortRequest,omitempty"`
	// RolloutRequest is the last pause or resume asked (tugboat rollout).
	RolloutRequest *tugboatv1alpha1.RolloutRequest `json:"rolloutRequest,omitempty"`
}

func promotionViewOf(pr *tugboatv1alpha1.Promotion) promotionView {
	v := promotionView{
		Namespace: pr.Namespace, Name: pr.Name, Pipeline: pr.Spec.Pipeline, From: pr.Spec.From, To: pr.Spec.To, Version: pr.Spec.Version,
		Phase: phaseOf(pr), RequestedBy: string(pr.Spec.RequestedBy), Requester: pr.Spec.Requester,
		Approvals: pr.Status.Approvals, Approval: pr.Status.Approval, AbortRequest: pr.Status.AbortRequest,
		RolloutRequest: pr.Status.RolloutRequest,
	}
	if c := apimeta.FindStatusCondition(pr.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil {
		v.Message = c.Message
	}
	return v
}

// actOnPromotion is the body of the verbs that change one Promotion as the
// user (approve, reject, abort): it checks -o, opens a session with the hub,
// asks the hub's API server who the user is, lets act change the Promotion
// named name as that user, and prints the result: the Promotion with
// -o json|yaml, else what say writes.
func actOnPromotion(cmd *cobra.Command, hf *hubFlags, out outputFlag, name string,
	act func(ctx context.Context, s *hubSession, user string) (*tugboatv1alpha1.Promotion, error),
	say func(ctx context.Context, w io.Writer, s *hubSession, pr *tugboatv1alpha1.Promotion, user string),
) error {
	if err := out.validate(); err != nil {
		return err
	}
	ctx := cmd.Context()
	s, err := hf.connect()
	if err != nil {
		return err
	}
	user, err := s.whoAmI(ctx)
	if err != nil {
		return err
	}
	pr, err := act(ctx, s, user)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if done, err := out.structured(w, promotionViewOf(pr)); done {
		return err
	}
	say(ctx, w, s, pr, user)
	return nil
}

func newAbortCommand() *cobra.Command {
	return abortCommand("abort <promotion>", `  tugboat abort web-production-1.4.0 -n fleet --message "wrong build"`)
}

// abortCommand is `tugboat abort`, and `tugboat rollout abort` (the same
// request under another name).
func abortCommand(use, example string) *cobra.Command {
	var (
		hf      hubFlags
		out     outputFlag
		message string
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: "Stop a Promotion that has not finished",
		Long: `abort asks the hub to stop a Promotion that has not finished (Pending,
WaitingApproval, Running or Verifying). It records the request in the
Promotion's status.abortRequest under the user name the hub's API server
authenticated (a SelfSubjectReview; never the kubeconfig's user name or $USER);
the hub then moves the Promotion to Aborted, with "aborted by <you>: <message>"
in its Ready condition, and notifies as for every abort (PromotionAborted).
What the strategy already did (a pull request opened, an upgrade started on a
spoke) is not undone.

The API server checks the request (the ValidatingAdmissionPolicy
tugboat-approvals): RBAC must allow you the verb "abort" on
environments.tugboat.dev named <pipeline>/<environment> or <pipeline>/*. A
finished Promotion cannot be aborted (exit code 5). Asking again changes
nothing. See docs/approvals.md.`,
		Example:           example,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePromotionNames(&hf, unfinished),
		RunE: func(cmd *cobra.Command, args []string) error {
			return actOnPromotion(cmd, &hf, out, args[0],
				func(ctx context.Context, s *hubSession, user string) (*tugboatv1alpha1.Promotion, error) {
					return request.Abort(ctx, s.client, s.namespace, args[0], tugboatv1alpha1.AbortRequest{User: user, Message: message})
				},
				func(_ context.Context, w io.Writer, _ *hubSession, pr *tugboatv1alpha1.Promotion, _ string) {
					fmt.Fprintf(w, "Asked the hub to abort promotion %s (%s into %s), as %s.\n", pr.Name, pr.Spec.Version, pr.Spec.To, pr.Status.AbortRequest.User)
				})
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	cmd.Flags().StringVarP(&message, "message", "m", "", "why, recorded with the request and in the Promotion's Ready message")
	return cmd
}
