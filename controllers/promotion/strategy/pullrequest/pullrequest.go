package pullrequest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	gitclient "github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

// DefaultTimeout bounds one Promote call (clone, push and API calls) unless
// WithTimeout says otherwise.
const DefaultTimeout = 5 * time.Minute

// DefaultBranch is the base branch when promotion.pullRequest.branch is
// empty.
const DefaultBranch = "main"

// Option configures the strategy.
type Option func(*Strategy)

// WithWorkDir sets the directory under which clones are made (each in its
// own temporary directory, removed afterwards). Defaults to os.TempDir().
func WithWorkDir(dir string) Option { return func(s *Strategy) { s.workDir = dir } }

// WithClock sets the clock that dates commits.
func WithClock(c clock.PassiveClock) Option { return func(s *Strategy) { s.clock = c } }

// WithHTTPClient sets the HTTP client of the providers' API calls (the
// hub passes its egress policy's). Git itself uses go-git's HTTP transport,
// which is process-wide: see InstallGitTransport.
func WithHTTPClient(c *http.Client) Option { return func(s *Strategy) { s.httpClient = c } }

// WithAllowHTTP accepts repository URLs over plain http://, which send the
// git credentials in clear (local development and tests: a hub started with
// --pull-request-allow-http). By default only https:// is accepted.
func WithAllowHTTP(allow bool) Option { return func(s *Strategy) { s.allowHTTP = allow } }

// InstallGitTransport makes go-git reach every http:// and https://
// repository through c (the hub passes its egress policy's client: no
// loopback, link-local or metadata address, no proxy, no redirect), or
// through go-git's default client when c is nil. go-git chooses a
// transport per URL scheme for the whole process, so this applies to every
// Strategy of the process; the hub calls it once when it is assembled.
func InstallGitTransport(c *http.Client) {
	t := githttp.DefaultClient
	if c != nil {
		t = githttp.NewClient(c)
	}
	gitclient.InstallProtocol("https", t)
	gitclient.InstallProtocol("http", t)
}

// WithProviderFactory replaces NewProvider, e.g. to observe or fake the
// pull-request API in tests.
func WithProviderFactory(f ProviderFactory) Option { return func(s *Strategy) { s.providers = f } }

// WithTimeout bounds one Promote call.
func WithTimeout(d time.Duration) Option { return func(s *Strategy) { s.timeout = d } }

// Strategy is the pullRequest strategy. Create it with New.
type Strategy struct {
	hub        client.Reader
	workDir    string
	clock      clock.PassiveClock
	httpClient *http.Client
	providers  ProviderFactory
	timeout    time.Duration
	allowHTTP  bool
}

var _ strategy.Strategy = (*Strategy)(nil)

