package bins

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
)

// TestPrometheus_pinMatchesTheToolsModule: the version EnsurePrometheus
// names its directory after is the one e2e/tools/prometheus builds, and
// PrometheusVersion is the release that module version is (v0.3XY.Z is
// 3.XY.Z).
func TestPrometheus_pinMatchesTheToolsModule(t *testing.T) {
	g := NewWithT(t)
	root, err := FindRepoRoot(".")
	g.Expect(err).NotTo(HaveOccurred())
	gomod, err := os.ReadFile(filepath.Join(root, "e2e", "tools", "prometheus", "go.mod"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(gomod)).To(MatchRegexp(`(?m)^\s*github\.com/prometheus/prometheus ` + regexp.QuoteMeta(PrometheusModuleVersion) + `\b`))
	g.Expect(string(gomod)).To(ContainSubstring("tool github.com/prometheus/prometheus/cmd/prometheus"))
	m := regexp.MustCompile(`^v0\.3(\d\d)\.(\d+)$`).FindStringSubmatch(PrometheusModuleVersion)
	g.Expect(m).NotTo(BeNil(), "module version %s is not v0.3XY.Z", PrometheusModuleVersion)
	g.Expect(PrometheusVersion).To(Equal("3." + trimZero(m[1]) + "." + m[2]))
	g.Expect(PrometheusDir(root)).To(Equal(filepath.Join(root, "bin", "prometheus", "prometheus-"+PrometheusModuleVersion)))
}

func trimZero(s string) string {
	if len(s) > 1 && s[0] == '0' {
		return s[1:]
	}
	return s
}

// TestPrometheus_locatesTheBinaryNamedByTheEnvironment: $TUGBOAT_PROMETHEUS
// names the binary to use and nothing is built; a path that is not a file
// is refused, saying so.
func TestPrometheus_locatesTheBinaryNamedByTheEnvironment(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "prometheus")
	g.Expect(os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)).To(Succeed())
	t.Setenv(EnvPrometheus, bin)
	got, err := EnsurePrometheus(context.Background(), "/nonexistent-repo", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(bin))

	t.Setenv(EnvPrometheus, dir)
	_, err = EnsurePrometheus(context.Background(), "/nonexistent-repo", nil)
	g.Expect(err).To(MatchError("$TUGBOAT_PROMETHEUS=" + dir + " is not a file"))
}
