package fluxtest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// HelmReleaseGVK is Flux's HelmRelease (helm.toolkit.fluxcd.io/v2).
var HelmReleaseGVK = schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"}

// HelmController stands in for Flux helm-controller on one spoke, for one
// HelmRelease, and reconciles as helm-controller v1.6 does (internal/
// controller reconcileRelease, internal/reconcile AtomicRelease): on a new
// generation, and every spec.interval however nothing changed, it sets
// Reconciling=True ("Fulfilling prerequisites") and keeps Ready as it was
// while it loads the chart (Prerequisites here; the real one takes
// milliseconds to seconds). When the HelmRelease's spec.chart.spec.version
// differs from the installed release, it sets Ready=Unknown and Reconciling
// "Running 'upgrade' action" and upgrades (Upgrade):
//
//   - when the upgrade succeeds, it writes the status helm-controller writes
//     after a successful release (markReleased), which the spoke's agent
//     folds into the release's health; when spec and release agree, it finds
//     the release in sync and removes Reconciling;
//   - when the upgrade fails, it remediates as upgrade.remediation
//     {remediateLastFailure: true} with no retry: Released=False with the
//     failure, Reconciling "Running 'rollback' action", a rollback to the
//     revision before (Rollback), and, out of retries, it stalls
//     (markStalled). It tries again only on a new generation.
//
// Create it with the fields below set and call Run, usually in a goroutine.
type HelmController struct {
	// Client reaches the spoke's API server.
	Client client.Client
	// Key names the HelmRelease.
	Key client.ObjectKey
	// Release returns the Helm release as stored now.
	Release func() (*release.Release, error)
	// Upgrade upgrades the release to version; an error is a failed
	// upgrade, which helm-controller remediates.
	Upgrade func(ctx context.Context, version string) error
	// Rollback rolls the release back to revision, after a failed upgrade.
	Rollback func(ctx context.Context, revision int) error
	// Logf logs what went wrong (t.Logf).
	Logf func(format string, args ...any)
	// Prerequisites is how long loading the chart takes (150ms when zero).
	Prerequisites time.Duration
	// Reconciles, when set, counts the reconciles.
	Reconciles *atomic.Int64
}

// Run reconciles until ctx ends, looking at the HelmRelease every 50ms.
func (h *HelmController) Run(ctx context.Context) {
	prerequisites := h.Prerequisites
	if prerequisites == 0 {
		prerequisites = 150 * time.Millisecond
	}
	logf := func(format string, args ...any) {
		if ctx.Err() == nil && h.Logf != nil {
			h.Logf("helm-controller stand-in: HelmRelease %s: "+format, append([]any{h.Key}, args...)...)
		}
	}
	var last time.Time // the last reconcile
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		hr := &unstructured.Unstructured{}
		hr.SetGroupVersionKind(HelmReleaseGVK)
		if err := h.Client.Get(ctx, h.Key, hr); err != nil {
			continue
		}
		want, _, _ := unstructured.NestedString(hr.Object, "spec", "chart", "spec", "version")
		observed, _, _ := unstructured.NestedInt64(hr.Object, "status", "observedGeneration")
		if want == "" || (observed == hr.GetGeneration() && time.Since(last) < Interval(hr)) {
			continue
		}
		last = time.Now()
		if h.Reconciles != nil {
			h.Reconciles.Add(1)
		}
		if err := SetConditions(ctx, h.Client, h.Key, Condition("Reconciling", "True", "Progressing", "Fulfilling prerequisites")); err != nil {
			logf("%v", err)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(prerequisites):
		}
		rel, err := h.Release()
		if err != nil {
			continue
		}
		if rel.Chart.Metadata.Version != want {
			const running = "Running 'upgrade' action with timeout of 5m0s"
			if err := SetConditions(ctx, h.Client, h.Key, Condition("Reconciling", "True", "Progressing", running),
				Condition("Ready", "Unknown", "Progressing", running)); err != nil {
				logf("%v", err)
				continue
			}
			if err := h.Upgrade(ctx, want); err != nil {
				if ctx.Err() == nil {
					h.remediate(ctx, rel, want, err, logf)
				}
				continue
			}
			if rel, err = h.Release(); err != nil || rel.Chart.Metadata.Version != want {
				continue // the upgrade is not done yet: the next reconcile looks again
			}
		}
		if err := h.Client.Get(ctx, h.Key, hr); err != nil {
			continue
		}
		if observed, _, _ = unstructured.NestedInt64(hr.Object, "status", "observedGeneration"); observed != hr.GetGeneration() || rel.Version > HistoryVersion(hr) {
			if err := markReleased(ctx, h.Client, hr, rel); err != nil {
				logf("writing the status: %v", err)
			}
			continue
		}
		// In sync: Reconciling goes, Ready stays as it was.
		if err := SetConditions(ctx, h.Client, h.Key, map[string]any{"type": "Reconciling"}); err != nil {
			logf("%v", err)
		}
	}
}

