// Package bins builds and locates the pinned Kubernetes control-plane binaries
// the e2e harness and `tugboat dev up` run: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok.
//
// Everything is built from the Go module proxy, at the versions pinned here
// and in the tools modules under e2e/tools, into bin/k8s of the repository.
// A build is skipped when the binary for the pinned version already exists,
// so the cost is paid once per machine. It uses only the standard library so
// that building the binaries does not first require building tugboat.
package bins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Pinned versions. The Kubernetes and etcd versions must match the require
// lines of e2e/tools/kube/go.mod and e2e/tools/etcd/go.mod.
const (
	KubernetesVersion = "v1.36.3"
	EtcdVersion       = "v3.6.16"
	KwokVersion       = "v0.7.0"
)

// Binary names.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kwok                  = "kwok"
)

// EnvDir names an environment variable that, when set, points at a directory
// holding all five binaries; it overrides the repository's bin/k8s.
const EnvDir = "TUGBOAT_K8S_BIN"

// All lists every binary the harness needs.
var All = []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, Kwok}

// FindRepoRoot walks up from dir to the directory holding tugboat's go.mod.
func FindRepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(firstModuleLine(string(data)), "module tugboat.dev/tugboat") &&
			!strings.Contains(firstModuleLine(string(data)), "/e2e/tools/") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the tugboat repository (no go.mod for tugboat.dev/tugboat above the working directory)")
		}
		dir = parent
	}
}

func firstModuleLine(gomod string) string {
	for _, line := range strings.Split(gomod, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "module ") {
			return line
		}
	}
	return ""
}

// Dir returns the directory that holds (or will hold) the binaries: $TUGBOAT_K8S_BIN
// when set, otherwise <repo>/bin/k8s.
func Dir(repoRoot string) string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	return filepath.Join(repoRoot, "bin", "k8s")
}

// Path returns the path of one binary inside dir.
func Path(dir, name string) string { return filepath.Join(dir, name) }

// Missing reports which binaries are absent from dir.
func Missing(dir string) []string {
	var missing []string
	for _, name := range All {
		if fi, err := os.Stat(Path(dir, name)); err != nil || fi.IsDir() {
			missing = append(missing, name)
		}
	}
	return missing
}

// step is one build: it produces the binaries in outputs inside a versioned
// directory, which are then linked into the binary directory.
type step struct {
	what    string
	version string
	outputs []string
	// build runs go build -v (or install -v): the package names it prints
	// tell how far along it is (buildLog).
	build func(ctx context.Context, repoRoot, outDir string, log io.Writer) error
}

func steps() []step {
	return []step{
		{
			what: "kubernetes " + KubernetesVersion, version: "kubernetes-" + KubernetesVersion,
			outputs: []string{KubeAPIServer, KubeControllerManager, KubeScheduler},
			build: func(ctx context.Context, root, out string, log io.Writer) error {
				ldflags := strings.Join([]string{
					"-s", "-w",
					"-X k8s.io/component-base/version.gitVersion=" + KubernetesVersion,
					"-X k8s.io/component-base/version.gitMajor=1",
					"-X k8s.io/component-base/version.gitMinor=" + minor(KubernetesVersion),
					"-X k8s.io/component-base/version.gitTreeState=clean",
					"-X k8s.io/client-go/pkg/version.gitVersion=" + KubernetesVersion,
				}, " ")
				return goCmd(ctx, filepath.Join(root, "e2e", "tools", "kube"), log, nil,
					"build", "-v", "-ldflags", ldflags, "-o", out+string(filepath.Separator),
					"k8s.io/kubernetes/cmd/kube-apiserver",
					"k8s.io/kubernetes/cmd/kube-controller-manager",
					"k8s.io/kubernetes/cmd/kube-scheduler")
			},
		},
		{
			what: "etcd " + EtcdVersion, version: "etcd-" + EtcdVersion,
			outputs: []string{Etcd},
			build: func(ctx context.Context, root, out string, log io.Writer) error {
				return goCmd(ctx, filepath.Join(root, "e2e", "tools", "etcd"), log, nil,
					"build", "-v", "-ldflags", "-s -w", "-o", filepath.Join(out, Etcd), ".")
			},
		},
		{
			what: "kwok " + KwokVersion, version: "kwok-" + KwokVersion,
			outputs: []string{Kwok},
			build: func(ctx context.Context, root, out string, log io.Writer) error {
				return goCmd(ctx, out, log, []string{"GOBIN=" + out},
					"install", "-v", "-ldflags", "-s -w", "sigs.k8s.io/kwok/cmd/kwok@"+KwokVersion)
			},
		},
	}
}

