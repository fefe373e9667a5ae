package request

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// Limits of the fields a request carries, as the CRD schema sets them.
const (
	// MaxVersionLength is the longest chart version accepted.
	MaxVersionLength = 64
	// MaxIdentityLength is the longest requester or voter (user,
	// displayName) accepted.
	MaxIdentityLength = 256
	// MaxMessageLength is the longest message of a vote accepted.
	MaxMessageLength = 1024
	// MaxRetries bounds how many Promotions of one version into one
	// environment Ensure tries names for (the first plus its retries).
	MaxRetries = 200

	maxNameLength = 253
)

// versionPattern is the Promotion CRD's pattern for spec.version.
var versionPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]*$`)

// The hub's CI API creates Promotions and records approvals; the Pipeline
// controller's rules already grant these, listed here for the record.
// +kubebuilder:rbac:groups=tugboat.dev,resources=pipelines,verbs=get
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotions,verbs=get;list;create
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotions/status,verbs=patch

// GetPipeline reads a Pipeline, answering a *NotFoundError when it does not
// exist.
func GetPipeline(ctx context.Context, c client.Reader, namespace, name string) (*tugboatv1alpha1.Pipeline, error) {
	p := &tugboatv1alpha1.Pipeline{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &NotFoundError{Kind: "pipeline", Namespace: namespace, Name: name}
		}
		return nil, fmt.Errorf("reading pipeline %s/%s: %w", namespace, name, err)
	}
	return p, nil
}

// GetPromotion reads a Promotion, answering a *NotFoundError when it does
// not exist.
func GetPromotion(ctx context.Context, c client.Reader, namespace, name string) (*tugboatv1alpha1.Promotion, error) {
	pr := &tugboatv1alpha1.Promotion{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, pr); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &NotFoundError{Kind: "promotion", Namespace: namespace, Name: name}
		}
		return nil, fmt.Errorf("reading promotion %s/%s: %w", namespace, name, err)
	}
	return pr, nil
}

// Create asks for a Promotion of version into environment env of p,
// requested by a user or CI (by) and identified by requester (a user name, a
// CI job URL; optional). See Ensure.
func Create(ctx context.Context, c client.Client, p *tugboatv1alpha1.Pipeline, env, version string, by tugboatv1alpha1.Requester, requester string) (*tugboatv1alpha1.Promotion, error) {
	pr, _, err := Ensure(ctx, c, p, env, version, by, requester)
	return pr, err
}

// Ensure is Create that also reports whether it created the Promotion.
//
// The Promotion is named like the Pipeline controller's
// (pipeline.PromotionName), labeled the same and owned by the Pipeline
// (its strategy is the hub's to resolve: status.strategy); from is
// the environment before env, if any. When a Promotion of another
// (pipeline, environment, version) holds that name, the first attempt uses
// pipeline.AlternatePromotionName, as the controller does. Asking twice is
// harmless: when a Promotion of version into env exists and has not
// finished (whoever asked for it, the controller included), Ensure returns
// it and false. When the
// ones that exist have all finished (e.g. Failed), a retry is created under
// the name with the suffix "-r2", then "-r3", and so on (at most
// MaxRetries), so a failed promotion can be tried again while its record
// stays. A suspended Pipeline still accepts requests: suspend stops
// automatic promotions only.
//
// Errors: *InvalidError for an unknown environment, a version that is empty,
// longer than MaxVersionLength or not a valid chart version, a requester too
// long, or by other than user or ci; otherwise the API's error.
func Ensure(ctx context.Context, c client.Client, p *tugboatv1alpha1.Pipeline, env, version string, by tugboatv1alpha1.Requester, requester string) (*tugboatv1alpha1.Promotion, bool, error) {
	idx, err := validateCreate(p, env, version, by, requester)
	if err != nil {
		return nil, false, err
	}
	var existing tugboatv1alpha1.PromotionList
	if err := c.List(ctx, &existing, client.InNamespace(p.Namespace),
		client.MatchingLabels{pipeline.LabelPipeline: p.Name, pipeline.LabelEnvironment: env}); err != nil {
		return nil, false, fmt.Errorf("listing promotions of pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	taken := map[string]bool{}
	for i := range existing.Items {
		pr := &existing.Items[i]
		taken[pr.Name] = true
		if unfinished(pr, p.Name, env, version) {
			return pr, false, nil
		}
	}
	base := pipeline.PromotionName(p.Name, env, version)
	// attempt creates the Promotion under name; it answers the Promotion
	// to return (created or found unfinished), or whether name is held by a
	// Promotion of another (pipeline, environment, version).
	attempt := func(name string) (pr *tugboatv1alpha1.Promotion, created, foreign bool, err error) {
		pr = newPromotion(p, idx, version, by, requester, name)
		err = c.Create(ctx, pr)
		if err == nil {
			return pr, true, false, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, false, false, fmt.Errorf("creating promotion %s: %w", name, err)
		}
		// Created meanwhile (by the controller, another request) or hidden
		// from the list (another pipeline, environment or version with the
		// same name): look at it.
		cur := &tugboatv1alpha1.Promotion{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pr), cur); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, false, false, nil // deleted since: a later name serves as well
			}
			return nil, false, false, fmt.Errorf("reading promotion %s: %w", name, err)
		}
		if unfinished(cur, p.Name, env, version) {
			return cur, false, false, nil
		}
		return nil, false, cur.Spec.Pipeline != p.Name || cur.Spec.To != env || cur.Spec.Version != version, nil
	}
	for n := 1; n <= MaxRetries; n++ {
		names := []string{retryName(base, n)}
		if n == 1 {
			// The controller's alternate name, when another tuple's
			// Promotion holds the readable one.
			names = append(names, pipeline.AlternatePromotionName(p.Name, env, version))
		}
		for i, name := range names {
			if taken[name] {
				break // ours, finished: the alternate name is not needed
			}
			pr, created, foreign, err := attempt(name)
			if err != nil || pr != nil {
				return pr, created, err
			}
			if !foreign || i == len(names)-1 {
				break
			}
		}
	}
	return nil, false, fmt.Errorf("pipeline %s/%s already has %d promotions of %s into %s: delete finished ones to retry", p.Namespace, p.Name, MaxRetries, version, env)
}

func validateCreate(p *tugboatv1alpha1.Pipeline, env, version string, by tugboatv1alpha1.Requester, requester string) (int, error) {
	if !p.DeletionTimestamp.IsZero() {
		return 0, fmt.Errorf("pipeline %s/%s is being deleted", p.Namespace, p.Name)
	}
	if env == "" {
		return 0, invalid("environment", "required")
	}
	idx := pipeline.EnvironmentIndex(p, env)
	if idx < 0 {
		names := make([]string, len(p.Spec.Environments))
		for i, e := range p.Spec.Environments {
			names[i] = e.Name
		}
		return 0, invalid("environment", "pipeline %s/%s has no environment %q (it has %s)", p.Namespace, p.Name, clip.String(env, 64), strings.Join(names, ", "))
	}
	switch {
	case version == "":
		return 0, invalid("version", "required")
	case len(version) > MaxVersionLength:
		return 0, invalid("version", "at most %d characters, got %d", MaxVersionLength, len(version))
	case !versionPattern.MatchString(version):
		return 0, invalid("version", "%q is not a chart version: letters, digits and . + _ - only, starting with a letter or digit", version)
	}
	if len(requester) > MaxIdentityLength {
		return 0, invalid("requester", "at most %d characters, got %d", MaxIdentityLength, len(requester))
	}
	if by != tugboatv1alpha1.RequestedByUser && by != tugboatv1alpha1.RequestedByCI {
		return 0, invalid("requestedBy", "must be %s or %s, got %q", tugboatv1alpha1.RequestedByUser, tugboatv1alpha1.RequestedByCI, by)
	}
	return idx, nil
}

// unfinished reports whether pr promotes version into env of the pipeline
// and has not finished.
func unfinished(pr *tugboatv1alpha1.Promotion, pipelineName, env, version string) bool {
	return pr.Spec.Pipeline == pipelineName && pr.Spec.To == env && pr.Spec.Version == version &&
		!pr.Status.Phase.Terminal() && pr.DeletionTimestamp.IsZero()
}

// retryName is base for the first attempt, then base-r2, base-r3, ...,
// shortening base to keep the name within 253 characters.
func retryName(base string, n int) string {
	if n <= 1 {
		return base
	}
	suffix := "-r" + strconv.Itoa(n)
	if len(base)+len(suffix) > maxNameLength {
		base = strings.TrimRight(base[:maxNameLength-len(suffix)], "-.")
	}
	return base + suffix
}

func newPromotion(p *tugboatv1alpha1.Pipeline, idx int, version string, by tugboatv1alpha1.Requester, requester, name string) *tugboatv1alpha1.Promotion {
	dst := &p.Spec.Environments[idx]
	from := ""
	if idx > 0 {
		from = p.Spec.Environments[idx-1].Name
	}
	return &tugboatv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: name,
			Labels: map[string]string{
				pipeline.LabelPipeline: p.Name, pipeline.LabelEnvironment: dst.Name, pipeline.LabelVersion: pipeline.LabelValue(version),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: tugboatv1alpha1.GroupVersion.String(), Kind: "Pipeline", Name: p.Name, UID: p.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: tugboatv1alpha1.PromotionSpec{
			Pipeline: p.Name, From: from, To: dst.Name, Version: version,
			RequestedBy: by, Requester: requester,
		},
	}
}

// Resume releases a rollback hold on environment env of p: it sets the
// annotation pipeline.ResumeAnnotationPrefix+env to now (RFC 3339), which
// lifts holds on rollbacks seen up to now; a later rollback holds again.
// p is updated from the API's answer.
func Resume(ctx context.Context, c client.Client, p *tugboatv1alpha1.Pipeline, env string, now time.Time) error {
	if pipeline.EnvironmentIndex(p, env) < 0 {
		return invalid("environment", "pipeline %s/%s has no environment %q", p.Namespace, p.Name, clip.String(env, 64))
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		pipeline.ResumeAnnotationPrefix + env: now.UTC().Format(time.RFC3339),
	}}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return &NotFoundError{Kind: "pipeline", Namespace: p.Namespace, Name: p.Name}
		}
		return fmt.Errorf("resuming %s of pipeline %s/%s: %w", env, p.Namespace, p.Name, err)
	}
	return nil
}
