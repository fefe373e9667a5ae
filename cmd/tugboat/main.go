// Command tugboat is the single tugboat binary: the hub, the spoke agent, the
// local development environment and the user verbs are its subcommands.
package main

import (
	"fmt"
	"os"

	"tugboat.dev/tugboat/cmd/tugboat/app"
)

func main() {
	if err := app.NewRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "tugboat:", err)
		os.Exit(app.ExitCode(err))
	}
}
