package actions

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/Masterminds/semver/v3"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/wire"
)

// The helm strategy's rights (get and patch of HelmReleases, and Helm's own
// for upgrades) are not in the agent's default role: they are the opt-in
// the agent chart's helm strategy role, bound per allowed namespace.

// setHelmReleaseVersion sets spec.chart.spec.version of the Flux HelmRelease
// the action names, by server-side apply with the field manager tugboat,
// forcing ownership of that one field only. It never creates a HelmRelease.
// The chart source is the HelmRelease's own, so only the namespace (of the
// HelmRelease and of the release) and downgrade limits apply; the
// downgrade check compares with the HelmRelease's version, or with the
// version helm-controller last attempted when the spec holds a range.
func (e *Executor) setHelmReleaseVersion(ctx context.Context, log logr.Logger, limits Limits, a wire.Action) (string, error) {
	return e.applyHelmReleaseVersion(ctx, log, limits, a, a.Version, func(cur *unstructured.Unstructured, was string) error {
		return limits.checkVersion(helmReleaseVersion(cur, was), a.Version)
	})
}

// applyHelmReleaseVersion sets the chart version of the HelmRelease a
// names to version, after check approves the HelmRelease read and the
// version it asks for (was); see setHelmReleaseVersion.
func (e *Executor) applyHelmReleaseVersion(ctx context.Context, log logr.Logger, limits Limits, a wire.Action, version string,
	check func(cur *unstructured.Unstructured, was string) error) (string, error) {
	key := types.NamespacedName{Namespace: a.HelmRelease.Namespace, Name: a.HelmRelease.Name}
	if key.Namespace == "" {
		key.Namespace = a.Namespace
	}
	if err := limits.checkNamespace(key.Namespace); err != nil {
		return "", err
	}
	if err := limits.checkNamespace(a.Namespace); err != nil {
		return "", err
	}
	if _, err := semver.NewVersion(version); err != nil {
		return "", fmt.Errorf("version %q is not a semantic version", version)
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(helmv2.GroupVersion.WithKind(helmv2.HelmReleaseKind))
	if err := e.client.Get(ctx, key, cur); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return "", fmt.Errorf("HelmRelease %s does not exist on this spoke", key)
		case meta.IsNoMatchError(err):
			return "", fmt.Errorf("this spoke does not serve %s HelmReleases: is Flux installed?", helmv2.GroupVersion)
		case ctx.Err() != nil:
			return "", abandoned(ctx)
		}
		return "", fmt.Errorf("reading HelmRelease %s: %w", key, err)
	}
	if _, hasChart, _ := unstructured.NestedMap(cur.Object, "spec", "chart"); !hasChart {
		return "", fmt.Errorf("HelmRelease %s has no spec.chart (it may use spec.chartRef, whose version is set on the referenced source)", key)
	}
	if err := checkChartName(helmReleaseChart(cur), a.Chart.Name, "HelmRelease "+key.String()); err != nil {
		return "", err
	}
	was, _, _ := unstructured.NestedString(cur.Object, "spec", "chart", "spec", "version")
	if was == version {
		return fmt.Sprintf("HelmRelease %s is already at chart version %s", key, version), nil
	}
	if err := check(cur, was); err != nil {
		return "", err
	}
	if ctx.Err() != nil {
		return "", abandoned(ctx)
	}

	patch := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"chart": map[string]any{"spec": map[string]any{"version": version}}},
	}}
	patch.SetGroupVersionKind(cur.GroupVersionKind())
	patch.SetNamespace(key.Namespace)
	patch.SetName(key.Name)
	// The UID is a precondition: the apply fails instead of creating a
	// HelmRelease that was deleted since it was read.
	patch.SetUID(cur.GetUID())
	log.Info("Setting the HelmRelease's chart version", "helmRelease", key.String(), "from", was)
	if err := e.client.Apply(context.WithoutCancel(ctx), client.ApplyConfigurationFromUnstructured(patch),
		client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("applying version %s to HelmRelease %s: %w", version, key, err)
	}
	return fmt.Sprintf("set HelmRelease %s spec.chart.spec.version to %s (was %s)", key, version, orUnset(was)), nil
}

// helmReleaseVersion is the version a downgrade is judged against: the
// spec's when it is a version, else the one helm-controller last attempted
// or last deployed; empty when none is known.
func helmReleaseVersion(hr *unstructured.Unstructured, spec string) string {
	if _, err := semver.NewVersion(spec); err == nil {
		return spec
	}
	if v, _, _ := unstructured.NestedString(hr.Object, "status", "lastAttemptedRevision"); v != "" {
		return v
	}
	if history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history"); len(history) > 0 {
		if snap, ok := history[0].(map[string]any); ok {
			if v, ok := snap["chartVersion"].(string); ok {
				return v
			}
		}
	}
	return ""
}

// helmReleaseChart is the name of the chart a HelmRelease runs: the one
// helm-controller last recorded (status.history[0].chartName), else the
// spec's chart, whose last path element is the chart's directory for a
// GitRepository or Bucket source ("./charts/web"). Empty when unknown.
func helmReleaseChart(hr *unstructured.Unstructured) string {
	if history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history"); len(history) > 0 {
		if snap, ok := history[0].(map[string]any); ok {
			if n, ok := snap["chartName"].(string); ok && n != "" {
				return n
			}
		}
	}
	spec, _, _ := unstructured.NestedString(hr.Object, "spec", "chart", "spec", "chart")
	if strings.Contains(spec, "/") {
		return path.Base(spec)
	}
	return spec
}

func orUnset(v string) string {
	if v == "" {
		return "unset"
	}
	return v
}
