package pullrequest_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/controllers/promotion/strategy/pullrequest"
	"tugboat.dev/tugboat/controllers/promotion/strategy/pullrequest/giteatest"
)

// The Gitea server is shared by the package's tests and started on first
// use, so tests that do not need it (and -run filters) do not pay for it.
var (
	giteaOnce   sync.Once
	giteaServer *giteatest.Server
	giteaErr    error
)

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	code := m.Run()
	if giteaServer != nil {
		giteaServer.Stop()
	}
	if hubCluster != nil {
		_ = hubCluster.Stop()
	}
	os.Exit(code)
}

// gitea returns the shared Gitea server, building and starting it on first
// use (the first build takes minutes; it is cached under bin/gitea).
func gitea(t *testing.T) *giteatest.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Gitea server; skipped with -short")
	}
	giteaOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		giteaServer, giteaErr = giteatest.Start(ctx, giteatest.Options{Progress: testLogWriter{t}})
	})
	if giteaErr != nil {
		t.Fatalf("starting gitea: %v", giteaErr)
	}
	return giteaServer
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// repoCounter makes repository names unique within the run.
var (
	repoMu      sync.Mutex
	repoCounter int
)

// fixture is a repository on the real Gitea server, seeded with files.
type fixture struct {
	srv   *giteatest.Server
	url   string
	name  string
	files map[string]string
}

// newRepo creates a repository on Gitea and pushes files to main.
func newRepo(t *testing.T, srv *giteatest.Server, files map[string]string) *fixture {
	t.Helper()
	repoMu.Lock()
	repoCounter++
	name := fmt.Sprintf("%s-%d", strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())), repoCounter)
	repoMu.Unlock()
	if len(name) > 90 {
		name = name[len(name)-90:]
	}
	ctx := context.Background()
	cloneURL, err := srv.CreateRepo(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: srv, url: cloneURL, name: name, files: files}
	f.commitToMain(t, "initial content", files)
	return f
}

func (f *fixture) auth() *githttp.BasicAuth {
	return &githttp.BasicAuth{Username: giteatest.AdminUser, Password: f.srv.AdminPassword}
}

// commitToMain clones main (or starts it), writes files and pushes.
func (f *fixture) commitToMain(t *testing.T, msg string, files map[string]string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	repo, err := git.PlainCloneContext(ctx, dir, false, &git.CloneOptions{URL: f.url, Auth: f.auth(), ReferenceName: "refs/heads/main", SingleBranch: true})
	if err != nil {
		// An empty repository: start main locally.
		if repo, err = git.PlainInit(dir, false); err != nil {
			t.Fatal(err)
		}
		if err := repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, "refs/heads/main")); err != nil {
			t.Fatal(err)
		}
		if _, err := repo.CreateRemote(&gitconfig.RemoteConfig{Name: "origin", URLs: []string{f.url}}); err != nil {
			t.Fatal(err)
		}
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	sig := &object.Signature{Name: "dev", Email: "dev@example.com", When: time.Now()}
	if _, err := wt.Commit(msg, &git.CommitOptions{Author: sig}); err != nil {
		t.Fatal(err)
	}
	if err := repo.PushContext(ctx, &git.PushOptions{Auth: f.auth(), RefSpecs: []gitconfig.RefSpec{"refs/heads/main:refs/heads/main"}}); err != nil {
		t.Fatal(err)
	}
	for k, v := range files {
		f.files[k] = v
	}
}

// branchHead returns the commit of a branch on the server, or nil.
func (f *fixture) branchHead(t *testing.T, branch string) *plumbing.Reference {
	t.Helper()
	rem := git.NewRemote(memory.NewStorage(), &gitconfig.RemoteConfig{Name: "origin", URLs: []string{f.url}})
	refs, err := rem.List(&git.ListOptions{Auth: f.auth()})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if r.Name() == plumbing.NewBranchReferenceName(branch) {
			return r
		}
	}
	return nil
}

func (f *fixture) branchExists(branch string) bool {
	rem := git.NewRemote(memory.NewStorage(), &gitconfig.RemoteConfig{Name: "origin", URLs: []string{f.url}})
	refs, err := rem.List(&git.ListOptions{Auth: f.auth()})
	if err != nil {
		return false
	}
	for _, r := range refs {
		if r.Name() == plumbing.NewBranchReferenceName(branch) {
			return true
		}
	}
	return false
}

