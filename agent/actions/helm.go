package actions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/config"
)

// upgrade runs a Helm upgrade of the existing release a names to the chart
// version a asks for, unless the release is there already. It returns a
// message and the revision.
//
// Idempotency: a release whose latest revision is deployed at the version
// is left alone (Succeeded, no new revision). A pending revision that an
// earlier attempt of the same action left behind (the agent was killed
// mid-upgrade) is deleted once it is older than the pending grace, and the
// upgrade is run again: the action ends with one new revision. A release
// kept pending by anyone else fails the action after PendingWait.
func (e *Executor) upgrade(ctx context.Context, log logr.Logger, limits Limits, a wire.Action) (string, int, error) {
	key := a.Namespace + "/" + a.Release
	if err := limits.checkNamespace(a.Namespace); err != nil {
		return "", 0, err
	}
	if err := limits.checkSource(a.Chart.Repository, a.Chart.Name); err != nil {
		return "", 0, err
	}
	if _, err := semver.NewVersion(a.Version); err != nil {
		return "", 0, fmt.Errorf("version %q is not a semantic version", a.Version)
	}
	clock := newStageClock(e.now)
	defer clock.log(log)
	cfg, err := e.helmConfig(a.Namespace, a.Release)
	if err != nil {
		return "", 0, err
	}
	clock.mark(stageConfig)
	last, err := e.settle(ctx, log, cfg, a)
	clock.mark(stageSettle)
	if errors.Is(err, errNotInstalled) && e.opts.InstallMissing {
		return e.install(ctx, log, cfg, a)
	}
	if err != nil {
		return "", 0, err
	}
	if last.Info.Status == release.StatusDeployed && chartVersion(last) == a.Version {
		return fmt.Sprintf("release %s is already at chart version %s (revision %d)", key, a.Version, last.Version), last.Version, nil
	}
	current := last
	if last.Info.Status != release.StatusDeployed {
		if d, err := cfg.Releases.Deployed(a.Release); err == nil {
			current = d
		}
	}
	if err := checkChartName(chartName(current), a.Chart.Name, "release "+key); err != nil {
		return "", 0, err
	}
	if err := limits.checkVersion(chartVersion(current), a.Version); err != nil {
		return "", 0, err
	}

	ch, err := e.actionChart(ctx, a)
	if err != nil {
		return "", 0, err
	}
	if ctx.Err() != nil {
		return "", 0, abandoned(ctx)
	}
	clock.mark(stageChart)
	cfg.Releases.Driver = &createClock{Driver: cfg.Releases.Driver, onCreate: func() { clock.mark(stageRender) }}

	up := action.NewUpgrade(cfg)
	up.Namespace = a.Namespace
	up.Timeout = e.opts.UpgradeTimeout
	up.MaxHistory = e.opts.HistoryMax
	up.Wait = false
	if a.ValuesPolicy == wire.ValuesResetThenReuse {
		up.ResetThenReuseValues = true
	} else {
		up.ReuseValues = true
	}
	up.Description = description(a)
	up.Labels = map[string]string{LabelAction: a.ID}
	log.Info("Upgrading release", "from", chartVersion(current), "revision", last.Version, "valuesPolicy", valuesPolicy(a))
	// Once started, the upgrade runs to its end: canceling it would leave
	// a failed revision and, under Helm, resources still being applied.
	start := e.now()
	rediscovered := false
	for {
		rel, err := up.RunWithContext(context.WithoutCancel(ctx), a.Release, ch, nil)
		if err != nil && !rediscovered && !unreachableBeforeWrite(err) && e.unchanged(cfg, a.Release, last.Version) {
			// Helm failed before it wrote anything: perhaps on the view of
			// the spoke's APIs this agent keeps across actions (a CRD
			// created since, a schema changed). Once, with a fresh view.
			log.Info("Upgrade failed before it changed anything; discovering the spoke's APIs again and retrying once", "error", err.Error())
			e.apis.Invalidate()
			cfg.Capabilities = nil // Helm reads them again
			rediscovered = true
			continue
		}
		if err != nil && unreachableBeforeWrite(err) && e.now().Sub(start) < e.opts.PendingWait && e.unchanged(cfg, a.Release, last.Version) {
			// Helm validates the manifest against the API server's OpenAPI
			// document before it writes the new revision: a server that
			// restarted since the release was read (403 until RBAC loads)
			// fails that, with nothing written. Wait for it, as settle
			// does, rather than fail the promotion.
			log.Info("Cannot upgrade yet: the API server is not answering; retrying", "error", err.Error())
			// What was read of its APIs may hold the failure (the OpenAPI
			// client keeps its errors): read them again.
			e.apis.Invalidate()
			cfg.Capabilities = nil
			if err := sleep(ctx, pendingPoll); err != nil {
				return "", 0, abandoned(ctx)
			}
			continue
		}
		if err != nil && unreachableBeforeWrite(err) && e.now().Sub(start) < e.opts.PendingWait {
			// The API server went away after Helm wrote the pending
			// revision: Helm could record neither the outcome nor a
			// failure. Once the server answers again, this attempt's own
			// pending revision (this process's Run has returned: nothing
			// is applying it) is replaced and the upgrade runs again.
			if replaced := e.replaceInterrupted(ctx, log, cfg, a, start); replaced {
				continue
			}
		}
		if err != nil {
			rev := 0
			if rel != nil {
				rev = rel.Version
			}
			return "", rev, fmt.Errorf("upgrading release %s to %s %s: %w", key, a.Chart.Name, a.Version, err)
		}
		clock.mark(stageApply)
		return fmt.Sprintf("upgraded release %s to %s %s (revision %d)", key, a.Chart.Name, a.Version, rel.Version), rel.Version, nil
	}
}

