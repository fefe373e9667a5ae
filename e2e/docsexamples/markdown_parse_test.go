package docsexamples

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseBlocks_fencesLanguagesAndMarkers(t *testing.T) {
	g := NewWithT(t)
	doc := "# t\n\n<!-- example: pipeline-spec -->\n```yaml\nnotify: []\n```\n\ntext\n```sh\necho hi\n```\n  ```yaml\nkind: X\n  ```\n"
	blocks, err := ParseBlocks("x.md", []byte(doc))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(blocks).To(HaveLen(3))
	g.Expect(blocks[0]).To(Equal(Block{File: "x.md", Line: 4, Lang: "yaml", Marker: "pipeline-spec", Text: "notify: []\n"}))
	g.Expect(blocks[1].Lang).To(Equal("sh"))
	g.Expect(blocks[1].Marker).To(BeEmpty(), "the marker belongs to the block right below it only")
	g.Expect(blocks[2].Text).To(Equal("kind: X\n"))

	_, err = ParseBlocks("y.md", []byte("```yaml\nkind: X\n"))
	g.Expect(err).To(MatchError(ContainSubstring("y.md:1: code block not closed")))
}