// remediate follows the failed upgrade of rel to version (upgradeErr): it
// records the failure, rolls back to rel and stalls, as helm-controller does
// out of retries.
func (h *HelmController) remediate(ctx context.Context, rel *release.Release, version string, upgradeErr error, logf func(string, ...any)) {
	failure := fmt.Sprintf("Helm upgrade failed for release %s/%s with chart %s@%s: %v", rel.Namespace, rel.Name, rel.Chart.Metadata.Name, version, upgradeErr)
	if err := SetConditions(ctx, h.Client, h.Key, Condition("Released", "False", helmv2.UpgradeFailedReason, failure),
		Condition("Reconciling", "True", "Progressing", "Running 'rollback' action with timeout of 5m0s")); err != nil {
		logf("%v", err)
	}
	if err := h.Rollback(ctx, rel.Version); err != nil {
		logf("rolling back: %v", err)
		return
	}
	rolledBack := fmt.Sprintf("Helm rollback to previous release %s/%s.v%d with chart %s@%s succeeded", rel.Namespace, rel.Name, rel.Version, rel.Chart.Metadata.Name, rel.Chart.Metadata.Version)
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(HelmReleaseGVK)
	if err := h.Client.Get(ctx, h.Key, hr); err != nil {
		logf("%v", err)
		return
	}
	if err := markStalled(ctx, h.Client, hr, version, failure, rolledBack); err != nil {
		logf("%v", err)
	}
}

// Interval is the HelmRelease's spec.interval (5m when unset or not a
// duration).
func Interval(hr *unstructured.Unstructured) time.Duration {
	s, _, _ := unstructured.NestedString(hr.Object, "spec", "interval")
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d
	}
	return 5 * time.Minute
}

// HistoryVersion is the Helm revision of the HelmRelease's latest
// status.history entry (0 when none).
func HistoryVersion(hr *unstructured.Unstructured) int {
	history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
	if len(history) == 0 {
		return 0
	}
	latest, _ := history[0].(map[string]any)
	v, _, _ := unstructured.NestedInt64(latest, "version")
	return int(v)
}

// Condition is a HelmRelease condition as helm-controller writes it, for the
// generation it reconciles (filled in by SetConditions).
func Condition(typ, status, reason, msg string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}
}

// SetConditions sets conds on the HelmRelease's status.conditions,
// replacing those of the same type, and keeps the others; a condition
// with only a type is removed. It retries on conflicts.
func SetConditions(ctx context.Context, c client.Client, key client.ObjectKey, conds ...map[string]any) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		hr := &unstructured.Unstructured{}
		hr.SetGroupVersionKind(HelmReleaseGVK)
		if err := c.Get(ctx, key, hr); err != nil {
			return err
		}
		now := time.Now().UTC().Format(time.RFC3339)
		existing, _, _ := unstructured.NestedSlice(hr.Object, "status", "conditions")
		for _, want := range conds {
			kept := existing[:0:0]
			for _, e := range existing {
				if m, ok := e.(map[string]any); !ok || m["type"] != want["type"] {
					kept = append(kept, e)
				}
			}
			existing = kept
			if _, ok := want["status"]; ok {
				cond := map[string]any{"observedGeneration": hr.GetGeneration(), "lastTransitionTime": now}
				for k, v := range want {
					cond[k] = v
				}
				existing = append(existing, cond)
			}
		}
		if err := unstructured.SetNestedSlice(hr.Object, existing, "status", "conditions"); err != nil {
			return err
		}
		return c.Status().Update(ctx, hr)
	})
}