// replaceInterrupted waits (within Options.PendingWait of since) until the
// API server answers, then deletes the release's latest revision when it is
// a pending revision of action a written since since, by this process's
// upgrade, which has returned: the API server went away mid-upgrade. It
// reports whether it did; any other latest revision (a failure Helm did
// record, another's operation) is left for the caller to report.
func (e *Executor) replaceInterrupted(ctx context.Context, log logr.Logger, cfg *action.Configuration, a wire.Action, since time.Time) bool {
	for e.now().Sub(since) < e.opts.PendingWait {
		last, err := cfg.Releases.Last(a.Release)
		if err != nil {
			if !transient(err) {
				return false
			}
			if err := sleep(ctx, pendingPoll); err != nil {
				return false
			}
			continue
		}
		if last.Info == nil || !last.Info.Status.IsPending() || last.Labels[LabelAction] != a.ID ||
			last.Info.LastDeployed.Time.Before(since.Add(-time.Second)) {
			return false
		}
		if _, err := cfg.Releases.Delete(last.Name, last.Version); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
			if transient(err) {
				if err := sleep(ctx, pendingPoll); err != nil {
					return false
				}
				continue
			}
			return false
		}
		log.Info("Replaced the pending revision an upgrade interrupted by the API server left; upgrading again", "revision", last.Version)
		return true
	}
	return false
}

// unreachableBeforeWrite reports whether err, from an upgrade, is the API
// server being away before Helm wrote anything: a transient error, or the
// OpenAPI download of Helm's validation failing (client-go reports a 403 or
// 503 there only as "failed to download openapi: unknown").
func unreachableBeforeWrite(err error) bool {
	return transient(err) || strings.Contains(err.Error(), "failed to download openapi")
}

// unchanged reports whether release's latest revision is still version (an
// upgrade that failed wrote nothing), read from the API server.
func (e *Executor) unchanged(cfg *action.Configuration, name string, version int) bool {
	last, err := cfg.Releases.Last(name)
	return err == nil && last.Version == version
}

// errNotInstalled marks a release that is not on the spoke.
var errNotInstalled = errors.New("not installed")

// install installs the chart version as a new release, for a promotion
// into an environment that does not run the release yet. Limits were
// checked by the caller (namespace, chart source; there is no downgrade).
// A pending-install an earlier attempt of the action left behind is
// replaced by settle before this runs, so the action installs once.
func (e *Executor) install(ctx context.Context, log logr.Logger, cfg *action.Configuration, a wire.Action) (string, int, error) {
	key := a.Namespace + "/" + a.Release
	ch, err := e.actionChart(ctx, a)
	if err != nil {
		return "", 0, err
	}
	in := action.NewInstall(cfg)
	// The namespace must exist: the agent creates none (and needs no
	// cluster-wide right to).
	in.ReleaseName, in.Namespace, in.CreateNamespace = a.Release, a.Namespace, false
	in.Timeout, in.Wait = e.opts.UpgradeTimeout, false
	in.Description = strings.Replace(description(a), "Upgrade", "Install", 1)
	in.Labels = map[string]string{LabelAction: a.ID}
	log.Info("Installing release (not on this spoke yet)", "version", a.Version)
	rel, err := in.RunWithContext(context.WithoutCancel(ctx), ch, nil)
	if err != nil {
		rev := 0
		if rel != nil {
			rev = rel.Version
		}
		return "", rev, fmt.Errorf("installing release %s %s %s: %w", key, a.Chart.Name, a.Version, err)
	}
	return fmt.Sprintf("installed release %s %s %s (revision %d)", key, a.Chart.Name, a.Version, rel.Version), rel.Version, nil
}

