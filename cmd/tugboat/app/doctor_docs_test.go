//go:build !agentonly

package app

import (
	"os"
	"sort"
	"testing"

	. "github.com/onsi/gomega"
)

// TestDoctorDocs_everyCheckHasASection keeps docs/troubleshooting.md true:
// every check `tugboat doctor` runs has a section there (## `check`) that
// says what its findings mean and how to fix them.
func TestDoctorDocs_everyCheckHasASection(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("../../../docs/troubleshooting.md")
	g.Expect(err).NotTo(HaveOccurred())
	doc := string(data)
	checks := make([]string, 0, len(checkOrder))
	for c := range checkOrder {
		checks = append(checks, c)
	}
	sort.Strings(checks)
	g.Expect(checks).To(ContainElements(checkCRDs, checkHub, checkSpoke, checkPipeline, checkPromotion, checkReleaseHistory))
	for _, c := range checks {
		g.Expect(doc).To(ContainSubstring("\n## `"+c+"`\n"), "docs/troubleshooting.md has no section for the doctor check %q", c)
	}
}
