//go:build !agentonly

package app

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
)

// TestHubDocs_listEveryFlag keeps docs/hub.md true: every flag of
// `tugboat hub` is documented there.
func TestHubDocs_listEveryFlag(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("../../../docs/hub.md")
	g.Expect(err).NotTo(HaveOccurred())
	doc := string(data)
	newHubCommand().Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		g.Expect(doc).To(ContainSubstring("`--"+f.Name+"`"), "docs/hub.md does not document --%s", f.Name)
	})
}
