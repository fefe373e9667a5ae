package docsexamples

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var (
	// linkRE finds inline Markdown links and images: [text](target).
	linkRE    = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// proseLines returns the lines of a Markdown page outside fenced code
// blocks, with inline code spans removed.
func proseLines(data []byte) []string {
	var out []string
	inFence := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			inFence = !inFence
			continue
		}
		if !inFence {
			out = append(out, line)
		}
	}
	return out
}

// anchors returns the anchors GitHub gives the headings of a page: the
// heading's text in lower case, without punctuation, spaces as hyphens;
// repeats get -1, -2, ...
func anchors(data []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(data) {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestDocs_relativeLinksResolve checks every relative link of README.md and
// docs/*.md: the file exists, and the #anchor names a heading of it.
func TestDocs_relativeLinksResolve(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(docsDir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(repoRoot, "README.md"))
	checked := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		code := regexp.MustCompile("`[^`]*`")
		for n, line := range proseLines(data) {
			for _, m := range linkRE.FindAllStringSubmatch(code.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				resolved := page
				if file != "" {
					resolved = filepath.Join(filepath.Dir(page), file)
				}
				body, err := os.ReadFile(resolved)
				if err != nil {
					if fi, serr := os.Stat(resolved); serr == nil && fi.IsDir() && anchor == "" {
						continue
					}
					t.Errorf("%s (prose line %d): link %s: %v", page, n+1, target, err)
					continue
				}
				if anchor != "" && strings.HasSuffix(resolved, ".md") && !anchors(body)[anchor] {
					t.Errorf("%s (prose line %d): link %s: %s has no heading with the anchor #%s", page, n+1, target, resolved, anchor)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links found: is the extraction broken?", checked)
	}
}

func TestAnchors_likeGitHub(t *testing.T) {
	got := anchors([]byte("# Title\n## 3. Ask for a promotion, signed\n## `pullRequest`\n```\n# not a heading\n```\n## Title\n"))
	for _, want := range []string{"title", "3-ask-for-a-promotion-signed", "pullrequest", "title-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block is not a heading")
	}
}
