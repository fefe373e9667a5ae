//go:build agentonly

package app

import "github.com/spf13/cobra"

// commands are the subcommands of the agent-only binary (go build -tags
// agentonly ./cmd/tugboat, the agent's image): the files of the hub, dev and
// user verbs are left out, and with them the hub's controllers, the promotion
// strategies and their clients, and the dev environment, so the agent maps
// far fewer pages of its binary.
func commands() []*cobra.Command {
	return []*cobra.Command{
		withAgentRuntimeDefaults(newAgentCommand()),
		newVersionCommand(),
	}
}
