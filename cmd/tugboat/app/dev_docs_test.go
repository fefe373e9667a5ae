//go:build !agentonly

package app

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestDevDocs_listEveryFlag keeps docs/getting-started.md true: every flag
// of `tugboat dev up` and `tugboat dev demo` is described there.
func TestDevDocs_listEveryFlag(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("../../../docs/getting-started.md")
	g.Expect(err).NotTo(HaveOccurred())
	doc := string(data)
	for _, cmd := range []*cobra.Command{newDevUpCommand(), newDevDemoCommand()} {
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return
			}
			g.Expect(doc).To(ContainSubstring("`--"+f.Name), "docs/getting-started.md does not describe `tugboat dev %s --%s`", cmd.Name(), f.Name)
		})
	}
}
