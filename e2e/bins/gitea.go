package bins

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// GiteaVersion is the pinned Gitea release; it must match the require line
// of e2e/tools/gitea/go.mod.
const GiteaVersion = "v1.26.0"

// Gitea is the Gitea binary's name.
const Gitea = "gitea"

// GiteaBuildTags are the build tags Gitea is built with: SQLite support, so
// that a test instance needs no database server.
const GiteaBuildTags = "sqlite sqlite_unlock_notify"

// EnvGitea names an environment variable that, when set, is the path of a
// Gitea binary to use instead of building one.
const EnvGitea = "TUGBOAT_GITEA"

// GiteaDir returns the versioned directory holding the Gitea binary:
// <repo>/bin/gitea/gitea-<version>.
func GiteaDir(repoRoot string) string {
	return filepath.Join(repoRoot, "bin", "gitea", "gitea-"+GiteaVersion)
}

// GiteaSourceDir returns the directory of Gitea's module source in the
// module cache (templates, options and public assets, which a Gitea built
// without the bindata tag reads from disk), downloading it if needed.
func GiteaSourceDir(ctx context.Context, repoRoot string) (string, error) {
	var out, errOut strings.Builder
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "code.gitea.io/gitea")
	cmd.Dir = filepath.Join(repoRoot, "e2e", "tools", "gitea")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go mod download code.gitea.io/gitea: %w: %s", err, errOut.String())
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal([]byte(out.String()), &mod); err != nil {
		return "", fmt.Errorf("go mod download code.gitea.io/gitea: %w", err)
	}
	if mod.Dir == "" {
		return "", fmt.Errorf("go mod download code.gitea.io/gitea: no source directory: %s", mod.Error)
	}
	return mod.Dir, nil
}

// EnsureGitea builds Gitea from the Go module proxy into
// <repo>/bin/gitea/gitea-<version>/gitea unless it is already there, and
// returns the binary's path. When $TUGBOAT_GITEA is set, that binary is used
// and nothing is built. Progress lines go to progress; the compiler's own
// output goes to progress only when the build fails. The build is made in a
// temporary directory and renamed into place, so an interrupted build never
// looks cached.
func EnsureGitea(ctx context.Context, repoRoot string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	if p := os.Getenv(EnvGitea); p != "" {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() { //nolint:gosec // the user names the binary to run
			return "", fmt.Errorf("$%s=%s is not a file", EnvGitea, p)
		}
		return p, nil
	}
	dir := GiteaDir(repoRoot)
	bin := filepath.Join(dir, Gitea)
	if fi, err := os.Stat(bin); err == nil && !fi.IsDir() {
		return bin, nil
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o750); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "building gitea %s into %s (first time only; this takes minutes on 2 cores)\n", GiteaVersion, dir)
	start := time.Now()
	tmp, err := os.MkdirTemp(parent, ".build-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	version := strings.TrimPrefix(GiteaVersion, "v")
	ldflags := strings.Join([]string{
		"-s", "-w",
		"-X main.Version=" + version,
		"-X 'main.Tags=" + GiteaBuildTags + "'",
	}, " ")
	var out strings.Builder
	err = goCmd(ctx, filepath.Join(repoRoot, "e2e", "tools", "gitea"), &out, []string{"CGO_ENABLED=1"},
		"build", "-tags", GiteaBuildTags, "-ldflags", ldflags,
		"-o", filepath.Join(tmp, Gitea), "code.gitea.io/gitea")
	if err != nil {
		fmt.Fprint(progress, out.String())
		return "", fmt.Errorf("building gitea %s: %w", GiteaVersion, err)
	}
	// Rename the whole versioned directory into place: a concurrent build
	// that finished first wins, and this one is discarded.
	if err := os.Rename(tmp, dir); err != nil {
		if fi, statErr := os.Stat(bin); statErr == nil && !fi.IsDir() {
			return bin, nil
		}
		return "", err
	}
	fmt.Fprintf(progress, "built gitea %s in %s\n", GiteaVersion, time.Since(start).Round(time.Second))
	return bin, nil
}
