package actions

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/wire"
)

// LabelAction is the Helm release label an upgrade made by an action
// carries: the action's id. It tells, after a restart, a pending revision
// of ours from somebody else's.
const LabelAction = "tugboat.dev/action"

// FieldManager is the server-side apply field manager of HelmRelease
// changes.
const FieldManager = "tugboat"

// pendingPoll is how often a pending release is re-read.
const pendingPoll = time.Second

// ErrAbandoned is returned by Execute when its context ended before the
// action was carried out: nothing was changed and no outcome is due.
var ErrAbandoned = errors.New("actions: abandoned before it was carried out")

// Executor carries out actions on the spoke's own cluster, within the
// spoke's limits. It is safe for concurrent use, but two actions on the same
// release must not run at once (the Poller serializes them).
type Executor struct {
	rest   *rest.Config
	client client.Client // uncached: HelmReleases and the credentials Secret
	limits *limitsSource
	opts   Options
	log    logr.Logger
	http   *http.Client
	now    func() time.Time
	apis   *apis // what the spoke serves, shared by every action
	// fieldValidation keeps what Helm's validator reads from the spoke's
	// OpenAPI v3 documents, by document hash, across views of its APIs
	// (nil: none kept, Helm's validator as it is).
	fieldValidation *fieldValidation
	charts          *chartCache // nil: none kept
	indexes         *indexCache // nil: none kept
}

// NewExecutor returns an Executor for the cluster cfg reaches.
func NewExecutor(cfg *rest.Config, opts Options, log logr.Logger) (*Executor, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("actions: creating a client: %w", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	apis, err := newAPIs(cfg, time.Now)
	if err != nil {
		return nil, err
	}
	var charts *chartCache
	if opts.ChartCacheSize > 0 {
		charts = newChartCache(opts.ChartCacheSize)
	}
	var indexes *indexCache
	if opts.IndexCacheSize > 0 {
		indexes = newIndexCache(opts.IndexCacheSize)
	}
	return &Executor{
		apis:            apis,
		fieldValidation: newFieldValidation(),
		charts:          charts,
		indexes:         indexes,
		rest:            rest.CopyConfig(cfg),
		client:          c,
		limits:          &limitsSource{flags: opts.Limits, path: opts.LimitsFile},
		opts:            opts,
		log:             log,
		http:            &http.Client{Transport: transport, Timeout: chartFetchTimeout},
		now:             time.Now,
	}, nil
}

// Execute carries out a, or refuses it, and returns the outcome to report.
// It returns ErrAbandoned (and no outcome) only when ctx ended before
// anything was changed; once an upgrade has started it runs to completion
// even if ctx ends, so that a shutdown does not leave a failed revision.
func (e *Executor) Execute(ctx context.Context, a wire.Action) (wire.ActionOutcome, error) {
	log := e.log.WithValues("action", a.ID, "promotion", a.Promotion, "namespace", a.Namespace, "release", a.Release, "version", a.Version)
	if a.TypeOf() == wire.ActionPreview {
		return e.executePreview(ctx, log.WithValues("type", wire.ActionPreview), a)
	}
	res, msg, rev, err := e.execute(ctx, log, a)
	if err != nil && ctx.Err() != nil && errors.Is(err, ErrAbandoned) {
		return wire.ActionOutcome{}, ErrAbandoned
	}
	if res != wire.ActionSucceeded {
		// The view of the spoke's APIs may hold what failed (a cached
		// error, a kind served since): the next action reads it again.
		e.apis.Invalidate()
	}
	out := wire.ActionOutcome{ID: a.ID, Result: res, Message: msg, Revision: rev, Time: e.now().UTC()}
	switch res {
	case wire.ActionSucceeded:
		log.Info("Action succeeded", "message", msg, "revision", rev)
	case wire.ActionRefused:
		log.Info("Action refused: outside this spoke's limits", "reason", msg)
	default:
		log.Error(err, "Action failed", "message", msg)
	}
	return out, nil
}

// execute returns the result, message and revision of a; err is the
// failure behind a Failed result.
func (e *Executor) execute(ctx context.Context, log logr.Logger, a wire.Action) (string, string, int, error) {
	if err := checkAction(a); err != nil {
		return wire.ActionFailed, "invalid action: " + err.Error(), 0, err
	}
	e.apis.begin()
	limits, err := e.limits.get()
	if err != nil {
		return wire.ActionRefused, fmt.Sprintf("the limits file %s cannot be used, so every action is refused: %v", e.opts.LimitsFile, err), 0, nil
	}
	var rev int
	var msg string
	switch {
	case a.TypeOf() == wire.ActionRollback:
		msg, rev, err = e.rollback(ctx, log, limits, a)
	case a.TypeOf() == wire.ActionHelmTest:
		msg, rev, err = e.helmTest(ctx, log, limits, a)
	case a.HelmRelease != nil:
		msg, err = e.setHelmReleaseVersion(ctx, log, limits, a)
	default:
		msg, rev, err = e.upgrade(ctx, log, limits, a)
	}
	var r *refusal
	switch {
	case err == nil:
		return wire.ActionSucceeded, msg, rev, nil
	case errors.As(err, &r):
		return wire.ActionRefused, r.msg, 0, nil
	default:
		return wire.ActionFailed, err.Error(), rev, err
	}
}

// checkAction rejects an action missing what every action needs.
func checkAction(a wire.Action) error {
	switch t := a.TypeOf(); t {
	case wire.ActionUpgrade:
	case wire.ActionRollback:
		return checkRollback(a)
	case wire.ActionHelmTest:
		return checkHelmTest(a)
	default:
		return fmt.Errorf("this agent does not carry out %q actions (it knows: %s, %s, %s)", t, wire.ActionUpgrade, wire.ActionRollback, wire.ActionHelmTest)
	}
	var errs []error
	if a.Namespace == "" || a.Release == "" {
		errs = append(errs, errors.New("namespace and release are required"))
	}
	if a.Version == "" {
		errs = append(errs, errors.New("version is required"))
	}
	switch a.ValuesPolicy {
	case "", wire.ValuesReuse, wire.ValuesResetThenReuse:
	default:
		errs = append(errs, fmt.Errorf("unknown values policy %q (want %s or %s)", a.ValuesPolicy, wire.ValuesReuse, wire.ValuesResetThenReuse))
	}
	if a.HelmRelease == nil && (a.Chart.Repository == "" || a.Chart.Name == "") {
		errs = append(errs, errors.New("chart repository and name are required"))
	}
	if a.HelmRelease != nil && a.HelmRelease.Name == "" {
		errs = append(errs, errors.New("helmRelease.name is required"))
	}
	if a.Rollback != nil {
		errs = append(errs, errors.New("rollback is set only on a rollback action"))
	}
	if a.HelmTest != nil {
		errs = append(errs, errors.New("helmTest is set only on a helm test action"))
	}
	return errors.Join(errs...)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
