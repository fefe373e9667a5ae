//go:build !agentonly

package app

import "github.com/spf13/cobra"

// commands are the subcommands of the full binary.
func commands() []*cobra.Command {
	return []*cobra.Command{
		newDevCommand(),
		newHubCommand(),
		withAgentRuntimeDefaults(newAgentCommand()),
		newVersionCommand(),
		newStatusCommand(),
		newHistoryCommand(),
		newPromoteCommand(),
		newApproveCommand(),
		newRejectCommand(),
		newAbortCommand(),
		newRolloutCommand(),
		newDiffCommand(),
		newLifecycleCommand(),
		newResumeCommand(),
		newUICommand(),
		newDoctorCommand(),
		newInstallCommand(),
		newUninstallCommand(),
		newReleasesCommand(),
		newTargetCommand(),
		newSpokeCommand(),
		newCompletionCommand(),
	}
}
