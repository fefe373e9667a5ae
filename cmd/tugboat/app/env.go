package app

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix starts the environment variable of every flag of the
// long-running commands (agent, hub): --hub-url is TUGBOAT_HUB_URL.
const envPrefix = "TUGBOAT_"

// envName is the environment variable that sets the flag name.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag of fs that the command line left unset from its
// environment variable (envName), as lookup finds them: the command line
// wins over the environment, which wins over the default. A list flag's
// variable holds comma-separated values. It reports every variable whose
// value the flag refuses, naming the variable.
func applyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" {
			return
		}
		name := envName(f.Name)
		v, ok := lookup(name)
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s=%q (flag --%s): %w", name, v, f.Name, err))
		}
	})
	return errors.Join(errs...)
}

// bindEnv makes cmd read its flags from the environment too (see applyEnv)
// and says so in its help.
func bindEnv(cmd *cobra.Command) {
	if cmd.Long == "" {
		cmd.Long = cmd.Short
	}
	cmd.Long = strings.TrimSpace(cmd.Long) + "\n\nEvery flag can also be set by an environment variable: " +
		envPrefix + "<FLAG> in upper case with underscores, e.g. --hub-url as " + envName("hub-url") +
		" (a list as comma-separated values). A flag given on the command line wins."
	cmd.Long = strings.TrimSpace(cmd.Long)
	prev := cmd.PreRunE
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		if err := applyEnv(cmd.Flags(), os.LookupEnv); err != nil {
			return err
		}
		if prev != nil {
			return prev(cmd, args)
		}
		return nil
	}
}
