package image_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/image"
)

// stage is one FROM ... AS name section of a Dockerfile, with its
// instructions joined across line continuations.
type stage struct {
	from  string
	lines []string
}

func readDockerfile(t *testing.T) map[string]stage {
	t.Helper()
	root, err := bins.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(data), "")
	stages := map[string]stage{}
	var cur string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if m := regexp.MustCompile(`^FROM (.+) AS (\S+)$`).FindStringSubmatch(line); m != nil {
			cur = m[2]
			stages[cur] = stage{from: m[1]}
			continue
		}
		if cur == "" {
			stages[""] = stage{lines: append(stages[""].lines, line)}
			continue
		}
		s := stages[cur]
		s.lines = append(s.lines, line)
		stages[cur] = s
	}
	return stages
}

// TestDockerfile_matchesMakeImage keeps the Dockerfile and `make image`
// building the same images: for each image a final stage named for it (the
// agent's is "agent") on the distroless nonroot base, the binary copied to
// the same path from a build stage that uses -trimpath, the same ldflags
// and build tags, the same user, entrypoint and labels.
func TestDockerfile_matchesMakeImage(t *testing.T) {
	g := NewWithT(t)
	stages := readDockerfile(t)
	g.Expect(strings.Join(stages[""].lines, "\n")).To(MatchRegexp(`ARG BASE_IMAGE=gcr\.io/distroless/static\S*:nonroot`))
	for _, k := range image.Kinds() {
		target := k.Name
		if k.Tags == "agentonly" {
			target = "agent"
		}
		final, ok := stages[target]
		g.Expect(ok).To(BeTrue(), "no stage %s", target)
		g.Expect(final.from).To(Equal("${BASE_IMAGE}"), target)
		all := strings.Join(final.lines, "\n")
		g.Expect(final.lines).To(ContainElement("USER "+image.User), target)
		g.Expect(final.lines).To(ContainElement(`ENTRYPOINT ["`+image.BinaryPath+`"]`), target)
		for _, key := range []string{"title", "description", "version", "revision", "source", "url"} {
			g.Expect(all).To(ContainSubstring("org.opencontainers.image."+key+"="), "%s: label %s", target, key)
		}
		g.Expect(all).To(ContainSubstring(`org.opencontainers.image.title="` + k.Name + `"`))
		g.Expect(all).To(ContainSubstring(`org.opencontainers.image.description="` + k.Description + `"`))
		g.Expect(all).To(ContainSubstring(`org.opencontainers.image.source="` + image.Source + `"`))

		m := regexp.MustCompile(`(?m)^COPY --from=(\S+) (\S+) (\S+)$`).FindStringSubmatch(all)
		g.Expect(m).NotTo(BeNil(), "%s copies no binary", target)
		g.Expect(m[3]).To(Equal(image.BinaryPath))
		build, ok := stages[m[1]]
		g.Expect(ok).To(BeTrue(), "no stage %s", m[1])
		run := strings.Join(build.lines, "\n")
		g.Expect(run).To(ContainSubstring("go build -trimpath"), m[1])
		g.Expect(run).To(ContainSubstring(`-ldflags "`+image.LDFlags("${VERSION}")+`"`), m[1])
		g.Expect(run).To(ContainSubstring("-o "+m[2]+" ./cmd/tugboat"), m[1])
		if k.Tags != "" {
			g.Expect(run).To(ContainSubstring("-tags "+k.Tags), m[1])
		} else {
			g.Expect(run).NotTo(ContainSubstring("-tags"), m[1])
		}
	}
}
