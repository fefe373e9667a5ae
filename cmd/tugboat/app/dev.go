//go:build !agentonly

package app

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"tugboat.dev/tugboat/e2e/devenv"
)

func newDevCommand() *cobra.Command {
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Run tugboat's embedded default locally: a hub and spoke clusters on this machine",
	}
	dev.AddCommand(newDevUpCommand(), newDevDownCommand())
	return dev
}

func newDevUpCommand() *cobra.Command {
	opts := devenv.Options{Spokes: 2, Dir: devenv.DefaultDir()}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a hub cluster and N spoke clusters on this machine; Ctrl-C stops them",
		Long: `up starts local clusters (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok fake nodes, no Docker needed), installs the tugboat CRDs
into the hub, writes a kubeconfig per cluster and a merged one, and keeps running
until interrupted, then cleans up. The first run builds the control-plane
binaries from the Go module proxy into bin/k8s, which takes several minutes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			opts.Progress = out
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
			if env.HubURL != "" {
				fmt.Fprintf(out, "\nThe hub receives on %s; every spoke runs an agent reporting to it:\n\n", env.HubURL)
				fmt.Fprintf(out, "  kubectl -n %s get spokes,releasehistories,pipelines,promotions\n", env.Namespace)
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
				fmt.Fprintf(out, "  kubectl -n %s get promotions -w\n", env.Namespace)
				if len(env.Spokes) >= 3 {
					last := env.Spokes[len(env.Spokes)-1].Name
					fmt.Fprintf(out, "  go run ./cmd/tugboat approve -n %s %s-%s-1.0.0   # %s requires approval\n", env.Namespace, env.Pipeline, last, last)
				}
				fmt.Fprintf(out, "\nThe repository %s also holds %v for upgrades.\n", env.ChartRepoURL, devenv.DemoVersions)
			}
			fmt.Fprintf(out, "\nLogs: %s/logs (hub, agents) and %s/clusters/*/logs. Press Ctrl-C to stop and clean up.\n", env.Dir, env.Dir)
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
	return cmd
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
