package actions

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// The hub keeps an agent's answer (up to 256 KiB of diffs, 256 objects)
// within the PromotionPreview's bounds: at most 50 objects a group and
// 128 KiB of diffs, saying what it cut; the counts stand.
func TestStoredGroup_keepsTheObjectsBounds(t *testing.T) {
	g := NewWithT(t)
	res := &wire.PreviewResult{Digest: strings.Repeat("a", 64), ObjectsChanged: 300, LinesChanged: 90000,
		ValuesDiff: strings.Repeat("+v: 1\n", 20000)} // 120 KiB: cut to 64 KiB
	for i := range wire.MaxPreviewObjects {
		res.Objects = append(res.Objects, wire.PreviewObject{APIVersion: "v1", Kind: "ConfigMap", Name: fmt.Sprintf("c%d", i),
			Change: wire.ChangeChanged, Diff: strings.Repeat("+x\n", 1000)})
	}
	grp := storedGroup(res)
	g.Expect(grp.Objects).To(HaveLen(tugboatv1alpha1.MaxPreviewObjects))
	total := len(grp.ValuesDiff)
	for _, o := range grp.Objects {
		total += len(o.Diff)
	}
	g.Expect(len(grp.ValuesDiff)).To(BeNumerically("<=", tugboatv1alpha1.MaxPreviewValuesDiff))
	g.Expect(grp.ValuesDiff).To(HaveSuffix("\n"), "cut on a line")
	g.Expect(total).To(BeNumerically("<=", tugboatv1alpha1.MaxPreviewGroupDiffs))
	g.Expect(grp.Truncated).To(BeTrue())
	g.Expect(grp.Note).To(ContainSubstring("the hub cut the values diff"))
	g.Expect(grp.Note).To(ContainSubstring("the hub lists 50 of 256 objects"))
	g.Expect(grp.Note).To(ContainSubstring("diffs to keep within 128 KiB"))
	g.Expect(grp.ObjectsChanged).To(BeEquivalentTo(300))
	g.Expect(grp.LinesChanged).To(BeEquivalentTo(90000))
	b, _ := json.Marshal(grp)
	g.Expect(len(b)).To(BeNumerically("<", 200<<10))
}
