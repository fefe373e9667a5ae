//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"tugboat.dev/tugboat/e2e/devenv"
	"tugboat.dev/tugboat/e2e/harness"
)

func newDevCommand() *cobra.Command {
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Run tugboat's embedded default locally: a hub and spoke clusters on this machine",
	}
	dev.AddCommand(newDevUpCommand(), newDevDemoCommand(), newDevDownCommand(), newDevRunCommand())
	return dev
}

func newDevUpCommand() *cobra.Command {
	opts := devenv.Options{Spokes: 2, Dir: devenv.DefaultDir()}
	approval := true
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a hub cluster and N spoke clusters on this machine; Ctrl-C stops them",
		Long: `up starts local clusters (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok fake nodes, no Docker needed), installs the tugboat CRDs
into the hub, writes a kubeconfig per cluster and a merged one, and keeps running
until interrupted, then cleans up. The first run builds the control-plane
binaries from the Go module proxy into bin/k8s, which takes several minutes.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			noApproval, _ := cmd.Flags().GetBool("no-approval")
			if noApproval {
				if cmd.Flags().Changed("approval") && approval {
					return fmt.Errorf("--approval and --no-approval contradict each other")
				}
				approval = false
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out, stop := interruptible(cmd.Context(), cmd.OutOrStdout())
			defer stop()
			opts.Progress = out
			opts.NoApproval = !approval
			start := time.Now()
			env, err := devenv.Up(ctx, opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "\ntugboat dev environment is up in %s (hub + %d spokes)\n\n", time.Since(start).Round(100*time.Millisecond), len(env.Spokes))
			fmt.Fprintf(out, "  export KUBECONFIG=%s\n", env.Kubeconfig)
			fmt.Fprintf(out, "  kubectl get nodes                      # the hub (context \"hub\")\n")
			for _, s := range env.Spokes {
				fmt.Fprintf(out, "  kubectl --context %s get nodes   # or KUBECONFIG=%s\n", s.Name, env.KubeconfigFor(s.Name))
			}
			fmt.Fprintf(out, "  kubectl get crds | grep tugboat.dev\n")
			if opts.ExternalControllers {
				fmt.Fprintf(out, "\nNo hub or agent runs yet (--external-controllers): run each in its own terminal (the Tiltfile's no-Docker mode does):\n\n")
				fmt.Fprintf(out, "  tugboat dev run hub --dir %s        # receives on %s\n", env.Dir, env.HubURL)
				for _, s := range env.Spokes {
					fmt.Fprintf(out, "  tugboat dev run agent-%s --dir %s\n", s.Name, env.Dir)
				}
			} else if env.HubURL != "" {
				fmt.Fprintf(out, "\nThe hub receives on %s; every spoke runs an agent reporting to it:\n\n", env.HubURL)
				fmt.Fprintf(out, "  kubectl get spokes,releasehistories,pipelines,promotions   # namespace %s: the context's\n", env.Namespace)
			}
			if env.Pipeline != "" {
				helm := env.Helm
				if helm == "" {
					helm = "helm"
				}
				first := env.Spokes[0].Name
				fmt.Fprintf(out, "\nPipeline %s/%s promotes the sample chart %s through %s with the helm strategy\n",
					env.Namespace, env.Pipeline, devenv.DemoChart, spokeNames(env))
				fmt.Fprintf(out, "(the spokes' agents upgrade their own releases). Install it in %s and watch it move:\n\n", first)
				fmt.Fprintf(out, "  %s --kubeconfig %s install %s %s -n %s --create-namespace\n",
					helm, env.KubeconfigFor(first), devenv.DemoChart, env.ChartRepoURL+"/"+devenv.DemoChart+"-1.0.0.tgz", devenv.DemoNamespace)
				fmt.Fprintf(out, "  kubectl get promotions -w\n")
				fmt.Fprintf(out, "  go run ./cmd/tugboat status %s\n", env.Pipeline)
				if len(env.Spokes) >= 3 && approval {
					last := env.Spokes[len(env.Spokes)-1].Name
					fmt.Fprintf(out, "  go run ./cmd/tugboat approve %s-%s-1.0.0   # %s requires approval\n", env.Pipeline, last, last)
				}
				fmt.Fprintf(out, "\nThe repository %s also holds %v for upgrades.\n", env.ChartRepoURL, devenv.DemoVersions)
				fmt.Fprintf(out, "\nWatch and approve in the browser, as yourself:\n\n  go run ./cmd/tugboat ui\n")
			}
			cleanup := "clean up"
			if opts.Keep {
				cleanup = "stop (--keep: the logs and kubeconfigs stay in " + env.Dir + ")"
			}
			fmt.Fprintf(out, "\nLogs: %s/logs (hub, agents) and %s/clusters/*/logs. Press Ctrl-C to %s.\n", env.Dir, env.Dir, cleanup)
			<-ctx.Done()
			fmt.Fprintln(out, "\nstopping clusters")
			if err := env.Stop(); err != nil {
				return fmt.Errorf("cleaning up (run `tugboat dev down --dir %s`): %w", env.Dir, err)
			}
			fmt.Fprintln(out, "stopped")
			return nil
		},
	}
	cmd.Flags().IntVar(&opts.Spokes, "spokes", opts.Spokes, "number of spoke clusters (1-10)")
	cmd.Flags().StringVar(&opts.Dir, "dir", opts.Dir, "directory for kubeconfigs, cluster data and logs")
	cmd.Flags().StringVarP(&opts.Namespace, "namespace", "n", devenv.DefaultNamespace, "namespace of the Spokes and the sample Pipeline on the hub (also the hub context's namespace in the kubeconfig)")
	cmd.Flags().BoolVar(&approval, "approval", true, "with 3 or more spokes, the last environment (production) requires approval; --approval=false removes the gate")
	cmd.Flags().Bool("no-approval", false, "same as --approval=false")
	cmd.Flags().IntVar(&opts.HubPort, "port", 0, "loopback port of the hub's receiver (default: a free port)")
	cmd.Flags().BoolVar(&opts.Keep, "keep", false, "keep the directory (logs, kubeconfigs, Slack capture) after Ctrl-C; only the processes and cluster data go")
	cmd.Flags().BoolVar(&opts.ExternalControllers, "external-controllers", false,
		"prepare the Spokes, their keys and the sample pipeline but run no hub or agent: run them with `tugboat dev run` (the Tiltfile's no-Docker mode)")
	return cmd
}

func newDevRunCommand() *cobra.Command {
	dir := devenv.DefaultDir()
	wait := 10 * time.Minute
	cmd := &cobra.Command{
		Use:   "run hub|agent-<spoke>",
		Short: "Run the hub or one spoke's agent of a `dev up --external-controllers` environment",
		Long: `run waits (up to --wait) until the environment in --dir, started with
` + "`tugboat dev up --external-controllers`" + `, is ready, then runs the hub or the
agent of one spoke with the command line dev up recorded in its state file:
the cluster's kubeconfig, the spoke's key file, the hub's URL. This binary
replaces itself with that command, so a rebuilt binary runs on the next
start. The Tiltfile's no-Docker mode runs one per Tilt resource.`,
		Example: `  tugboat dev up --external-controllers &
  tugboat dev run hub
  tugboat dev run agent-dev`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := waitForCommand(cmd.Context(), dir, args[0], wait)
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "tugboat dev run: %s %v\n", exe, c.Args)
			return syscall.Exec(exe, append([]string{exe}, c.Args...), os.Environ())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", dir, "directory of the environment")
	cmd.Flags().DurationVar(&wait, "wait", wait, "how long to wait for the environment to be ready")
	return cmd
}

