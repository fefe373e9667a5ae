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
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the tugboat version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if done, err := out.structured(cmd.OutOrStdout(), struct {
				Version string `json:"version"`
			}{version()}); done {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), version())
			return nil
		},
	}
	out.bind(cmd)
	return cmd
}