func minor(v string) string {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 {
		return "0"
	}
	return parts[1]
}

// Ensure builds whatever pinned binary is missing into <repo>/bin/k8s and
// returns the directory. When $TUGBOAT_K8S_BIN is set nothing is built: the
// directory must already hold every binary. Progress lines go to progress;
// the compiler's own output goes to progress only when a build fails.
func Ensure(ctx context.Context, repoRoot string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	if d := os.Getenv(EnvDir); d != "" {
		if missing := Missing(d); len(missing) > 0 {
			return "", fmt.Errorf("$%s=%s lacks %s", EnvDir, d, strings.Join(missing, ", "))
		}
		return d, nil
	}
	dir := Dir(repoRoot)
	all := steps()
	missing := 0
	for _, s := range all {
		if !built(dir, s) {
			missing++
		}
	}
	n := 0
	for _, s := range all {
		versioned := filepath.Join(dir, s.version)
		if !built(dir, s) {
			n++
			if err := os.MkdirAll(versioned, 0o750); err != nil {
				return "", err
			}
			fmt.Fprintf(progress, "[%d/%d] building %s into %s (first time only; this takes minutes on 2 cores)\n", n, missing, s.what, versioned)
			start := time.Now()
			out := &buildLog{}
			stopTicking := tick(progress, fmt.Sprintf("[%d/%d] building %s", n, missing, s.what), start, out)
			// Build into a temporary directory and rename, so an interrupted
			// build never leaves a half-written binary that looks cached.
			tmp, err := os.MkdirTemp(dir, ".build-")
			if err != nil {
				stopTicking()
				return "", err
			}
			err = s.build(ctx, repoRoot, tmp, out)
			stopTicking()
			if err == nil {
				for _, o := range s.outputs {
					if err = os.Rename(filepath.Join(tmp, o), filepath.Join(versioned, o)); err != nil {
						break
					}
				}
			}
			_ = os.RemoveAll(tmp)
			if err != nil {
				fmt.Fprint(progress, out.String())
				return "", fmt.Errorf("building %s: %w", s.what, err)
			}
			fmt.Fprintf(progress, "[%d/%d] built %s in %s (%d packages compiled)\n", n, missing, s.what, time.Since(start).Round(time.Second), out.packages())
		}
		for _, o := range s.outputs {
			link := filepath.Join(dir, o)
			target := filepath.Join(s.version, o)
			if cur, err := os.Readlink(link); err == nil && cur == target {
				continue
			}
			_ = os.Remove(link)
			if err := os.Symlink(target, link); err != nil {
				return "", err
			}
		}
	}
	return dir, nil
}

// built reports whether every output of s is in dir.
func built(dir string, s step) bool {
	for _, o := range s.outputs {
		if _, err := os.Stat(filepath.Join(dir, s.version, o)); err != nil {
			return false
		}
	}
	return true
}

// tickEvery is how often a build in progress says how far it got.
const tickEvery = 15 * time.Second

// tick prints, every tickEvery until stopped, how long what has run and how
// many packages the compiler finished (from go build -v).
func tick(progress io.Writer, what string, start time.Time, out *buildLog) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(tickEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				phase := fmt.Sprintf("%d packages compiled", out.packages())
				if out.packages() == 0 {
					phase = "downloading modules"
				}
				fmt.Fprintf(progress, "%s: %s, %s\n", what, time.Since(start).Round(time.Second), phase)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// buildLog keeps what go build -v writes but the package names, which it
// counts: the compiler's messages stay for when the build fails.
type buildLog struct {
	mu      sync.Mutex
	partial []byte
	n       int
	kept    strings.Builder
}

func (b *buildLog) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		line := string(b.partial[:i])
		b.partial = b.partial[i+1:]
		if line != "" && !strings.ContainsAny(line, " :\t") {
			b.n++
			continue
		}
		b.kept.WriteString(line + "\n")
	}
	return len(p), nil
}

func (b *buildLog) packages() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

func (b *buildLog) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kept.String() + string(b.partial)
}

func goCmd(ctx context.Context, dir string, log io.Writer, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = log
	cmd.Stderr = log
	return cmd.Run()
}
