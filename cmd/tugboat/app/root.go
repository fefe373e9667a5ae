// Package app wires tugboat's subcommands. It holds no logic of its own: each
// subcommand binds its options and calls into the package that does the work.
package app

import (
	"github.com/spf13/cobra"
)

// NewRootCommand returns the `tugboat` command with every subcommand attached.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "tugboat",
		Short:         "Promote Helm releases across clusters once they are proven healthy",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCommand())
	root.AddCommand(newHubCommand())
	root.AddCommand(newAgentCommand())
	root.AddCommand(newVersionCommand())
	root.AddCommand(newStatusCommand())
	root.AddCommand(newHistoryCommand())
	root.AddCommand(newPromoteCommand())
	root.AddCommand(newApproveCommand())
	root.AddCommand(newRejectCommand())
	return root
}
