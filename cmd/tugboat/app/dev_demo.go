//go:build !agentonly

package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"tugboat.dev/tugboat/e2e/devenv"
)

func newDevDemoCommand() *cobra.Command {
	var (
		dir  string
		stay bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "A guided, non-interactive tour: promote, approve, fail, a failing test, roll back and hold, on local clusters",
		Long: `demo starts a hub and the spokes dev, staging and production on this machine
(production behind an approval gate) and walks through tugboat's loop, printing
each step, a live line whenever what it waits for changes, and a timeline at the
end with the time each step took:

  1. helm install demo 1.0.0 in dev (the real helm CLI);
  2. the hub promotes 1.0.0 to staging, then holds it at production's approval
     gate;
  3. it approves as the hub's authenticated kubeconfig user, the way
     ` + "`tugboat approve`" + ` does, and 1.0.0 reaches production;
  4. helm upgrade demo 1.1.0 in dev; 1.1.0 never becomes healthy in staging
     (its pods lack the toleration of staging's dedicated node), so its
     promotion fails and production keeps 1.0.0;
  5. helm upgrade demo 1.2.0 in dev; 1.2.0 runs healthy in staging, but its
     smoke test (staging's helmTest step) fails: the promotion fails with the
     test Pod's log, and 1.2.0 stops in staging;
  6. helm rollback in staging, which holds the environment.

Then it stops everything and removes its directory (a new temporary one unless
--dir), or with --stay keeps running for exploration until Ctrl-C. Ctrl-C at
any point stops and cleans up, piped or not. The first run builds the
control-plane binaries (several minutes); after that it takes about a minute.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx, out, stop := interruptible(cmd.Context(), cmd.OutOrStdout())
			defer stop()
			created := false
			if dir == "" {
				if dir, err = os.MkdirTemp("", "tugboat-demo-"); err != nil {
					return err
				}
				created = true
			}
			fmt.Fprintf(out, "tugboat dev demo (working directory %s; Ctrl-C stops and cleans up)\n", dir)
			demo, runErr := devenv.RunDemo(ctx, devenv.DemoOptions{
				Env:     devenv.Options{Dir: dir},
				Out:     out,
				Approve: demoApprove,
			})
			if len(demo.Steps) > 0 {
				demo.PrintTimeline(out)
			}
			if runErr == nil && stay && ctx.Err() == nil {
				printDemoExplore(out, demo.Env)
				<-ctx.Done()
			}
			interrupted := ctx.Err() != nil
			fmt.Fprintln(out, "\nstopping clusters and cleaning up")
			var cleanErr error
			if demo.Env != nil {
				cleanErr = demo.Env.Stop()
			} else {
				cleanErr = devenv.Down(dir, nil)
			}
			if created && cleanErr == nil {
				cleanErr = os.RemoveAll(dir)
			}
			if cleanErr != nil {
				cleanErr = fmt.Errorf("cleaning up (run `tugboat dev down --dir %s`): %w", dir, cleanErr)
			}
			fmt.Fprintln(out, "stopped")
			switch {
			case runErr != nil && interrupted:
				return errors.Join(errors.New("interrupted"), cleanErr)
			case runErr != nil:
				return errors.Join(runErr, cleanErr)
			}
			return cleanErr
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory for kubeconfigs, cluster data and logs (default: a new temporary directory, removed at the end)")
	cmd.Flags().BoolVar(&stay, "stay", false, "after the timeline, keep the environment running for exploration until Ctrl-C")
	return cmd
}

// demoApprove approves a Promotion through `tugboat approve` itself, with
// the hub's kubeconfig (whose context names the environment's namespace):
// the vote names the user the hub's API server authenticated.
func demoApprove(ctx context.Context, env *devenv.Env, promotion string) (string, error) {
	cmd := newApproveCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--kubeconfig", env.KubeconfigFor("hub"), promotion, "--message", "approved by tugboat dev demo"})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func printDemoExplore(out io.Writer, env *devenv.Env) {
	fmt.Fprintf(out, "\nThe environment stays up (--stay). Explore it:\n\n")
	fmt.Fprintf(out, "  export KUBECONFIG=%s\n", env.Kubeconfig)
	fmt.Fprintf(out, "  go run ./cmd/tugboat status %s\n", env.Pipeline)
	fmt.Fprintf(out, "  go run ./cmd/tugboat history staging/%s/%s\n", devenv.DemoNamespace, devenv.DemoChart)
	fmt.Fprintf(out, "  kubectl get promotions,releasehistories\n")
	fmt.Fprintf(out, "\nLogs: %s/logs (hub, agents) and %s/clusters/*/logs. Press Ctrl-C to stop and clean up.\n", env.Dir, env.Dir)
}