// readBranch clones a branch into memory and returns its head commit and
// every file's content.
func (f *fixture) readBranch(t *testing.T, branch string) (*object.Commit, map[string]string) {
	t.Helper()
	repo, err := git.Clone(memory.NewStorage(), nil, &git.CloneOptions{
		URL: f.url, Auth: f.auth(), ReferenceName: plumbing.NewBranchReferenceName(branch), SingleBranch: true,
	})
	if err != nil {
		t.Fatalf("cloning %s: %v", branch, err)
	}
	head, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	commit, err := repo.CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := commit.Tree()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	err = tree.Files().ForEach(func(file *object.File) error {
		r, err := file.Reader()
		if err != nil {
			return err
		}
		defer func() { _ = r.Close() }()
		b, err := io.ReadAll(r)
		files[file.Name] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return commit, files
}

// promotion builds a strategy request for pipeline apps/web promoting
// version into production.
type promotion struct {
	provider tugboatv1alpha1.GitProvider
	url      string
	path     string
	version  string
	secret   map[string]string // nil: no Secret at all
	// rollbackFrom makes the request a rollback from that version.
	rollbackFrom string
	// preview, when set, is the Promotion's preview: its summary goes into
	// status.preview and the PromotionPreview into the hub.
	preview *tugboatv1alpha1.PromotionPreview
	// summary is status.preview (with preview, or alone).
	summary *tugboatv1alpha1.PreviewSummary
	// reader, when set, is the hub the strategy reads (instead of a
	// client holding secret and preview).
	reader client.Reader
}

const (
	namespace = "apps"
	pipeline  = "web"
	env       = "production"
)

func (p promotion) request() strategy.Request {
	pl := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: pipeline},
		Spec:       tugboatv1alpha1.PipelineSpec{Release: "web"},
	}
	prom := &tugboatv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "web-production-" + strings.ReplaceAll(p.version, ".", "-"), UID: "0e5d6c1a-7f31-4c2b-9a44-promotion0001"},
		Spec: tugboatv1alpha1.PromotionSpec{
			Pipeline: pipeline, From: "staging", To: env, Version: p.version,
			RequestedBy: tugboatv1alpha1.RequestedByAuto,
		},
	}
	st := tugboatv1alpha1.PromotionStrategy{
		Type: tugboatv1alpha1.StrategyPullRequest,
		PullRequest: &tugboatv1alpha1.PullRequestStrategy{
			URL: p.url, Branch: "main", Path: p.path, Provider: p.provider,
			SecretRef: tugboatv1alpha1.LocalSecretReference{Name: "git-credentials"},
		},
	}
	prom.Status.Strategy = &st
	prom.Status.Preview = p.summary
	return strategy.Request{
		Promotion:    prom,
		Pipeline:     pl,
		Environment:  &tugboatv1alpha1.Environment{Name: env},
		Targets:      []strategy.Target{{SpokeName: "prod-eu", Namespace: "web", Release: "web"}},
		Version:      p.version,
		RollbackFrom: p.rollbackFrom,
		Strategy:     st,
	}
}

func (p promotion) hub() client.Reader {
	sch := runtime.NewScheme()
	_ = scheme.AddToScheme(sch)
	_ = tugboatv1alpha1.AddToScheme(sch)
	b := fake.NewClientBuilder().WithScheme(sch)
	if p.preview != nil {
		b = b.WithObjects(p.preview)
	}
	if p.secret != nil {
		data := map[string][]byte{}
		for k, v := range p.secret {
			data[k] = []byte(v)
		}
		b = b.WithObjects(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "git-credentials"},
			Data:       data,
		})
	}
	return b.Build()
}

var (
	clockMu   sync.Mutex
	clockRuns int
)

func nextCommitTime() time.Time {
	clockMu.Lock()
	defer clockMu.Unlock()
	clockRuns++
	return time.Date(2026, 5, 1, 12, clockRuns, 0, 0, time.UTC)
}

// run calls Promote once with a fresh strategy, as a restarted controller
// would, and checks that the clone was removed afterwards.
func (p promotion) run(t *testing.T) (strategy.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	work := t.TempDir()
	hub := p.reader
	if hub == nil {
		hub = p.hub()
	}
	s := pullrequest.New(hub,
		pullrequest.WithWorkDir(work),
		// The test's Gitea serves git over plain http on loopback.
		pullrequest.WithAllowHTTP(true),
		// Every run commits at a later time, so a second push of the same
		// change would show as a new commit on the branch.
		pullrequest.WithClock(clocktesting.NewFakePassiveClock(nextCommitTime())),
	)
	res, err := s.Promote(log.IntoContext(ctx, testr.New(t)), p.request())
	if left, _ := os.ReadDir(work); len(left) != 0 {
		t.Errorf("the work directory still holds %d entries after Promote", len(left))
	}
	return res, err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
