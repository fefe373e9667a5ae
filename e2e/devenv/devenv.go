// Package devenv runs tugboat's embedded default on one machine: a hub
// cluster and N spoke clusters from the e2e harness, with the tugboat CRDs
// installed into the hub and a kubeconfig per cluster (plus one merged
// kubeconfig with a context each). It backs `tugboat dev up` and
// `tugboat dev down`.
//
// It is for local development and demos, not for production.
package devenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"tugboat.dev/tugboat/config"
	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/harness"
)

// Options configure Up.
type Options struct {
	// Spokes is the number of spoke clusters. Defaults to 2.
	Spokes int
	// Dir holds the state of the environment: kubeconfigs, cluster working
	// directories and logs. Defaults to DefaultDir().
	Dir string
	// RepoRoot is the tugboat checkout that builds the control-plane
	// binaries. Defaults to the checkout around the working directory.
	RepoRoot string
	// Progress receives progress lines. Defaults to io.Discard.
	Progress io.Writer
	// Executable is the tugboat binary that runs the hub and the agents.
	// Defaults to the running executable.
	Executable string
	// Keep leaves Dir (logs, kubeconfigs, the Slack capture) in place when
	// the environment stops; by default Stop removes it.
	Keep bool
	// NoControllers starts the clusters only (no hub, no agents).
	NoControllers bool
	// ExternalControllers prepares everything the hub and agents need (the
	// Spokes, their keys and key files, the sample Pipeline) and records
	// their commands in the state file, but starts neither: someone else
	// runs them with `tugboat dev run hub|agent-<spoke>` (the Tiltfile's
	// no-Docker mode does, as Tilt local_resources).
	ExternalControllers bool
	// NoSlackCapture leaves out the Slack stand-in: by default the sample
	// Pipeline has a Slack notifier whose messages go to a local stand-in
	// that writes them to SlackCaptureFile in Dir.
	NoSlackCapture bool
	// Namespace holds the Spokes and the sample Pipeline on the hub, and is
	// the namespace of the hub's kubeconfig context. Defaults to
	// DefaultNamespace.
	Namespace string
	// NoApproval leaves the approval gate out of the sample Pipeline: by
	// default, with three or more spokes, the last environment requires
	// approval.
	NoApproval bool
	// HubPort is the loopback port of the hub's receiver. 0 picks a free one.
	HubPort int
	// PipelineTimeout bounds each Promotion of the sample Pipeline (its
	// spec.timeout). 0 keeps the API's default (30m).
	PipelineTimeout time.Duration
}

// DefaultDir is where `tugboat dev up` keeps its state unless told otherwise.
func DefaultDir() string { return filepath.Join(os.TempDir(), "tugboat-dev") }

// StateFile is the name of the file in Dir that records a running environment,
// so `tugboat dev down` can clean up one whose `up` was killed.
const StateFile = "state.json"

// State is what StateFile holds.
type State struct {
	// PID is the process running `tugboat dev up`.
	PID int `json:"pid"`
	// HubURL is the hub receiver's URL.
	HubURL string `json:"hubURL,omitempty"`
	// ChartRepoURL serves the sample chart.
	ChartRepoURL string `json:"chartRepoURL,omitempty"`
	// Processes are the hub and agent processes (process group ids).
	Processes []ProcessState `json:"processes,omitempty"`
	// Clusters lists every cluster of the environment.
	Clusters []ClusterState `json:"clusters"`
	// ExternalControllers is true when the hub and agents are not run by
	// `dev up` but by `tugboat dev run` (Options.ExternalControllers).
	ExternalControllers bool `json:"externalControllers,omitempty"`
	// Commands are the tugboat command lines of the hub ("hub") and of
	// each spoke's agent ("agent-<spoke>"). With ExternalControllers they
	// are written once everything they need is in place.
	Commands []CommandState `json:"commands,omitempty"`
}

// CommandState is the command line of one tugboat process.
type CommandState struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
}

