package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/flowcontrol"
)

// BackfillOptions configure Backfill. Zero fields take the defaults.
type BackfillOptions struct {
	// Resources are listed in this order, which must put owners before
	// their dependents so that owner chains resolve through the index
	// (default DefaultBackfillResources).
	Resources []schema.GroupVersionResource
	// Namespaces are the watched namespaces; empty means all.
	Namespaces []string
	// ExcludeNamespaces are skipped (default DefaultExcludedNamespaces;
	// pass an empty, non-nil slice to exclude none).
	ExcludeNamespaces []string
	// PatchesPerSecond bounds the label patches (default 20).
	PatchesPerSecond float32
	// PageSize is the list page size (default 250).
	PageSize int64
	// FieldManager names the patches' field manager (default
	// "tugboat-agent").
	FieldManager string
	// MaxErrors bounds how many patch errors Backfill keeps to return
	// (default 10); it counts all of them in BackfillResult.Failed.
	MaxErrors int
}

// BackfillResult counts what a Backfill pass saw and did.
type BackfillResult struct {
	// Listed counts the objects listed.
	Listed int
	// The objects patched with the tracking labels. (The British spelling
	// of this field and the next predates the lint rule; the agent reads
	// them.)
	Labeled int
	// AlreadyLabeled counts the objects of a release that had the labels.
	AlreadyLabeled int
	// Untracked counts the objects that belong to no known release.
	Untracked int
	// Failed counts the failed patches.
	Failed int
}

// DefaultBackfillResources returns the resources Backfill lists by default,
// owners first: workloads, then ReplicaSets and Jobs, then Pods, then
// Services and ConfigMaps.
func DefaultBackfillResources() []schema.GroupVersionResource {
	apps := schema.GroupVersion{Group: "apps", Version: "v1"}
	batch := schema.GroupVersion{Group: "batch", Version: "v1"}
	core := schema.GroupVersion{Version: "v1"}
	return []schema.GroupVersionResource{
		apps.WithResource("deployments"),
		apps.WithResource("statefulsets"),
		apps.WithResource("daemonsets"),
		batch.WithResource("cronjobs"),
		apps.WithResource("replicasets"),
		batch.WithResource("jobs"),
		core.WithResource("pods"),
		core.WithResource("services"),
		core.WithResource("configmaps"),
	}
}

// DefaultExcludedNamespaces returns the namespaces Backfill skips by
// default, the same the admission webhooks exclude.
func DefaultExcludedNamespaces() []string {
	return []string{"kube-system", "kube-node-lease"}
}

// Backfill labels objects that belong to a release but lack the tracking
// labels: objects that existed before the agent's webhooks were registered,
// or were written while the webhooks were unreachable. It lists metadata
// only, page by page, resource by resource in opts.Resources order; an
// object belongs to a release through Helm's annotations or through an
// owner in ix. Every object of a release it sees, labeled before or now, is
// recorded in ix, so that the dependents listed later resolve. Patches are
// JSON merge patches of the two labels only, at most opts.PatchesPerSecond.
//
// Backfill carries on past errors of one resource or object and returns
// them joined at the end, with the counts so far; it stops early only when
// ctx ends.
func Backfill(ctx context.Context, c metadata.Interface, ix *Index, opts BackfillOptions) (BackfillResult, error) {
	if opts.Resources == nil {
		opts.Resources = DefaultBackfillResources()
	}
	if opts.ExcludeNamespaces == nil {
		opts.ExcludeNamespaces = DefaultExcludedNamespaces()
	}
	if opts.PatchesPerSecond <= 0 {
		opts.PatchesPerSecond = 20
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 250
	}
	if opts.FieldManager == "" {
		opts.FieldManager = "tugboat-agent"
	}
	if opts.MaxErrors <= 0 {
		opts.MaxErrors = 10
	}
	namespaces := opts.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	b := &backfill{
		client:  c,
		index:   ix,
		opts:    opts,
		limiter: flowcontrol.NewTokenBucketRateLimiter(opts.PatchesPerSecond, max(1, int(opts.PatchesPerSecond))),
	}
	for _, gvr := range opts.Resources {
		for _, ns := range namespaces {
			if ns != metav1.NamespaceAll && slices.Contains(opts.ExcludeNamespaces, ns) {
				continue
			}
			if err := b.resource(ctx, gvr, ns); err != nil {
				if ctx.Err() != nil {
					return b.result, errors.Join(append(b.errs, ctx.Err())...)
				}
				b.errs = append(b.errs, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err))
			}
		}
	}
	return b.result, errors.Join(b.errs...)
}