// settle returns the release's latest revision once it is not pending; see
// upgrade for how pending revisions are handled.
func (e *Executor) settle(ctx context.Context, log logr.Logger, cfg *action.Configuration, a wire.Action) (*release.Release, error) {
	key := a.Namespace + "/" + a.Release
	grace := e.opts.pendingGrace()
	start := e.now()
	for {
		last, err := cfg.Releases.Last(a.Release)
		switch {
		case errors.Is(err, driver.ErrReleaseNotFound):
			return nil, fmt.Errorf("release %s does not exist on this spoke: %w", key, errNotInstalled)
		case err != nil && transient(err) && e.now().Sub(start) < e.opts.PendingWait:
			// The spoke's API server is restarting or overloaded: nothing
			// was changed yet, so wait for it rather than fail the
			// promotion (at most PendingWait).
			log.Info("Cannot read the release yet; retrying", "error", err.Error())
			if err := sleep(ctx, pendingPoll); err != nil {
				return nil, abandoned(ctx)
			}
			continue
		case err != nil:
			return nil, fmt.Errorf("reading release %s: %w", key, err)
		case last.Info == nil:
			return nil, fmt.Errorf("release %s has no status", key)
		case last.Info.Status == release.StatusUninstalling:
			return nil, fmt.Errorf("release %s does not exist on this spoke (%s)", key, last.Info.Status)
		case last.Info.Status == release.StatusUninstalled:
			return nil, fmt.Errorf("release %s does not exist on this spoke (%s): %w", key, last.Info.Status, errNotInstalled)
		case !last.Info.Status.IsPending():
			return last, nil
		}
		if leftBy(last, a) {
			age := e.now().Sub(last.Info.LastDeployed.Time)
			if age >= grace {
				log.Info("Replacing the pending revision an earlier attempt of this action left (the agent stopped mid-upgrade)",
					"revision", last.Version, "status", last.Info.Status, "age", age.Round(1e9).String())
				if _, err := cfg.Releases.Delete(last.Name, last.Version); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
					return nil, fmt.Errorf("removing the abandoned pending revision %d of release %s: %w", last.Version, key, err)
				}
				continue
			}
			log.V(1).Info("Release pending from an earlier attempt of this action; waiting", "revision", last.Version, "age", age.String(), "grace", grace.String())
		} else if waited := e.now().Sub(start); waited >= e.opts.PendingWait {
			return nil, fmt.Errorf("release %s has another operation in progress (%s at revision %d) that did not finish within %s; not upgrading",
				key, last.Info.Status, last.Version, e.opts.PendingWait)
		}
		if err := sleep(ctx, pendingPoll); err != nil {
			return nil, abandoned(ctx)
		}
	}
}

// helmConfig returns a Helm action configuration for the namespace, using
// the storage driver (Secrets, else ConfigMaps) that holds the release.
func (e *Executor) helmConfig(namespace, name string) (*action.Configuration, error) {
	getter := viewGetter{RESTClientGetter: config.Target{RESTConfig: e.rest, Namespace: namespace, Discovery: e.apis}.Getter(), apis: e.apis}
	debug := func(format string, v ...any) { e.log.V(2).Info(fmt.Sprintf(format, v...)) }
	// Unknown (the API server cannot be read now): Helm reads them itself
	// when it needs them, failing the way the callers wait out.
	caps, err := e.apis.capabilities()
	if err != nil {
		e.apis.Invalidate()
		caps = nil
	}
	var first *action.Configuration
	for _, d := range []string{"secret", "configmap"} {
		cfg := new(action.Configuration)
		if err := cfg.Init(getter, namespace, d, debug); err != nil {
			return nil, fmt.Errorf("helm: %w", err)
		}
		// Set, Helm does not discover the cluster again for this action.
		cfg.Capabilities = caps
		e.keepFieldValidation(cfg)
		if _, err := cfg.Releases.History(name); err == nil {
			return cfg, nil
		}
		if first == nil {
			first = cfg
		}
	}
	// In neither: the Secret driver (Helm's default) reports it.
	return first, nil
}

// description is the Helm revision's description: who made it and why.
func description(a wire.Action) string {
	d := "Upgrade by tugboat action " + a.ID
	if a.Promotion != "" {
		d += " (promotion " + a.Promotion + ")"
	}
	return d
}

func valuesPolicy(a wire.Action) string {
	if a.ValuesPolicy == "" {
		return wire.ValuesReuse
	}
	return a.ValuesPolicy
}

// checkChartName refuses an action that would replace what runs (of chart
// have) with another chart (want): a promotion moves a release to another
// version of its own chart, never to a different application. Nothing is
// compared when have is unknown.
func checkChartName(have, want, what string) error {
	if have == "" || want == "" || have == want {
		return nil
	}
	return refuse("chart %s is not the chart of %s (%s): an action may change the version of a release's chart, never the chart", want, what, have)
}

func chartName(r *release.Release) string {
	if r == nil || r.Chart == nil || r.Chart.Metadata == nil {
		return ""
	}
	return r.Chart.Metadata.Name
}

func chartVersion(r *release.Release) string {
	if r == nil || r.Chart == nil || r.Chart.Metadata == nil {
		return ""
	}
	return r.Chart.Metadata.Version
}

// abandoned is the error of an action given up because ctx ended before
// anything changed.
func abandoned(ctx context.Context) error {
	return fmt.Errorf("%w: %w", ErrAbandoned, context.Cause(ctx))
}