// Command returns the command called name.
func (s *State) Command(name string) (CommandState, bool) {
	for _, c := range s.Commands {
		if c.Name == name {
			return c, true
		}
	}
	return CommandState{}, false
}

// ProcessState records one tugboat process of the environment.
type ProcessState struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	Log  string `json:"log"`
}

// ClusterState records one cluster.
type ClusterState struct {
	Name       string `json:"name"`
	Role       string `json:"role"` // hub or spoke
	Kubeconfig string `json:"kubeconfig"`
	Dir        string `json:"dir"`
	APIServer  string `json:"apiServer"`
	PIDs       []int  `json:"pids"`
}

// Env is a running environment.
type Env struct {
	Dir string
	// Kubeconfig is the merged kubeconfig with one context per cluster.
	Kubeconfig string
	Hub        *harness.Cluster
	Spokes     []*harness.Cluster
	// HubURL is the hub receiver's URL (plain HTTP on loopback).
	HubURL string
	// Namespace holds the Spokes on the hub.
	Namespace string
	// ChartRepoURL serves the sample chart at DemoVersions.
	ChartRepoURL string
	// Helm is the path of the pinned helm CLI ("" when it could not be
	// built: then use your own).
	Helm string
	// Pipeline is the sample Pipeline's name (in Namespace).
	Pipeline string
	// SlackCapture is the file the Slack stand-in writes the sample
	// Pipeline's Slack messages to ("" without the stand-in).
	SlackCapture string

	procs     []*harness.Process
	procState []ProcessState
	commands  []CommandState
	external  bool
	keep      bool
	repo      *ChartRepo
	slack     *slackCapture
}

// SpokeName returns the name of spoke i (0-based): dev, staging,
// production, then spoke-4, spoke-5, ...
func SpokeName(i, _ int) string {
	if names := []string{"dev", "staging", "production"}; i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("spoke-%d", i+1)
}