type backfill struct {
	client  metadata.Interface
	index   *Index
	opts    BackfillOptions
	limiter flowcontrol.RateLimiter
	result  BackfillResult
	errs    []error
}

// resource lists one resource in one namespace (or all) and labels what it
// finds. An expired continue token restarts the list; objects already
// handled are then seen as labeled.
func (b *backfill) resource(ctx context.Context, gvr schema.GroupVersionResource, namespace string) error {
	ri := b.client.Resource(gvr).Namespace(namespace)
	const maxRestarts = 3
	restarts := 0
	cont := ""
	for {
		list, err := ri.List(ctx, metav1.ListOptions{Limit: b.opts.PageSize, Continue: cont})
		if apierrors.IsResourceExpired(err) && restarts < maxRestarts {
			restarts++
			cont = ""
			continue
		}
		if err != nil {
			return err
		}
		for i := range list.Items {
			if err := b.object(ctx, gvr, &list.Items[i]); err != nil {
				return err
			}
		}
		cont = list.Continue
		if cont == "" {
			return nil
		}
	}
}

// object labels one object if it belongs to a release; it returns an error
// only when ctx ended.
func (b *backfill) object(ctx context.Context, gvr schema.GroupVersionResource, obj *metav1.PartialObjectMetadata) error {
	b.result.Listed++
	if slices.Contains(b.opts.ExcludeNamespaces, obj.Namespace) {
		return nil
	}
	rel, ok := ReleaseOf(obj)
	if !ok {
		rel, ok = b.index.Owner(obj.Namespace, obj.OwnerReferences)
	}
	if !ok {
		b.result.Untracked++
		return nil
	}
	if HasLabels(obj.Labels, rel) {
		b.result.AlreadyLabeled++
		b.index.Record(obj.UID, ObjectRef{}, rel)
		return nil
	}
	if err := b.limiter.Wait(ctx); err != nil {
		return err
	}
	patch, err := mergePatch(rel, obj.UID)
	if err != nil {
		return err
	}
	_, err = b.client.Resource(gvr).Namespace(obj.Namespace).Patch(ctx, obj.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: b.opts.FieldManager})
	switch {
	case err == nil:
		b.result.Labeled++
		b.index.Record(obj.UID, ObjectRef{}, rel)
	case ctx.Err() != nil:
		return ctx.Err()
	case apierrors.IsNotFound(err) || uidMismatch(err):
		// Gone, or replaced by a namesake (the UID in the patch differs):
		// nothing of this object left to label.
	default:
		b.result.Failed++
		if len(b.errs) < b.opts.MaxErrors {
			b.errs = append(b.errs, fmt.Errorf("labeling %s %s/%s: %w", gvr.GroupResource(), obj.Namespace, obj.Name, err))
		}
	}
	return nil
}

// uidMismatch reports whether a patch failed because the object was
// replaced: the UID in the patch is immutable in the current object
// (Invalid on metadata.uid), or no object exists (Conflict).
func uidMismatch(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// mergePatch sets the two labels, on the object with uid only: a namesake
// created since the list fails the precondition with a conflict.
func mergePatch(rel Release, uid types.UID) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"uid":    uid,
			"labels": rel.Labels(),
		},
	})
}
