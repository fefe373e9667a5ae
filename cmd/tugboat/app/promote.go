//go:build !agentonly

package app

import (
	"fmt"

	"github.com/Masterminds/semver/v3"
	"github.com/spf13/cobra"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

func newPromoteCommand() *cobra.Command {
	var (
		hf                  hubFlags
		to, version, resume string
		out                 outputFlag
	)
	cmd := &cobra.Command{
		Use:   "promote <pipeline> (--to <environment> --version <version> | --resume <environment>)",
		Short: "Promote a version into an environment by hand, or lift a rollback hold",
		Long: `promote asks the hub for a Promotion of --version into --to, recorded as
requested by you (requestedBy: user; requester: the user name the hub's API
server authenticated, from a SelfSubjectReview; the policy tugboat-approvals
refuses any other). You cannot approve it yourself. It goes through the environment's gates (an approval, if required) and
strategy like an automatic one. Asking again while that Promotion runs is
harmless; once it has finished (e.g. Failed), asking again retries it as a new
Promotion named with a suffix -r2, -r3, ...

promote --resume lifts the hold a rollback put on automatic promotion into an
environment: tugboat never undoes a deliberate rollback until told to.`,
		Example: `  tugboat promote web -n fleet --to production --version 1.4.0
  tugboat promote web -n fleet --resume production`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePipelineNames(&hf),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			switch {
			case resume != "" && (to != "" || version != ""):
				return usageErrorf("--resume cannot be combined with --to or --version")
			case resume == "" && (to == "" || version == ""):
				return usageErrorf("give --to and --version to promote, or --resume to lift a hold")
			}
			s, err := hf.connect()
			if err != nil {
				return err
			}
			ctx, w := cmd.Context(), cmd.OutOrStdout()
			p, err := request.GetPipeline(ctx, s.client, s.namespace, args[0])
			if err != nil {
				return err
			}
			if resume != "" {
				return resumeEnvironment(ctx, w, s, p, resume, out)
			}
			if _, err := semver.StrictNewVersion(version); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %q is not a semantic version; Helm chart versions normally are.\n", version)
			}
			user, err := s.whoAmI(ctx)
			if err != nil {
				return err
			}
			pr, created, err := request.Ensure(ctx, s.client, p, to, version, tugboatv1alpha1.RequestedByUser, user)
			if err != nil {
				return err
			}
			view := promotionViewOf(pr)
			view.Created = created
			if done, err := out.structured(w, view); done {
				return err
			}
			if created {
				fmt.Fprintf(w, "Created promotion %s: %s into %s of pipeline %s/%s.\n", pr.Name, version, to, p.Namespace, p.Name)
			} else {
				fmt.Fprintf(w, "Promotion %s of %s into %s already exists (%s).\n", pr.Name, version, to, phaseOf(pr))
			}
			if idx := pipeline.EnvironmentIndex(p, to); idx >= 0 && p.Spec.Environments[idx].Gates.RequireApproval && pr.Status.Approval == nil && !pr.Status.Phase.Terminal() {
				by := ""
				if pr.Spec.RequestedBy == tugboatv1alpha1.RequestedByUser && pr.Spec.Requester == user {
					by = " by someone other than you"
				}
				fmt.Fprintf(w, "%s requires approval%s: tugboat approve %s -n %s\n", to, by, pr.Name, p.Namespace)
			}
			return nil
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	cmd.Flags().StringVar(&to, "to", "", "environment to promote into")
	cmd.Flags().StringVar(&version, "version", "", "chart version to promote")
	cmd.Flags().StringVar(&resume, "resume", "", "environment whose rollback hold to lift")
	_ = cmd.RegisterFlagCompletionFunc("to", completeEnvironments(&hf))
	_ = cmd.RegisterFlagCompletionFunc("resume", completeEnvironments(&hf))
	return cmd
}

func phaseOf(pr *tugboatv1alpha1.Promotion) string {
	if pr.Status.Phase == "" {
		return string(tugboatv1alpha1.PromotionPending)
	}
	return string(pr.Status.Phase)
}