// Up starts the environment. On error nothing is left running.
func Up(ctx context.Context, opts Options) (_ *Env, err error) {
	if opts.Spokes == 0 {
		opts.Spokes = 2
	}
	if opts.Spokes < 1 || opts.Spokes > 10 {
		return nil, fmt.Errorf("--spokes must be between 1 and 10, got %d", opts.Spokes)
	}
	if opts.Dir == "" {
		opts.Dir = DefaultDir()
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if errs := validation.IsDNS1123Label(opts.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("--namespace %q is not a valid namespace name: %s", opts.Namespace, strings.Join(errs, "; "))
	}
	if opts.HubPort < 0 || opts.HubPort > 65535 {
		return nil, fmt.Errorf("--port must be between 1 and 65535 (or 0 for a free port), got %d", opts.HubPort)
	}
	if st, err := ReadState(opts.Dir); err == nil && harness.ProcessAlive(st.PID) {
		return nil, fmt.Errorf("an environment is already running from %s (pid %d); stop it with Ctrl-C or `tugboat dev down`", opts.Dir, st.PID)
	} else if err == nil {
		fmt.Fprintf(opts.Progress, "cleaning up an environment left behind in %s\n", opts.Dir)
		if err := Down(opts.Dir, opts.Progress); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, err
	}
	binDir := os.Getenv(bins.EnvDir)
	helm := ""
	if binDir == "" {
		root := opts.RepoRoot
		if root == "" {
			wd, _ := os.Getwd()
			if root, err = bins.FindRepoRoot(wd); err != nil {
				return nil, fmt.Errorf("%w; run from a tugboat checkout, or set $%s to a directory with the control-plane binaries", err, bins.EnvDir)
			}
		}
		fmt.Fprintln(opts.Progress, "checking control-plane binaries")
		if binDir, err = bins.Ensure(ctx, root, opts.Progress); err != nil {
			return nil, err
		}
		if helmPath, herr := bins.EnsureHelm(ctx, root, opts.Progress); herr == nil {
			helm = helmPath
		} else {
			fmt.Fprintf(opts.Progress, "could not build the helm CLI (%v); use your own\n", herr)
		}
	}
	crdFiles, err := config.CRDs()
	if err != nil {
		return nil, err
	}
	crds, err := harness.ReadCRDFiles(crdFiles)
	if err != nil {
		return nil, fmt.Errorf("reading embedded CRDs: %w", err)
	}

	if opts.ExternalControllers && opts.NoControllers {
		return nil, errors.New("external controllers and no controllers exclude each other")
	}
	env := &Env{Dir: opts.Dir, Spokes: make([]*harness.Cluster, opts.Spokes), Helm: helm, external: opts.ExternalControllers, keep: opts.Keep, Namespace: opts.Namespace}
	defer func() {
		if err != nil {
			_ = env.Stop()
		}
	}()
	names := []string{"hub"}
	for i := 0; i < opts.Spokes; i++ {
		names = append(names, SpokeName(i, opts.Spokes))
	}
	fmt.Fprintf(opts.Progress, "starting %d clusters: %v\n", len(names), names)
	clusters := make([]*harness.Cluster, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			clusters[i], errs[i] = harness.Start(ctx, harness.Options{
				Name: name, BinDir: binDir, Dir: filepath.Join(opts.Dir, "clusters"),
				StartTimeout: 3 * time.Minute,
			})
			if errs[i] == nil {
				fmt.Fprintf(opts.Progress, "cluster %s ready in %s (%s)\n", name, time.Since(start).Round(100*time.Millisecond), clusters[i].APIServerURL)
			}
		}()
	}
	wg.Wait()
	env.Hub = clusters[0]
	copy(env.Spokes, clusters[1:])
	if err := errors.Join(errs...); err != nil {
		return env, err
	}
	if err := env.writeState(); err != nil {
		return env, err
	}
	fmt.Fprintln(opts.Progress, "installing tugboat CRDs into the hub")
	if err := harness.Install(ctx, env.Hub.Client, crds); err != nil {
		return env, err
	}
	if err := env.writeKubeconfigs(); err != nil {
		return env, err
	}
	fmt.Fprintln(opts.Progress, "installing the hub chart's ServiceAccount, RBAC and admission policies into the hub")
	if err := env.installHubIdentity(ctx); err != nil {
		return env, err
	}
	if !opts.NoControllers {
		if err := env.startControllers(ctx, opts); err != nil {
			return env, err
		}
	}
	return env, nil
}

// Clusters returns the hub followed by the spokes.
func (e *Env) Clusters() []*harness.Cluster {
	return append([]*harness.Cluster{e.Hub}, e.Spokes...)
}

// KubeconfigFor returns the path of the kubeconfig of one cluster.
func (e *Env) KubeconfigFor(name string) string { return filepath.Join(e.Dir, name+".kubeconfig") }

// writeKubeconfigs writes a kubeconfig per cluster and the merged one.
// Each context names the namespace the environment uses on its cluster:
// Namespace on the hub (so `tugboat status` and `kubectl get pipelines`
// need no -n), DemoNamespace on the spokes.
func (e *Env) writeKubeconfigs() error {
	merged := clientcmdapi.NewConfig()
	for _, c := range e.Clusters() {
		cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath)
		if err != nil {
			return err
		}
		ns := DemoNamespace
		if c == e.Hub {
			ns = e.Namespace
		}
		for _, ctx := range cfg.Contexts {
			ctx.Namespace = ns
		}
		if err := clientcmd.WriteToFile(*cfg, e.KubeconfigFor(c.Name)); err != nil {
			return err
		}
		for k, v := range cfg.Clusters {
			merged.Clusters[k] = v
		}
		for k, v := range cfg.AuthInfos {
			merged.AuthInfos[k] = v
		}
		for k, v := range cfg.Contexts {
			merged.Contexts[k] = v
		}
	}
	merged.CurrentContext = "hub"
	e.Kubeconfig = filepath.Join(e.Dir, "kubeconfig")
	return clientcmd.WriteToFile(*merged, e.Kubeconfig)
}

