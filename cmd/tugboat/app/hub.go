//go:build !agentonly

package app

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
)

func newHubCommand() *cobra.Command {
	opts := hub.NewOptions()
	opts.Version = version()
	var kube kubeFlags
	var logs logFlags
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Run the hub on the management cluster: receiver, ReleaseHistory recorder and controllers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logs.setup()
			if err := opts.Validate(); err != nil {
				return err
			}
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			ctx := ctrl.SetupSignalHandler()
			h, err := hub.New(ctx, cfg, opts)
			if err != nil {
				return err
			}
			return h.Start(ctx)
		},
	}
	kube.bind(cmd)
	logs.bind(cmd)
	opts.BindFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}
