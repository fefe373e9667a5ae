//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// newRolloutCommand is `tugboat rollout pause|resume|abort`: a person
// steering a Promotion that rolls out in waves.
func newRolloutCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Pause, resume or abort a Promotion's rollout in waves",
		Long: `rollout steers a Promotion whose environment rolls out in waves
(spec.environments[].rollout; docs/pipelines.md#rollouts-in-waves-rollout). Each verb writes a
request in the Promotion's status under the user name the hub's API server
authenticated (a SelfSubjectReview; never the kubeconfig's user name or $USER),
which the ValidatingAdmissionPolicy tugboat-approvals checks: RBAC must allow you
the verb pause, resume or abort on environments.tugboat.dev named
<pipeline>/<environment> or <pipeline>/*.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("name what to do: tugboat rollout pause|resume|abort <promotion>")
		},
	}
	cmd.AddCommand(
		newRolloutSteerCommand(tugboatv1alpha1.RolloutActionPause),
		newRolloutSteerCommand(tugboatv1alpha1.RolloutActionResume),
		abortCommand("abort <promotion>", `  tugboat rollout abort web-production-1.4.0 -n fleet --message "wrong build"`),
	)
	return cmd
}

// newRolloutSteerCommand is `tugboat rollout pause` or `resume`.
func newRolloutSteerCommand(action tugboatv1alpha1.RolloutAction) *cobra.Command {
	var (
		hf      hubFlags
		out     outputFlag
		message string
	)
	verb := strings.ToLower(string(action))
	short, long := "Pause a rollout at its next wave boundary", `pause stops a Promotion's rollout at its next wave boundary: no target not
acted on yet is acted on, while the targets already acted on are still verified
(and still count against the failure budget). The Promotion moves to Paused, its
Ready condition saying "paused by <you>" (reason PausedByUser), with an Event
RolloutPaused and a notice through every notifier. Resume it with tugboat
rollout resume, or stop it with tugboat rollout abort.`
	if action == tugboatv1alpha1.RolloutActionResume {
		short, long = "Resume a paused rollout", `resume lets a paused rollout go on, whether a person paused it or its failure
budget did. A resume accepts the failures the rollout has when it is resumed,
without refilling the budget: as soon as more targets fail than the budget or the
accepted failures allow, whichever is more, the rollout stops again.`
	}
	cmd := &cobra.Command{
		Use:   verb + " <promotion>",
		Short: short,
		Long: long + `

The API server checks the request (the policy tugboat-approvals): RBAC must allow
you the verb ` + verb + ` on environments.tugboat.dev named <pipeline>/<environment>
or <pipeline>/* (exit code 4). A Promotion without a rollout in progress, a pause
of a paused rollout and a resume of one that is not paused exit with 5. Asking
again before the hub acted changes nothing.`,
		Example:           fmt.Sprintf(`  tugboat rollout %s web-production-1.4.0 -n fleet -m "checking the dashboards"`, verb),
		Args:              exactlyOnePromotion(verb),
		ValidArgsFunction: completePromotionNames(&hf, rollingOut),
		RunE: func(cmd *cobra.Command, args []string) error {
			return actOnPromotion(cmd, &hf, out, args[0],
				func(ctx context.Context, s *hubSession, user string) (*tugboatv1alpha1.Promotion, error) {
					return request.SteerRollout(ctx, s.client, s.namespace, args[0], tugboatv1alpha1.RolloutRequest{Action: action, User: user, Message: message})
				},
				func(_ context.Context, w io.Writer, _ *hubSession, pr *tugboatv1alpha1.Promotion, user string) {
					fmt.Fprintf(w, "Asked the hub to %s the rollout of promotion %s (%s into %s), as %s.\n", verb, pr.Name, pr.Spec.Version, pr.Spec.To, user)
				})
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	cmd.Flags().StringVarP(&message, "message", "m", "", "why, recorded with the request and in the Promotion's Ready message")
	return cmd
}

// exactlyOnePromotion accepts one argument, the Promotion's name, and says
// so otherwise (ExitUsage).
func exactlyOnePromotion(verb string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return usageErrorf("name the promotion whose rollout to %s: tugboat rollout %s <promotion>", verb, verb)
		case len(args) > 1:
			return usageErrorf("name one promotion, got %d: %s", len(args), strings.Join(args, " "))
		case strings.TrimSpace(args[0]) == "":
			return usageErrorf("the promotion's name is empty")
		}
		return nil
	}
}

// rollingOut keeps Promotions whose rollout is in progress (pause, resume).
func rollingOut(pr *tugboatv1alpha1.Promotion) bool {
	return pr.Status.Phase.Started() && pr.Status.Rollout != nil && pr.Status.Rollout.Resolved != nil
}
