// Package app wires tugboat's subcommands. It holds no logic of its own: each
// subcommand binds its options and calls into the package that does the work.
package app

import (
	"github.com/spf13/cobra"
)

// NewRootCommand returns the `tugboat` command with every subcommand attached
// (built with -tags agentonly: only agent and version, see commands_agentonly.go).
// A wrong command line (unknown flag, bad arguments) fails with ExitUsage.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "tugboat",
		Short:         "Promote Helm releases across clusters once they are proven healthy",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(commands()...)
	markUsageErrors(root)
	return root
}

// markUsageErrors makes cobra's flag and argument errors usage errors, on
// cmd and every command under it.
func markUsageErrors(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageErrorf("%w", err)
	})
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return usageErrorf("%w", err)
			}
			return nil
		}
	}
	for _, c := range cmd.Commands() {
		markUsageErrors(c)
	}
}
