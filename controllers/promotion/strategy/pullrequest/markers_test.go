package pullrequest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

var prodKey = markerKey{Pipeline: "apps/web", Environment: "production"}

const prodMarker = `# tugboat: {"pipeline": "apps/web", "environment": "production"}`
const stagingMarker = `# tugboat: {"pipeline": "apps/web", "environment": "staging"}`

func TestRewriteYAML_replacesOnlyTheMarkedScalar(t *testing.T) {
	cases := []struct {
		name, in, want string
		changed        int
	}{{
		name:    "plain value in a HelmRelease",
		in:      "spec:\n  chart:\n    spec:\n      chart: web\n      version: 1.2.0 " + prodMarker + "\n",
		want:    "spec:\n  chart:\n    spec:\n      chart: web\n      version: 1.3.0 " + prodMarker + "\n",
		changed: 1,
	}, {
		name:    "double quotes kept, spacing before the comment kept",
		in:      "version: \"1.2.0\"    " + prodMarker + "\n",
		want:    "version: \"1.3.0\"    " + prodMarker + "\n",
		changed: 1,
	}, {
		name:    "single quotes kept",
		in:      "version: '1.2.0' " + prodMarker + "\n",
		want:    "version: '1.3.0' " + prodMarker + "\n",
		changed: 1,
	}, {
		name:    "CRLF line endings kept",
		in:      "a: b\r\nversion: 1.2.0 " + prodMarker + "\r\nc: d\r\n",
		want:    "a: b\r\nversion: 1.3.0 " + prodMarker + "\r\nc: d\r\n",
		changed: 1,
	}, {
		name:    "no trailing newline",
		in:      "version: 1.2.0 " + prodMarker,
		want:    "version: 1.3.0 " + prodMarker,
		changed: 1,
	}, {
		name:    "sequence item and a mapping in a sequence",
		in:      "versions:\n  - 1.2.0 " + prodMarker + "\n  - name: web\n    version: 1.2.0 " + prodMarker + "\n",
		want:    "versions:\n  - 1.3.0 " + prodMarker + "\n  - name: web\n    version: 1.3.0 " + prodMarker + "\n",
		changed: 2,
	}, {
		name:    "other environment untouched",
		in:      "prod: 1.2.0 " + prodMarker + "\nstaging: 1.2.0 " + stagingMarker + "\n",
		want:    "prod: 1.3.0 " + prodMarker + "\nstaging: 1.2.0 " + stagingMarker + "\n",
		changed: 1,
	}, {
		name:    "tag kept",
		in:      "version: !!str 1.2.0 " + prodMarker + "\n",
		want:    "version: !!str 1.3.0 " + prodMarker + "\n",
		changed: 1,
	}, {
		name:    "quoted key with a colon and a hash",
		in:      "\"a: #b\": 1.2.0 " + prodMarker + "\n",
		want:    "\"a: #b\": 1.3.0 " + prodMarker + "\n",
		changed: 1,
	}, {
		name:    "multiple documents",
		in:      "kind: A\nv: 1.0.0\n---\nkind: B\nversion: 1.2.0 " + prodMarker + "\n",
		want:    "kind: A\nv: 1.0.0\n---\nkind: B\nversion: 1.3.0 " + prodMarker + "\n",
		changed: 1,
	}, {
		name: "marker-like text inside a block scalar is content, not a marker",
		in:   "script: |\n  version: 1.2.0 " + prodMarker + "\n",
		want: "script: |\n  version: 1.2.0 " + prodMarker + "\n",
	}, {
		name:    "already at the version",
		in:      "version: 1.3.0 " + prodMarker + "\n",
		want:    "version: 1.3.0 " + prodMarker + "\n",
		changed: 0,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, fields, malformed, err := rewriteYAML("f.yaml", []byte(tc.in), prodKey, "1.3.0")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(malformed).To(BeEmpty())
			g.Expect(string(out)).To(Equal(tc.want))
			changed := 0
			for _, f := range fields {
				if f.Changed {
					changed++
				}
			}
			g.Expect(changed).To(Equal(tc.changed))
		})
	}
}

