//go:build agentonly

package app

// verbExitCode: the agent-only binary has no promotion verbs.
func verbExitCode(error) (int, bool) { return 0, false }