func (e *Env) writeState() error {
	st := State{PID: os.Getpid(), HubURL: e.HubURL, ChartRepoURL: e.ChartRepoURL, Processes: e.procState,
		ExternalControllers: e.external, Commands: e.commands}
	for _, c := range e.Clusters() {
		role := "spoke"
		if c == e.Hub {
			role = "hub"
		}
		st.Clusters = append(st.Clusters, ClusterState{
			Name: c.Name, Role: role, Kubeconfig: e.KubeconfigFor(c.Name), Dir: c.Dir,
			APIServer: c.APIServerURL, PIDs: c.PIDs(),
		})
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.Dir, StateFile), data, 0o600)
}

// Stop stops the hub and agents, then every cluster, and removes the
// environment's files and its directory (unless Options.Keep).
func (e *Env) Stop() error {
	var errs []error
	for i := len(e.procs) - 1; i >= 0; i-- {
		e.procs[i].Stop(10 * time.Second)
	}
	if e.repo != nil {
		e.repo.Stop()
	}
	if e.slack != nil {
		_ = e.slack.Close()
	}
	for _, c := range e.Clusters() {
		if c != nil {
			errs = append(errs, c.Stop())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if e.keep {
		// The clusters' data goes (it is no use without its processes);
		// the logs, kubeconfigs and Slack capture stay for a look.
		_ = os.Remove(filepath.Join(e.Dir, StateFile))
		return os.RemoveAll(filepath.Join(e.Dir, "clusters"))
	}
	return removeEnvFiles(e.Dir)
}

// ReadState reads the state of an environment from dir.
func ReadState(dir string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		return nil, err
	}
	st := &State{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, StateFile), err)
	}
	return st, nil
}

// Down cleans up an environment left behind in dir: it stops the `dev up`
// process if it still runs, kills every process group the state names, and
// removes the files. A dir with no state is not an error.
func Down(dir string, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	st, err := ReadState(dir)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(progress, "nothing to clean up in %s\n", dir)
		return nil
	}
	if err != nil {
		return err
	}
	if st.PID != os.Getpid() && harness.ProcessAlive(st.PID) {
		fmt.Fprintf(progress, "stopping tugboat dev up (pid %d)\n", st.PID)
		_ = syscall.Kill(st.PID, syscall.SIGTERM)
		deadline := time.Now().Add(20 * time.Second)
		for harness.ProcessAlive(st.PID) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, p := range st.Processes {
		if harness.ProcessAlive(p.PID) {
			fmt.Fprintf(progress, "killing %s (pid %d)\n", p.Name, p.PID)
			_ = syscall.Kill(-p.PID, syscall.SIGKILL)
		}
	}
	for _, c := range st.Clusters {
		for _, pid := range c.PIDs {
			if harness.ProcessAlive(pid) {
				fmt.Fprintf(progress, "killing %s process group %d\n", c.Name, pid)
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range st.Clusters {
		for _, pid := range c.PIDs {
			for harness.ProcessAlive(pid) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if harness.ProcessAlive(pid) {
				return fmt.Errorf("process %d of cluster %s survived SIGKILL", pid, c.Name)
			}
		}
		if c.Dir != "" {
			_ = os.RemoveAll(c.Dir)
		}
	}
	if err := removeEnvFiles(dir); err != nil {
		return err
	}
	fmt.Fprintf(progress, "cleaned up %s\n", dir)
	return nil
}

// removeEnvFiles removes what an environment wrote into dir, then dir
// itself when nothing else is left in it (a --dir that holds other files
// keeps them).
func removeEnvFiles(dir string) error {
	matches, _ := filepath.Glob(filepath.Join(dir, "*.kubeconfig"))
	matches = append(matches, filepath.Join(dir, "kubeconfig"), filepath.Join(dir, StateFile), filepath.Join(dir, "clusters"),
		filepath.Join(dir, "keys"), filepath.Join(dir, "logs"), filepath.Join(dir, "charts"), filepath.Join(dir, "helm"), filepath.Join(dir, SlackCaptureFile))
	var errs []error
	for _, m := range matches {
		if err := os.RemoveAll(m); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) == 0 {
		return os.Remove(dir)
	}
	return nil
}
