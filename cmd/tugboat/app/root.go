// Package app wires tugboat's subcommands. It holds no logic of its own: each
// subcommand binds its options and calls into the package that does the work.
package app

import (
	"github.com/spf13/cobra"
)

// NewRootCommand returns the `tugboat` command with every subcommand attached
// (built with -tags agentonly: only agent and version, see commands_agentonly.go).
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "tugboat",
		Short:         "Promote Helm releases across clusters once they are proven healthy",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(commands()...)
	return root
}
