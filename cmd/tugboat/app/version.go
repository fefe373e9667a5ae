package app

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is set at link time (-X tugboat.dev/tugboat/cmd/tugboat/app.Version=...).
var Version = ""

// version returns the link-time version, else the module version, else "dev".
func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the tugboat version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version())
		},
	}
}