// New returns the pullRequest strategy. hub reads the credentials Secret in
// the Pipeline's namespace (use an uncached reader); when nil, the
// Request's Hub is used.
func New(hub client.Reader, opts ...Option) strategy.Strategy {
	s := &Strategy{
		hub:        hub,
		clock:      clock.RealClock{},
		httpClient: &http.Client{Timeout: 30 * time.Second},
		providers:  NewProvider,
		timeout:    DefaultTimeout,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// settings is the validated configuration of one promotion.
type settings struct {
	spec      *tugboatv1alpha1.PullRequestStrategy
	repoURL   *url.URL
	base      string
	key       markerKey
	release   string
	version   string
	env       string
	promotion string
	branch    string
	namespace string
	targets   []string
	// rollbackFrom is the version rolled back from (Request.RollbackFrom):
	// the change is a revert, on a branch and with a title of its own.
	rollbackFrom string
}

// Promote implements strategy.Strategy. See the package documentation for
// what it does. Errors never contain the credentials.
//
// Error classes: a missing Secret, network and server errors, and
// authentication or permission failures (of git or the API) are retryable,
// so that creating or fixing the Secret heals the promotion within its
// timeout; bad configuration (no pullRequest settings, an ssh:// or
// malformed URL, missing Secret keys, a base branch or path that does not
// exist, no marked field, an API that refuses the request) is terminal.
func (s *Strategy) Promote(ctx context.Context, req strategy.Request) (strategy.Result, error) {
	cfg, err := resolve(req)
	if err != nil {
		return strategy.Result{}, err
	}
	if cfg.repoURL.Scheme == "http" && !s.allowHTTP {
		return strategy.Result{}, configErrorf("pullRequest strategy: url %s is plain http://, which would send the git credentials in clear; use https:// (a hub started with --pull-request-allow-http accepts http://, for local development)",
			redactURL(cfg.repoURL))
	}
	hub := s.hub
	if hub == nil {
		hub = req.Hub
	}
	if hub == nil {
		return strategy.Result{}, errors.New("no hub reader to read the credentials secret")
	}
	creds, apiURL, err := readCredentials(ctx, hub, cfg.namespace, cfg.spec.SecretRef.Name)
	if err != nil {
		return strategy.Result{}, err
	}
	scrub := newScrubber(creds)
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	var pv *preview
	if cfg.rollbackFrom == "" {
		// A rollback reverts to what ran before: the preview was of the
		// version rolled back from.
		pv = readPreview(ctx, hub, req.Promotion)
	}
	res, err := s.promote(ctx, cfg, creds, apiURL, pv)
	res.Message = scrub.string(res.Message)
	return res, scrub.error(err)
}

func (s *Strategy) promote(ctx context.Context, cfg settings, creds Credentials, apiURL string, pv *preview) (strategy.Result, error) {
	logger := log.FromContext(ctx).WithValues("repository", redactURL(cfg.repoURL), "branch", cfg.branch)

	provider, err := s.providers(ProviderConfig{
		Kind:        cfg.spec.Provider,
		RepoURL:     cfg.repoURL,
		APIURL:      apiURL,
		Credentials: creds,
		HTTPClient:  s.httpClient,
	})
	if err != nil {
		return strategy.Result{}, strategy.Terminal(err)
	}

	dir, err := os.MkdirTemp(s.workDir, "tugboat-pr-")
	if err != nil {
		return strategy.Result{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	user, password := creds.gitBasicAuth(cfg.spec.Provider)
	co, err := cloneBase(ctx, dir, redactURL(cfg.repoURL), cfg.base, &githttp.BasicAuth{Username: user, Password: password})
	if err != nil {
		return strategy.Result{}, err
	}
	baseHash, err := co.head()
	if err != nil {
		return strategy.Result{}, err
	}

	scan, err := setVersion(dir, cfg.spec.Path, cfg.key, cfg.version)
	if err != nil {
		return strategy.Result{}, err
	}
	if len(scan.Fields) == 0 {
		return strategy.Result{}, noMarkerError(cfg, scan.Malformed)
	}
	if len(scan.ChangedFiles) == 0 {
		logger.V(1).Info("marked fields already at the version; nothing to commit", "version", cfg.version)
		return strategy.Result{
			Reference: baseHash.String(),
			Message:   fmt.Sprintf("already at %s: %d marked field(s) on branch %s; nothing to commit", cfg.version, len(scan.Fields), cfg.base),
		}, nil
	}

	commit, err := co.commit(cfg.branch, commitMessage(cfg), scan.ChangedFiles, s.clock.Now())
	if err != nil {
		return strategy.Result{}, err
	}
	if commit.IsZero() {
		return strategy.Result{
			Reference: baseHash.String(),
			Message:   fmt.Sprintf("already at %s on branch %s; nothing to commit", cfg.version, cfg.base),
		}, nil
	}

	remote, err := co.remoteBranch(ctx, cfg.branch)
	if err != nil {
		return strategy.Result{}, err
	}
	pushed := commit
	same := false
	if !remote.IsZero() {
		if same, err = co.sameTree(ctx, cfg.branch, remote, commit); err != nil {
			return strategy.Result{}, err
		}
	}
	if same {
		pushed = remote
		logger.V(1).Info("branch already holds the change; not pushing", "commit", remote.String())
	} else {
		if err := co.push(ctx, cfg.branch); err != nil {
			return strategy.Result{}, err
		}
		logger.Info("pushed promotion branch", "commit", commit.String())
	}

	pr, err := provider.EnsurePullRequest(ctx, PullRequest{
		Head:  cfg.branch,
		Base:  cfg.base,
		Title: pullRequestTitle(cfg),
		Body:  withPreview(pullRequestBody(cfg, scan.Fields), pv),
	})
	if err != nil {
		err = fmt.Errorf("opening the pull request from %s into %s: %w", cfg.branch, cfg.base, err)
		if refusedByAPI(err) {
			return strategy.Result{}, strategy.Terminal(err)
		}
		return strategy.Result{}, err
	}
	verb := "pull request is open"
	switch {
	case pr.Created:
		verb = "opened pull request"
	case pr.Updated:
		verb = "updated pull request"
	}
	logger.Info(verb, "url", pr.URL)
	return strategy.Result{
		URL:       pr.URL,
		Reference: cfg.branch,
		Message:   fmt.Sprintf("%s %s (branch %s, commit %s)", verb, pr.URL, cfg.branch, shortHash(pushed.String())),
	}, nil
}

// resolve validates the request into settings; every error is terminal.
func resolve(req strategy.Request) (settings, error) {
	var cfg settings
	if req.Pipeline == nil || req.Promotion == nil {
		return cfg, configErrorf("pullRequest strategy: the request lacks its Pipeline or Promotion")
	}
	spec := req.Strategy.PullRequest
	if spec == nil {
		return cfg, configErrorf("pullRequest strategy: promotion.pullRequest is not set")
	}
	u, err := url.Parse(spec.URL)
	if err != nil || u.Host == "" {
		return cfg, configErrorf("pullRequest strategy: url %q is not a valid URL", redactedText(spec.URL))
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return cfg, configErrorf("pullRequest strategy: url scheme %q is not supported; use https://", u.Scheme)
	}

	u.User = nil
	u.RawQuery, u.Fragment = "", ""
	if spec.SecretRef.Name == "" {
		return cfg, configErrorf("pullRequest strategy: secretRef.name is required")
	}
	cfg = settings{
		spec:      spec,
		repoURL:   u,
		base:      spec.Branch,
		release:   req.Pipeline.Spec.Release,
		version:   req.Version,
		env:       req.Promotion.Spec.To,
		promotion: req.Promotion.Name,
		namespace: req.Pipeline.Namespace,
	}
	if cfg.base == "" {
		cfg.base = DefaultBranch
	}
	if cfg.namespace == "" {
		cfg.namespace = req.Promotion.Namespace
	}
	if cfg.version == "" {
		cfg.version = req.Promotion.Spec.Version
	}
	if cfg.env == "" && req.Environment != nil {
		cfg.env = req.Environment.Name
	}
	if cfg.release == "" {
		cfg.release = req.Pipeline.Name
	}
	if cfg.version == "" || cfg.env == "" {
		return cfg, configErrorf("pullRequest strategy: the promotion names no version or destination environment")
	}
	for _, t := range req.Targets {
		target := fmt.Sprintf("%s: %s/%s", t.SpokeName, t.Namespace, t.Release)
		if t.HelmRelease != nil {
			target += fmt.Sprintf(" (HelmRelease %s/%s)", t.HelmRelease.Namespace, t.HelmRelease.Name)
		}
		cfg.targets = append(cfg.targets, target)
	}
	cfg.key = markerKey{Pipeline: req.Pipeline.Namespace + "/" + req.Pipeline.Name, Environment: cfg.env}
	cfg.branch = fmt.Sprintf("tugboat/%s/%s/%s", req.Pipeline.Name, cfg.env, cfg.version)
	if req.RollbackFrom != "" {
		cfg.rollbackFrom = req.RollbackFrom
		cfg.branch = fmt.Sprintf("tugboat/%s/%s/rollback-%s-to-%s", req.Pipeline.Name, cfg.env, cfg.rollbackFrom, cfg.version)
	}
	return cfg, nil
}

func commitMessage(cfg settings) string {
	if cfg.rollbackFrom != "" {
		return fmt.Sprintf("Roll back %s from %s to %s in %s\n\nThe rollout of %s spent its failure budget (onFailure: Rollback).\nPipeline: %s\nPromotion: %s\n",
			cfg.release, cfg.rollbackFrom, cfg.version, cfg.env, cfg.rollbackFrom, cfg.key.Pipeline, cfg.promotion)
	}
	return fmt.Sprintf("Promote %s %s to %s\n\nPipeline: %s\nPromotion: %s\n",
		cfg.release, cfg.version, cfg.env, cfg.key.Pipeline, cfg.promotion)
}

// pullRequestTitle is the pull request's title: a promotion, or the
// revert of a failed rollout.
func pullRequestTitle(cfg settings) string {
	if cfg.rollbackFrom != "" {
		return fmt.Sprintf("Roll back %s from %s to %s in %s", cfg.release, cfg.rollbackFrom, cfg.version, cfg.env)
	}
	return fmt.Sprintf("Promote %s to %s in %s", cfg.release, cfg.version, cfg.env)
}

func pullRequestBody(cfg settings, fields []fieldChange) string {
	var b strings.Builder
	if cfg.rollbackFrom != "" {
		fmt.Fprintf(&b, "Tugboat rolls **%s** back from **%s** to **%s** in **%s**: the rollout of %s spent its failure budget (onFailure: Rollback). Merge it to return the targets to the version they ran.\n\n",
			cfg.release, cfg.rollbackFrom, cfg.version, cfg.env, cfg.rollbackFrom)
	} else {
		fmt.Fprintf(&b, "Tugboat promotes **%s** to **%s** in **%s**.\n\n", cfg.release, cfg.version, cfg.env)
	}
	fmt.Fprintf(&b, "- Pipeline: `%s`\n", cfg.key.Pipeline)
	fmt.Fprintf(&b, "- Promotion: `%s`\n", cfg.promotion)
	fmt.Fprintf(&b, "- Version: `%s`\n", cfg.version)
	if len(cfg.targets) > 0 {
		b.WriteString("- Targets:\n")
		for _, t := range cfg.targets {
			fmt.Fprintf(&b, "  - `%s`\n", t)
		}
	}
	b.WriteString("\nMarked fields:\n\n")
	for _, f := range fields {
		if f.Changed {
			fmt.Fprintf(&b, "- `%s` line %d: `%s` → `%s`\n", f.File, f.Line, f.Old, cfg.version)
		} else {
			fmt.Fprintf(&b, "- `%s` line %d: already `%s`\n", f.File, f.Line, cfg.version)
		}
	}
	return b.String()
}

func noMarkerError(cfg settings, malformed []string) error {
	path := cfg.spec.Path
	if path == "" {
		path = "/"
	}
	msg := fmt.Sprintf("no field marked for pipeline %s environment %s under path %s of branch %s",
		cfg.key.Pipeline, cfg.env, path, cfg.base)
	if len(malformed) > 0 {
		if len(malformed) > 5 {
			malformed = append(malformed[:5:5], "…")
		}
		msg += fmt.Sprintf(" (malformed tugboat markers ignored at %s)", strings.Join(malformed, ", "))
	}
	return strategy.Terminal(errors.New(msg))
}

func configErrorf(format string, args ...any) error {
	return strategy.Terminal(fmt.Errorf(format, args...))
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// redactedText removes user information from a URL-like string that did
// not parse.
func redactedText(s string) string {
	if i := strings.Index(s, "@"); i >= 0 {
		if j := strings.Index(s, "://"); j >= 0 && j < i {
			return s[:j+3] + "***@" + s[i+1:]
		}
	}
	return s
}
