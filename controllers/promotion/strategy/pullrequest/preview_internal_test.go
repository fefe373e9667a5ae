package pullrequest

import (
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

func bigPreview(objects, diffBytes int) *preview {
	g := tugboatv1alpha1.PreviewGroup{Digest: strings.Repeat("ab", 32), Targets: 3, Spokes: []string{"a", "b"}, ObjectsChanged: int32(objects + 7), LinesChanged: 9000}
	for i := range objects {
		g.Objects = append(g.Objects, tugboatv1alpha1.PreviewObject{Kind: "ConfigMap", Namespace: "apps", Name: "cm-" + strings.Repeat("x", i%5),
			Change: tugboatv1alpha1.PreviewChanged, Diff: "@@ -1 +1 @@\n" + strings.Repeat("+line of a diff\n", diffBytes/16)})
	}
	return &preview{name: "web-production-1-3-0",
		summary: &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewReady, ObjectsChanged: g.ObjectsChanged, LinesChanged: 9000},
		pp:      &tugboatv1alpha1.PromotionPreview{Status: tugboatv1alpha1.PromotionPreviewStatus{Groups: []tugboatv1alpha1.PreviewGroup{g, g, g, g}, OtherChanges: 2}}}
}

func TestWithPreview_bounds(t *testing.T) {
	body := "Tugboat promotes **web** to **1.3.0** in **production**.\n"
	for _, tc := range []struct {
		name     string
		body     string
		p        *preview
		contains []string
		excludes []string
	}{
		{name: "no preview adds nothing", body: body, p: nil, excludes: []string{"Preview"}},
		{name: "every diff fits", body: body, p: bigPreview(3, 1000), contains: []string{"### Preview", "and 7 more objects", "and 2 more distinct changes"}, excludes: []string{"left out"}},
		{name: "the largest preview is cut with a note", body: body, p: bigPreview(50, 16384),
			contains: []string{"### Preview", "diffs left out to keep this description within 65536 characters: `tugboat diff web-production-1-3-0` shows them."}},
		{name: "a huge body is cut with a note", body: strings.Repeat("- `f.yaml` line 1: `1.2.0` → `1.3.0`\n", 3000), p: bigPreview(2, 100),
			contains: []string{"cut to stay within 65,536 characters"}},
		{name: "summary only when the diffs cannot be read", body: body,
			p:        &preview{name: "x", summary: &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewStale, ObjectsChanged: 1, LinesChanged: 2}, unread: "the diffs could not be read: " + errors.New("forbidden").Error()},
			contains: []string{"Stale: 1 object and 2 lines change", "> **Stale:**", "_the diffs could not be read: forbidden_"}, excludes: []string{"<details>"}},
		{name: "a failed preview says why", body: body,
			p:        &preview{name: "x", summary: &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewFailed, Reason: "no agent answered <b>@team</b>"}},
			contains: []string{"Failed: no agent answered &lt;b&gt;@\u200bteam&lt;/b&gt;"}, excludes: []string{"<b>", "@team"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out := withPreview(tc.body, tc.p)
			g.Expect(len(out)).To(BeNumerically("<=", MaxBodyLength))
			g.Expect(out).To(HavePrefix(tc.body[:40]))
			for _, s := range tc.contains {
				g.Expect(out).To(ContainSubstring(s))
			}
			for _, s := range tc.excludes {
				g.Expect(out).NotTo(ContainSubstring(s))
			}
			// Every <details> opened is closed: no diff is cut in half.
			g.Expect(strings.Count(out, "<details>")).To(Equal(strings.Count(out, "</details>")))
		})
	}
}

// A diff holding a code fence cannot end the block it is shown in.
func TestDetails_fenceLongerThanTheDiffsBackticks(t *testing.T) {
	g := NewWithT(t)
	d := details("Changed ConfigMap <apps/x>", "+ docs: |\n+   ```` code\n+   ```\n")
	g.Expect(d).To(ContainSubstring("<summary>Changed ConfigMap &lt;apps/x&gt;</summary>"))
	g.Expect(d).To(ContainSubstring("\n`````diff\n"))
	g.Expect(d).To(HaveSuffix("\n`````\n\n</details>\n"))
}
