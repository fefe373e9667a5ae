//go:build !agentonly

package app

import (
	"strings"
	"testing"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// On a terminal, `tugboat diff` colors added lines green, removed ones
// red, hunks yellow, and each object by its change; plain, it does not.
func TestPrintDiff_colorsOnATerminal(t *testing.T) {
	v := diffView{Promotion: "web-production-1.4.0", Version: "1.4.0", To: "production",
		Preview: &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewReady, ObjectsChanged: 1, LinesChanged: 2},
		Groups: []tugboatv1alpha1.PreviewGroup{{Digest: strings.Repeat("a", 64), Targets: 1, Objects: []tugboatv1alpha1.PreviewObject{
			{Kind: "Deployment", Name: "web", Change: tugboatv1alpha1.PreviewChanged, Diff: "@@ -1 +1 @@\n-a\n+b\n"},
			{Kind: "Service", Name: "web", Change: tugboatv1alpha1.PreviewAdded},
		}}}}
	var colored, plain strings.Builder
	printDiff(&colored, painter{on: true}, v)
	printDiff(&plain, painter{}, v)
	for _, want := range []string{red + "-a" + reset, green + "+b" + reset, yellow + "@@ -1 +1 @@" + reset, green + "  Added    Service web" + reset} {
		if !strings.Contains(colored.String(), want) {
			t.Errorf("colored output lacks %q:\n%s", want, colored.String())
		}
	}
	if strings.Contains(plain.String(), "\x1b[") {
		t.Errorf("plain output is colored:\n%s", plain.String())
	}
}
