package actions

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"tugboat.dev/tugboat/api/wire"
)

// A rollback action (wire.ActionRollback) undoes what one upgrade action of
// a promotion changed: a rollout whose failure budget was spent with
// onFailure Rollback returns every target it changed to the revision it
// ran before.
//
// Limits: the namespace limit applies as to an upgrade. No chart is
// fetched (Helm rolls back to the chart stored in the release's own
// history), so the chart source limit has nothing to judge. The downgrade
// limit does not apply: a rollback returns to a version the spoke already
// ran, and only ever undoes the promotion's own change: a release is
// rolled back only while its latest revision is the one the undone
// upgrade made (the first to carry its LabelAction), and a HelmRelease only while it asks for
// the version that upgrade set. Anything else (a person upgraded or rolled
// back since) is Refused, never overwritten.

// checkRollback rejects a rollback action missing what it needs.
func checkRollback(a wire.Action) error {
	var errs []error
	if a.Namespace == "" || a.Release == "" {
		errs = append(errs, errors.New("namespace and release are required"))
	}
	if a.Version != "" {
		errs = append(errs, errors.New("a rollback sets no version (rollback.version is the version it returns to)"))
	}
	r := a.Rollback
	if r == nil {
		return errors.Join(append(errs, errors.New("rollback is required"))...)
	}
	if r.Version == "" {
		errs = append(errs, errors.New("rollback.version is required"))
	}
	if a.HelmRelease != nil {
		if a.HelmRelease.Name == "" {
			errs = append(errs, errors.New("helmRelease.name is required"))
		}
		if r.From == "" {
			errs = append(errs, errors.New("rollback.from is required for a HelmRelease"))
		}
		return errors.Join(errs...)
	}
	if r.Revision < 1 {
		errs = append(errs, errors.New("rollback.revision must be at least 1"))
	}
	if r.Undoes == "" {
		errs = append(errs, errors.New("rollback.undoes is required"))
	}
	return errors.Join(errs...)
}

// rollback carries out a rollback action: a Helm rollback to
// a.Rollback.Revision, or, for a Flux HelmRelease, its chart version set
// back to a.Rollback.Version. It returns a message and the revision the
// rollback made (0 for a HelmRelease, whose controller makes it).
//
// Idempotency: a release whose latest revision is deployed at the version
// returned to is left alone (Succeeded, no new revision), so a redelivery
// or a restart after the rollback makes none. A pending-rollback revision
// an earlier attempt left (Helm's "Rollback to N" at that version) is
// replaced after the pending grace, as an interrupted upgrade is.
func (e *Executor) rollback(ctx context.Context, log logr.Logger, limits Limits, a wire.Action) (string, int, error) {
	r := a.Rollback
	if a.HelmRelease != nil {
		msg, err := e.applyHelmReleaseVersion(ctx, log, limits, a, r.Version, func(_ *unstructured.Unstructured, was string) error {
			if was != r.From {
				return refuse("HelmRelease %s/%s asks for chart version %s, not %s that the promotion set: it changed since, and a rollback never overwrites that",
					a.HelmRelease.Namespace, a.HelmRelease.Name, orUnset(was), r.From)
			}
			return nil
		})
		return msg, 0, err
	}
	key := a.Namespace + "/" + a.Release
	if err := limits.checkNamespace(a.Namespace); err != nil {
		return "", 0, err
	}
	cfg, err := e.helmConfig(a.Namespace, a.Release)
	if err != nil {
		return "", 0, err
	}
	last, err := e.settle(ctx, log, cfg, a)
	if err != nil {
		return "", 0, err
	}
	if last.Info.Status == release.StatusDeployed && chartVersion(last) == r.Version {
		return fmt.Sprintf("release %s already runs chart version %s (revision %d): nothing to roll back", key, r.Version, last.Version), last.Version, nil
	}
	if !madeBy(cfg, last, r.Undoes) {
		return "", 0, refuse("release %s changed since the promotion's upgrade: its latest revision %d (chart version %s, %s) is not the one action %s made, and a rollback never overwrites that",
			key, last.Version, chartVersion(last), last.Info.Status, r.Undoes)
	}
	target, err := cfg.Releases.Get(a.Release, r.Revision)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		return "", 0, fmt.Errorf("release %s has no revision %d to roll back to (its history no longer holds it)", key, r.Revision)
	case err != nil:
		return "", 0, fmt.Errorf("reading revision %d of release %s: %w", r.Revision, key, err)
	case chartVersion(target) != r.Version:
		return "", 0, refuse("revision %d of release %s runs chart version %s, not %s as the hub recorded: not rolling back to it",
			r.Revision, key, chartVersion(target), r.Version)
	}
	if ctx.Err() != nil {
		return "", 0, abandoned(ctx)
	}

	rb := action.NewRollback(cfg)
	rb.Version = r.Revision
	rb.Timeout = e.opts.UpgradeTimeout
	rb.MaxHistory = e.opts.HistoryMax
	rb.Wait = false
	log.Info("Rolling back release", "from", chartVersion(last), "revision", last.Version, "to", r.Version, "toRevision", r.Revision)
	// Like an upgrade, once started it runs to its end (Run takes no
	// context).
	if err := rb.Run(a.Release); err != nil {
		rev := 0
		if l, lerr := cfg.Releases.Last(a.Release); lerr == nil && l.Version > last.Version {
			rev = l.Version
		}
		return "", rev, fmt.Errorf("rolling back release %s to revision %d (%s): %w", key, r.Revision, r.Version, err)
	}
	made, err := cfg.Releases.Last(a.Release)
	if err != nil {
		return "", 0, fmt.Errorf("reading release %s after its rollback: %w", key, err)
	}
	return fmt.Sprintf("rolled back release %s to revision %d, chart version %s (revision %d)", key, r.Revision, r.Version, made.Version), made.Version, nil
}

// madeBy reports whether last is the revision action id made: it carries
// the action's label and the revision before it does not (Helm copies a
// release's labels into the revisions that follow, so a person's upgrade
// after the action's carries the label too). A previous revision that the
// history no longer holds does not count against it.
func madeBy(cfg *action.Configuration, last *release.Release, id string) bool {
	if last.Labels[LabelAction] != id {
		return false
	}
	prev, err := cfg.Releases.Get(last.Name, last.Version-1)
	return errors.Is(err, driver.ErrReleaseNotFound) || err == nil && prev.Labels[LabelAction] != id
}

// rollbackDescription is the description Helm gives the revision a
// rollback to revision makes.
func rollbackDescription(revision int) string { return fmt.Sprintf("Rollback to %d", revision) }

// leftBy reports whether the pending revision last was left by an earlier
// attempt of action a: an upgrade's carries the action's id (LabelAction)
// and version; a rollback's (which Helm labels as the revision it copies)
// is Helm's "Rollback to N" at the version revision N runs.
func leftBy(last *release.Release, a wire.Action) bool {
	if a.TypeOf() == wire.ActionRollback {
		return a.Rollback != nil && last.Info.Description == rollbackDescription(a.Rollback.Revision) && chartVersion(last) == a.Rollback.Version
	}
	return last.Labels[LabelAction] == a.ID && chartVersion(last) == a.Version
}