func TestRewriteYAML_quotesPlainValuesYAMLWouldNotReadAsStrings(t *testing.T) {
	g := NewWithT(t)
	in := "version: 1.2.0 " + prodMarker + "\n"
	out, _, _, err := rewriteYAML("f.yaml", []byte(in), prodKey, "1.10")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal("version: \"1.10\" " + prodMarker + "\n"))

	out, _, _, err = rewriteYAML("f.yaml", []byte(in), prodKey, "1.10.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal("version: 1.10.0 " + prodMarker + "\n"))
}

func TestRewriteYAML_rejectsMarksItCannotRewrite(t *testing.T) {
	for name, in := range map[string]string{
		"block scalar":  "version: | " + prodMarker + "\n  1.2.0\n",
		"flow sequence": "version: [1.2.0] " + prodMarker + "\n",
		"no value":      "version: " + prodMarker + "\n  1.2.0\n",
		"alias":         "a: &v 1.2.0\nversion: *v " + prodMarker + "\n",
		"invalid YAML":  "version: 1.2.0 " + prodMarker + "\n  bad: [\n",
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, _, _, err := rewriteYAML("f.yaml", []byte(in), prodKey, "1.3.0")
			g.Expect(err).To(HaveOccurred())
			g.Expect(strategy.IsTerminal(err)).To(BeTrue(), err.Error())
			g.Expect(err.Error()).To(ContainSubstring("f.yaml"))
		})
	}
}

func TestRewriteYAML_reportsMalformedMarkers(t *testing.T) {
	g := NewWithT(t)
	in := "a: 1 # tugboat: {pipeline: apps/web}\n"
	out, fields, malformed, err := rewriteYAML("f.yaml", []byte(in), prodKey, "1.3.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fields).To(BeEmpty())
	g.Expect(string(out)).To(Equal(in))
	g.Expect(malformed).To(ConsistOf("f.yaml:1"))
}

func TestCommentStart(t *testing.T) {
	for line, want := range map[string]int{
		"a: b # c":          5,
		"# c":               0,
		"a: b#c":            -1,
		"a: 'b # c' # d":    11,
		`a: "b \" # c" # d`: 14,
		"a: 'it''s # x' #y": 15,
		"a: don't # c":      9,
	} {
		if got := commentStart(line); got != want {
			t.Errorf("commentStart(%q) = %d, want %d", line, got, want)
		}
	}
}

func TestSetVersion_walksYAMLUnderPath(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		g.Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	}
	marked := "version: 1.2.0 " + prodMarker + "\n"
	write("clusters/prod/web/release.yaml", marked)
	write("clusters/prod/web/other.yml", marked)
	write("clusters/prod/notes.txt", marked)
	write("clusters/staging/release.yaml", marked)
	write("clusters/prod/.git/config.yaml", marked)

	res, err := setVersion(root, "clusters/prod", prodKey, "1.3.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.ChangedFiles).To(Equal([]string{"clusters/prod/web/other.yml", "clusters/prod/web/release.yaml"}))
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		g.Expect(err).NotTo(HaveOccurred())
		return string(b)
	}
	g.Expect(read("clusters/staging/release.yaml")).To(Equal(marked))
	g.Expect(read("clusters/prod/notes.txt")).To(Equal(marked))
	g.Expect(read("clusters/prod/web/release.yaml")).To(Equal(strings.Replace(marked, "1.2.0", "1.3.0", 1)))

	for _, bad := range []string{"../x", "/etc", "missing", "clusters/prod/notes.txt"} {
		_, err := setVersion(root, bad, prodKey, "1.3.0")
		g.Expect(err).To(HaveOccurred(), bad)
		g.Expect(strategy.IsTerminal(err)).To(BeTrue(), bad)
	}
}