// markReleased writes the status helm-controller v1.6 writes on hr after
// it installed or upgraded the Helm release to rel: Ready and Released
// True, the release in history, lastAttemptedRevision, and the generation
// observed.
func markReleased(ctx context.Context, c client.Client, hr *unstructured.Unstructured, rel *release.Release) error {
	gen := hr.GetGeneration()
	now := time.Now().UTC().Format(time.RFC3339)
	verb, action := "upgrade", "upgrade"
	if rel.Version == 1 {
		verb, action = "install", "install"
	}
	reason := strings.ToUpper(verb[:1]) + verb[1:] + "Succeeded"
	version := rel.Chart.Metadata.Version
	msg := fmt.Sprintf("Helm %s succeeded for release %s/%s.v%d with chart %s@%s", verb, rel.Namespace, rel.Name, rel.Version, rel.Chart.Metadata.Name, version)
	cond := func(typ string) any {
		return map[string]any{"type": typ, "status": "True", "reason": reason, "message": msg, "observedGeneration": gen, "lastTransitionTime": now}
	}
	digest := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(rel.Manifest)))
	hr.Object["status"] = map[string]any{
		"observedGeneration": gen, "lastAttemptedGeneration": gen, "lastAttemptedRevision": version,
		"lastAttemptedReleaseAction": action, "storageNamespace": rel.Namespace,
		"history": []any{map[string]any{
			"apiVersion": "helm.toolkit.fluxcd.io/v2", "name": rel.Name, "namespace": rel.Namespace, "version": int64(rel.Version),
			"chartName": rel.Chart.Metadata.Name, "chartVersion": version, "appVersion": rel.Chart.Metadata.AppVersion,
			"status": "deployed", "digest": digest, "configDigest": digest, "firstDeployed": now, "lastDeployed": now,
		}},
		"conditions": []any{cond("Ready"), cond("Released")},
	}
	return c.Status().Update(ctx, hr)
}

// markStalled writes what helm-controller v1.6 writes on hr when an upgrade
// to version failed (failure) and, out of retries, it rolled back
// (rolledBack) and gave up: Ready is summarized from Remediated (an error,
// with the rollback's message), the failure stays in Released.
func markStalled(ctx context.Context, c client.Client, hr *unstructured.Unstructured, version, failure, rolledBack string) error {
	gen := hr.GetGeneration()
	now := time.Now().UTC().Format(time.RFC3339)
	cond := func(typ, status, reason, msg string) any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "observedGeneration": gen, "lastTransitionTime": now}
	}
	status, _, _ := unstructured.NestedMap(hr.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	status["observedGeneration"], status["lastAttemptedGeneration"] = gen, gen
	status["lastAttemptedRevision"], status["lastAttemptedReleaseAction"] = version, "upgrade"
	status["upgradeFailures"], status["failures"] = int64(1), int64(1)
	status["conditions"] = []any{
		cond("Stalled", "True", "RetriesExceeded", "Failed to upgrade after 1 attempt(s)"),
		cond("Ready", "False", helmv2.RollbackSucceededReason, rolledBack),
		cond("Released", "False", helmv2.UpgradeFailedReason, failure),
		cond("Remediated", "True", helmv2.RollbackSucceededReason, rolledBack),
	}
	hr.Object["status"] = status
	return c.Status().Update(ctx, hr)
}