// waitForCommand waits until the `dev up --external-controllers` process
// of dir runs and has recorded the command called name.
func waitForCommand(ctx context.Context, dir, name string, wait time.Duration) (devenv.CommandState, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		st, err := devenv.ReadState(dir)
		if err == nil && harness.ProcessAlive(st.PID) {
			if c, ok := st.Command(name); ok {
				if !st.ExternalControllers {
					return c, fmt.Errorf("the environment in %s runs its own hub and agents; start it with `tugboat dev up --external-controllers`", dir)
				}
				return c, nil
			}
			if len(st.Commands) > 0 {
				var names []string
				for _, c := range st.Commands {
					names = append(names, c.Name)
				}
				return devenv.CommandState{}, fmt.Errorf("the environment in %s has no %q (it has %s)", dir, name, strings.Join(names, ", "))
			}
		}
		select {
		case <-ctx.Done():
			return devenv.CommandState{}, fmt.Errorf("no environment became ready in %s within %s (is `tugboat dev up --external-controllers --dir %s` running?)", dir, wait, dir)
		case <-t.C:
		}
	}
}

func newDevDownCommand() *cobra.Command {
	dir := devenv.DefaultDir()
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Clean up a dev environment that was left behind",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return devenv.Down(dir, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", dir, "directory of the environment")
	return cmd
}

func spokeNames(env *devenv.Env) string {
	names := ""
	for i, s := range env.Spokes {
		if i > 0 {
			names += " → "
		}
		names += s.Name
	}
	return names
}
