package app

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/agent"
)

func newAgentCommand() *cobra.Command {
	opts := agent.NewOptions()
	var kube kubeFlags
	var logs logFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the spoke agent: watch Helm releases, track their resources and health, report to the hub",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logs.setup()
			opts.Reporter.AgentVersion = version()
			if err := opts.Validate(); err != nil {
				return err
			}
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			a, err := agent.New(cfg, opts, ctrl.Log.WithName("agent"))
			if err != nil {
				return err
			}
			return a.Start(ctrl.SetupSignalHandler())
		},
	}
	kube.bind(cmd)
	logs.bind(cmd)
	opts.BindFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}
