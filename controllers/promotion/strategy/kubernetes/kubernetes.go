package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/controllers/promotion/strategy/spokeaccess"
)

const (
	// FieldManager is the server-side apply field manager of the change.
	FieldManager = "tugboat"
	// PromotionAnnotation records, on the HelmRelease, the Promotion that
	// last set its version.
	PromotionAnnotation = "tugboat.dev/promotion"

	// conflictAttempts bounds re-reads after the HelmRelease was deleted or
	// replaced between read and apply.
	conflictAttempts = 3
)

// SpokeClients gives a client for a spoke's API server. spokeaccess.Cache
// implements it.
type SpokeClients interface {
	Client(ctx context.Context, hub client.Reader, spoke *tugboatv1alpha1.Spoke) (client.Client, error)
}

// Strategy is the kubernetes strategy.
type Strategy struct {
	spokes SpokeClients
}

var _ strategy.Strategy = (*Strategy)(nil)

// New returns the kubernetes strategy. spokes gives clients for spokes; nil
// means a new spokeaccess.Cache, which reads each Spoke's kubeconfig Secret
// through the Request's Hub reader.
func New(spokes SpokeClients) *Strategy {
	if spokes == nil {
		spokes = spokeaccess.NewCache(nil)
	}
	return &Strategy{spokes: spokes}
}

// Promote sets req.Version on every target's HelmRelease. Configuration
// errors (a target without helmRelease, a Spoke without kubeconfig, a
// HelmRelease using chartRef) are terminal and checked for every target
// before any is changed. Other failures (a spoke unreachable, a HelmRelease
// not found) are retryable; the targets already done stay done and are
// skipped on the retry.
func (s *Strategy) Promote(ctx context.Context, req strategy.Request) (strategy.Result, error) {
	if req.Version == "" {
		return strategy.Result{}, strategy.Terminal(errors.New("no version to promote"))
	}
	if req.Promotion == nil {
		return strategy.Result{}, strategy.Terminal(errors.New("no Promotion given"))
	}
	if len(req.Targets) == 0 {
		return strategy.Result{}, strategy.Terminal(errors.New("the destination environment has no targets"))
	}
	for _, t := range req.Targets {
		if t.HelmRelease == nil || t.HelmRelease.Name == "" {
			return strategy.Result{}, strategy.Terminal(fmt.Errorf(
				"target %s has no helmRelease: the kubernetes strategy sets the version on the target's Flux HelmRelease", targetName(t)))
		}
		if t.Spoke != nil {
			if _, err := spokeaccess.Source(t.Spoke); err != nil {
				return strategy.Result{}, err
			}
		}
	}

	var changed, unchanged []string
	var errs []error
	for _, t := range req.Targets {
		was, err := s.promoteTarget(ctx, req, t)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("target %s: %w", targetName(t), err))
		case was == req.Version:
			unchanged = append(unchanged, hrName(t))
		default:
			changed = append(changed, fmt.Sprintf("%s (was %s)", hrName(t), orNone(was)))
		}
	}
	res := strategy.Result{Message: message(req.Version, changed, unchanged, len(errs))}
	return res, errors.Join(errs...)
}

// promoteTarget applies the version to one target's HelmRelease and returns
// the version it had.
func (s *Strategy) promoteTarget(ctx context.Context, req strategy.Request, t strategy.Target) (string, error) {
	if t.Spoke == nil {
		return "", fmt.Errorf("spoke %q not found", t.SpokeName)
	}
	c, err := s.spokes.Client(ctx, req.Hub, t.Spoke)
	if err != nil {
		return "", err
	}
	key := hrKey(t)
	for attempt := 1; ; attempt++ {
		was, err := apply(ctx, c, key, req.Version, req.Promotion.Name)
		if apierrors.IsConflict(err) && attempt < conflictAttempts {
			continue
		}
		return was, err
	}
}

// apply reads the HelmRelease key and, unless it already has version and
// the promotion's annotation, applies both with the read UID as a
// precondition. It returns the version the HelmRelease had.
func apply(ctx context.Context, c client.Client, key types.NamespacedName, version, promotion string) (string, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(helmv2.GroupVersion.WithKind(helmv2.HelmReleaseKind))
	if err := c.Get(ctx, key, cur); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return "", fmt.Errorf("HelmRelease %s not found on the spoke (the kubernetes strategy does not create HelmReleases)", key)
		case meta.IsNoMatchError(err):
			return "", fmt.Errorf("the spoke does not serve %s HelmReleases: is Flux installed?", helmv2.GroupVersion)
		}
		return "", fmt.Errorf("reading HelmRelease %s: %w", key, err)
	}
	was, _, _ := unstructured.NestedString(cur.Object, "spec", "chart", "spec", "version")
	if _, hasChart, _ := unstructured.NestedMap(cur.Object, "spec", "chart"); !hasChart {
		if _, hasRef, _ := unstructured.NestedMap(cur.Object, "spec", "chartRef"); hasRef {
			return was, strategy.Terminal(fmt.Errorf(
				"HelmRelease %s takes its chart from spec.chartRef, whose version the kubernetes strategy cannot set; promote the referenced source instead (e.g. with the pullRequest strategy)", key))
		}
	}
	if was == version && cur.GetAnnotations()[PromotionAnnotation] == promotion {
		return was, nil
	}

	patch := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"chart": map[string]any{"spec": map[string]any{"version": version}}},
	}}
	patch.SetGroupVersionKind(cur.GroupVersionKind())
	patch.SetNamespace(key.Namespace)
	patch.SetName(key.Name)
	// The UID is a precondition: the API server refuses the apply (409
	// Conflict) when no object with this UID exists, instead of creating one.
	patch.SetUID(cur.GetUID())
	patch.SetAnnotations(map[string]string{PromotionAnnotation: promotion})
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(patch), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsInvalid(err) {
			return was, strategy.Terminal(fmt.Errorf("applying version %s to HelmRelease %s: %w", version, key, err))
		}
		return was, fmt.Errorf("applying version %s to HelmRelease %s: %w", version, key, err)
	}
	return was, nil
}

func hrKey(t strategy.Target) types.NamespacedName {
	ns := t.HelmRelease.Namespace
	if ns == "" {
		ns = t.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: t.HelmRelease.Name}
}

// targetName is "spoke/namespace/release".
func targetName(t strategy.Target) string {
	return t.SpokeName + "/" + t.Namespace + "/" + t.Release
}

// hrName is "spoke:namespace/helmrelease".
func hrName(t strategy.Target) string {
	return t.SpokeName + ":" + hrKey(t).String()
}

func orNone(v string) string {
	if v == "" {
		return "unset"
	}
	return v
}

// message is the one-line summary of a Promote call.
func message(version string, changed, unchanged []string, failed int) string {
	var parts []string
	if len(changed) > 0 {
		parts = append(parts, fmt.Sprintf("set version %s on HelmRelease %s", version, strings.Join(changed, ", ")))
	}
	if len(unchanged) > 0 {
		parts = append(parts, fmt.Sprintf("already at %s: %s", version, strings.Join(unchanged, ", ")))
	}
	if failed > 0 {
		parts = append(parts, fmt.Sprintf("%d target(s) failed", failed))
	}
	return strings.Join(parts, "; ")
}
