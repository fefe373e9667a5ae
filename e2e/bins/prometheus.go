package bins

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// PrometheusModuleVersion is the pinned github.com/prometheus/prometheus
// module; it must match the require line of e2e/tools/prometheus/go.mod.
// The module's v0.3XY.Z is Prometheus 3.XY.Z (PrometheusVersion).
const PrometheusModuleVersion = "v0.316.0"

// PrometheusVersion is the Prometheus release PrometheusModuleVersion is.
const PrometheusVersion = "3.16.0"

// Prometheus is the Prometheus server binary's name.
const Prometheus = "prometheus"

// PrometheusBuildTags leave out every service discovery but file and HTTP
// (the tests list their targets statically): a smaller, faster build.
const PrometheusBuildTags = "remove_all_sd"

// EnvPrometheus names an environment variable that, when set, is the path
// of a Prometheus binary to use instead of building one.
const EnvPrometheus = "TUGBOAT_PROMETHEUS"

// PrometheusDir returns the versioned directory holding the Prometheus
// binary: <repo>/bin/prometheus/prometheus-<module version>.
func PrometheusDir(repoRoot string) string {
	return filepath.Join(repoRoot, "bin", "prometheus", "prometheus-"+PrometheusModuleVersion)
}

// EnsurePrometheus builds the Prometheus server (cmd/prometheus, without
// its web UI's assets) from the Go module proxy, through the tools module
// e2e/tools/prometheus, into PrometheusDir unless it is already there, and
// returns the binary's path. When $TUGBOAT_PROMETHEUS is set, that binary
// is used and nothing is built. Progress lines go to progress; the
// compiler's own output goes to progress only when the build fails. The
// build is made in a temporary directory and renamed into place, so an
// interrupted build never looks cached.
func EnsurePrometheus(ctx context.Context, repoRoot string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	if p := os.Getenv(EnvPrometheus); p != "" {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() { //nolint:gosec // the user names the binary to run
			return "", fmt.Errorf("$%s=%s is not a file", EnvPrometheus, p)
		}
		return p, nil
	}
	dir := PrometheusDir(repoRoot)
	bin := filepath.Join(dir, Prometheus)
	if fi, err := os.Stat(bin); err == nil && !fi.IsDir() {
		return bin, nil
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o750); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "building prometheus %s into %s (first time only; about 600 packages, minutes on 2 cores)\n", PrometheusVersion, dir)
	start := time.Now()
	tmp, err := os.MkdirTemp(parent, ".build-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	const v = "github.com/prometheus/common/version."
	ldflags := strings.Join([]string{
		"-s", "-w",
		"-X " + v + "Version=" + PrometheusVersion,
		"-X " + v + "Revision=" + PrometheusModuleVersion,
		"-X " + v + "Branch=module",
		"-X " + v + "BuildUser=tugboat",
	}, " ")
	out := &buildLog{}
	stopTicking := tick(progress, "building prometheus "+PrometheusVersion, start, out)
	err = goCmd(ctx, filepath.Join(repoRoot, "e2e", "tools", "prometheus"), out, nil,
		"build", "-v", "-tags", PrometheusBuildTags, "-ldflags", ldflags,
		"-o", filepath.Join(tmp, Prometheus), "github.com/prometheus/prometheus/cmd/prometheus")
	stopTicking()
	if err != nil {
		fmt.Fprint(progress, out.String())
		return "", fmt.Errorf("building prometheus %s: %w", PrometheusVersion, err)
	}
	// Rename the whole versioned directory into place: a concurrent build
	// that finished first wins, and this one is discarded.
	if err := os.Rename(tmp, dir); err != nil {
		if fi, statErr := os.Stat(bin); statErr == nil && !fi.IsDir() {
			return bin, nil
		}
		return "", err
	}
	fmt.Fprintf(progress, "built prometheus %s in %s (%d packages compiled)\n", PrometheusVersion, time.Since(start).Round(time.Second), out.packages())
	return bin, nil
}
