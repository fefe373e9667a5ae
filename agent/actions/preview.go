package actions

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"tugboat.dev/tugboat/agent/actions/preview"
	"tugboat.dev/tugboat/api/wire"
)

// checkPreview rejects a preview action missing what it needs. Like every
// type but an upgrade, it sets no Version: what it renders is in Preview.
func checkPreview(a wire.Action) error {
	var errs []error
	if a.Namespace == "" || a.Release == "" {
		errs = append(errs, errors.New("namespace and release are required"))
	}
	if a.Version != "" {
		errs = append(errs, errors.New("a preview sets no version (it is in preview.version)"))
	}
	p := a.Preview
	if p == nil {
		return errors.Join(append(errs, errors.New("preview is required"))...)
	}
	if p.Version == "" {
		errs = append(errs, errors.New("preview.version is required"))
	}
	if p.Chart.Repository == "" || p.Chart.Name == "" {
		errs = append(errs, errors.New("preview.chart repository and name are required"))
	}
	switch p.ValuesPolicy {
	case "", wire.ValuesReuse, wire.ValuesResetThenReuse:
	default:
		errs = append(errs, fmt.Errorf("unknown values policy %q (want %s or %s)", p.ValuesPolicy, wire.ValuesReuse, wire.ValuesResetThenReuse))
	}
	return errors.Join(errs...)
}

// executePreview carries out a preview action: it renders the version with
// the release's live values, exactly as the upgrade would apply them, and
// answers the change against the live release. It changes nothing on the
// spoke (a dry run writes no revision) and is bound by the same limits as
// an upgrade.
func (e *Executor) executePreview(ctx context.Context, log logr.Logger, a wire.Action) (wire.ActionOutcome, error) {
	out := wire.ActionOutcome{ID: a.ID}
	res, err := e.previewChange(ctx, log, a)
	var r *refusal
	switch {
	case err == nil:
		out.Result, out.Preview = wire.ActionSucceeded, res
		out.Message = fmt.Sprintf("previewed %s %s: %d objects and %d lines change", a.Preview.Chart.Name, a.Preview.Version, res.ObjectsChanged, res.LinesChanged)
		log.Info("Preview computed", "objectsChanged", res.ObjectsChanged, "linesChanged", res.LinesChanged, "dryRun", res.DryRun, "truncated", res.Truncated)
	case ctx.Err() != nil && errors.Is(err, ErrAbandoned):
		return wire.ActionOutcome{}, ErrAbandoned
	case errors.As(err, &r):
		out.Result, out.Message = wire.ActionRefused, r.msg
		log.Info("Preview refused: outside this spoke's limits", "reason", r.msg)
	default:
		out.Result, out.Message = wire.ActionFailed, err.Error()
		log.Error(err, "Preview failed")
	}
	out.Time = e.now().UTC()
	return out, nil
}

// previewChange renders and compares; see executePreview.
func (e *Executor) previewChange(ctx context.Context, log logr.Logger, a wire.Action) (*wire.PreviewResult, error) {
	if err := checkPreview(a); err != nil {
		return nil, fmt.Errorf("invalid action: %w", err)
	}
	limits, err := e.limits.get()
	if err != nil {
		return nil, refuse("the limits file %s cannot be used, so every action is refused: %v", e.opts.LimitsFile, err)
	}
	p := a.Preview
	key := a.Namespace + "/" + a.Release
	if err := limits.checkNamespace(a.Namespace); err != nil {
		return nil, err
	}
	if err := limits.checkSource(p.Chart.Repository, p.Chart.Name); err != nil {
		return nil, err
	}
	if _, err := semver.NewVersion(p.Version); err != nil {
		return nil, fmt.Errorf("version %q is not a semantic version", p.Version)
	}
	cfg, err := e.helmConfig(a.Namespace, a.Release)
	if err != nil {
		return nil, err
	}
	live, err := cfg.Releases.Deployed(a.Release)
	if err != nil {
		if errors.Is(err, driver.ErrNoDeployedReleases) || errors.Is(err, driver.ErrReleaseNotFound) {
			return nil, fmt.Errorf("release %s has no deployed revision on this spoke: nothing to compare with", key)
		}
		return nil, fmt.Errorf("reading release %s: %w", key, err)
	}
	if err := checkChartName(chartName(live), p.Chart.Name, "release "+key); err != nil {
		return nil, err
	}
	if err := limits.checkVersion(chartVersion(live), p.Version); err != nil {
		return nil, err
	}
	ch, err := e.actionChart(ctx, wire.Action{Chart: p.Chart, Version: p.Version})
	if err != nil {
		return nil, err
	}
	next, mode, err := e.dryRun(ctx, log, cfg, a, ch)
	if err != nil {
		return nil, err
	}
	liveValues, err := chartutil.CoalesceValues(live.Chart, live.Config)
	if err != nil {
		return nil, fmt.Errorf("computing the live values of %s: %w", key, err)
	}
	// The upgrade's render left the values it used in the chart (reuse) or
	// in the release's config (reset-then-reuse): coalesced, they are
	// what the upgrade would apply.
	nextValues, err := chartutil.CoalesceValues(next.Chart, next.Config)
	if err != nil {
		return nil, fmt.Errorf("computing the promoted values of %s: %w", key, err)
	}
	res, err := preview.Compute(preview.Input{
		Namespace:    a.Namespace,
		LiveManifest: live.Manifest, NewManifest: next.Manifest,
		LiveValues: liveValues, NewValues: nextValues,
	})
	if err != nil {
		return nil, fmt.Errorf("comparing the renders of %s: %w", key, err)
	}
	res.FromVersion, res.Revision, res.DryRun = chartVersion(live), live.Version, mode
	preview.Fit(res, preview.MaxEncoded)
	return res, nil
}

// dryRun renders ch as the upgrade of a would (same values policy), with
// Helm's server-side dry run (lookups and validation against the spoke's
// API server), or a client render when the spoke's RBAC refuses the server
// one. Nothing is written.
func (e *Executor) dryRun(ctx context.Context, log logr.Logger, cfg *action.Configuration, a wire.Action, ch *chart.Chart) (*release.Release, string, error) {
	key := a.Namespace + "/" + a.Release
	run := func(mode string) (*release.Release, error) {
		up := action.NewUpgrade(cfg)
		up.Namespace = a.Namespace
		up.DryRun, up.DryRunOption = true, mode
		up.Timeout = e.opts.UpgradeTimeout
		if a.Preview.ValuesPolicy == wire.ValuesResetThenReuse {
			up.ResetThenReuseValues = true
		} else {
			up.ReuseValues = true
		}
		// The render writes the values it reuses into ch (fetched for
		// this action alone), where previewChange reads them back.
		return up.RunWithContext(ctx, a.Release, ch, nil)
	}
	rel, err := run(wire.DryRunServer)
	mode := wire.DryRunServer
	if err != nil && (apierrors.IsForbidden(err) || strings.Contains(err.Error(), "forbidden")) {
		log.Info("The server-side dry run is not allowed here; rendering on the client", "error", err.Error())
		rel, err = run(wire.DryRunClient)
		mode = wire.DryRunClient
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", abandoned(ctx)
		}
		return nil, "", fmt.Errorf("rendering release %s at %s %s: %w", key, a.Preview.Chart.Name, a.Preview.Version, err)
	}
	return rel, mode, nil
}
