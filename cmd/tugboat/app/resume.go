//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// resumeView is what `tugboat resume` prints with -o json|yaml.
type resumeView struct {
	Namespace   string `json:"namespace"`
	Pipeline    string `json:"pipeline"`
	Environment string `json:"environment"`
	WasHeld     bool   `json:"wasHeld"`
}

func newResumeCommand() *cobra.Command {
	var (
		hf  hubFlags
		out outputFlag
		env string
	)
	cmd := &cobra.Command{
		Use:   "resume <pipeline> --env <environment>",
		Short: "Lift the hold a rollback put on automatic promotion into an environment",
		Long: `resume lifts the hold a rollback put on automatic promotion into --env (tugboat
never undoes a deliberate rollback until told to): rollbacks seen until now no
longer hold; a later one holds again. The same as promote --resume.`,
		Example:           `  tugboat resume web --env production -n fleet`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePipelineNames(&hf),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if env == "" {
				return usageErrorf("name the environment to resume: --env <environment>")
			}
			s, err := hf.connect()
			if err != nil {
				return err
			}
			p, err := request.GetPipeline(cmd.Context(), s.client, s.namespace, args[0])
			if err != nil {
				return err
			}
			return resumeEnvironment(cmd.Context(), cmd.OutOrStdout(), s, p, env, out)
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	cmd.Flags().StringVar(&env, "env", "", "the environment whose rollback hold to lift")
	_ = cmd.RegisterFlagCompletionFunc("env", completeEnvironments(&hf))
	return cmd
}

// resumeEnvironment lifts the hold on env of p (request.Resume) and says
// whether there was one.
func resumeEnvironment(ctx context.Context, w io.Writer, s *hubSession, p *tugboatv1alpha1.Pipeline, env string, out outputFlag) error {
	wasHeld := slices.ContainsFunc(p.Status.HeldEnvironments, func(h tugboatv1alpha1.HeldEnvironment) bool { return h.Name == env })
	if err := request.Resume(ctx, s.client, p, env, time.Now()); err != nil {
		return err
	}
	if done, err := out.structured(w, resumeView{Namespace: p.Namespace, Pipeline: p.Name, Environment: env, WasHeld: wasHeld}); done {
		return err
	}
	if wasHeld {
		fmt.Fprintf(w, "Resumed automatic promotion into %s of pipeline %s/%s.\n", env, p.Namespace, p.Name)
	} else {
		fmt.Fprintf(w, "Environment %s of pipeline %s/%s was not held; rollbacks seen until now will not hold it.\n", env, p.Namespace, p.Name)
	}
	return nil
}
