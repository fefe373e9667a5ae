//go:build !agentonly

package app

import (
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestCLIDocs_listEveryVerbAndExitCode keeps docs/cli.md true: every user
// verb has a section, and every exit code is in its table.
func TestCLIDocs_listEveryVerbAndExitCode(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("../../../docs/cli.md")
	g.Expect(err).NotTo(HaveOccurred())
	doc := string(data)
	elsewhere := map[string]bool{"hub": true, "agent": true, "dev": true, "help": true} // docs/hub.md, docs/agent.md, docs/dev.md
	for _, c := range NewRootCommand().Commands() {
		if elsewhere[c.Name()] || c.Hidden {
			continue
		}
		if !strings.Contains(doc, "`tugboat "+c.Name()) {
			t.Errorf("docs/cli.md does not document tugboat %s", c.Name())
		}
	}
	for _, code := range []int{ExitOK, ExitError, ExitUsage, ExitNotFound, ExitForbidden, ExitConflict} {
		g.Expect(doc).To(MatchRegexp(`(?m)^\| %d \| `, code), "docs/cli.md has no row for exit code %d", code)
	}
	g.Expect(doc).To(ContainSubstring("NO_COLOR"))
}
