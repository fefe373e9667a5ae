package bins

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// HelmVersion is the helm CLI the tests and `tugboat dev up` use where "a
// user ran helm" is meant. It matches the Helm SDK in go.mod.
const HelmVersion = "v3.21.4"

// EnsureHelm builds the pinned helm CLI into <repo>/bin/helm-<version>/helm
// unless it is there, and returns its path.
func EnsureHelm(ctx context.Context, repoRoot string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	dir := filepath.Join(repoRoot, "bin", "helm-"+HelmVersion)
	path := filepath.Join(dir, "helm")
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(progress, "building helm %s into %s (first time only)\n", HelmVersion, dir)
	start := time.Now()
	var out limitedBuffer
	if err := goCmd(ctx, tmp, &out, []string{"GOBIN=" + tmp}, "install", "-ldflags", "-s -w", "helm.sh/helm/v3/cmd/helm@"+HelmVersion); err != nil {
		fmt.Fprint(progress, out.String())
		return "", fmt.Errorf("building helm %s: %w", HelmVersion, err)
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), path); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "built helm %s in %s\n", HelmVersion, time.Since(start).Round(time.Second))
	return path, nil
}

// limitedBuffer keeps the last 64 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.b = append(l.b, p...)
	if len(l.b) > 64<<10 {
		l.b = l.b[len(l.b)-64<<10:]
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
