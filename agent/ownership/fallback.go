package ownership

import (
	"context"
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/flowcontrol"
)

// FallbackOptions bound a Fallback. Zero fields take the defaults.
type FallbackOptions struct {
	// QPS and Burst limit the GETs of all lookups together (default 5/s,
	// burst 10). A lookup never waits for a token: without one it misses.
	QPS   float32
	Burst int
	// Timeout bounds one Resolve call, all of its GETs included (default
	// 100ms).
	Timeout time.Duration
	// MaxDepth bounds how far up an owner chain Resolve reads (default 3,
	// e.g. Pod → ReplicaSet → Deployment).
	MaxDepth int
	// NegativeTTL is how long an owner found to belong to no release (or to
	// be gone) is not asked about again (default 30s); NegativeEntries
	// bounds that memory (default 10000).
	NegativeTTL     time.Duration
	NegativeEntries int
	// Mapper maps an owner's kind to its resource. When nil, only the
	// built-in workload kinds (Deployment, ReplicaSet, StatefulSet,
	// DaemonSet, Job, CronJob, ReplicationController) resolve.
	Mapper meta.RESTMapper
}

// Fallback resolves an owner the Index does not know (yet) by reading the
// owner's metadata from the API server: the bounded fallback for an
// admission that raced the index update. Reads are rate-limited without
// waiting, share one short deadline per Resolve, follow the owner's own
// owners up to MaxDepth, and their results are cached: positive ones in the
// Index (by UID and name), negative ones for NegativeTTL. Fallback is safe
// for concurrent use.
type Fallback struct {
	client  metadata.Interface
	index   *Index
	limiter flowcontrol.RateLimiter
	opts    FallbackOptions

	mu       sync.Mutex
	negative map[types.UID]time.Time
}

var errRateLimited = errors.New("owner lookup rate-limited")

// NewFallback returns a Fallback reading through c and caching into ix.
func NewFallback(c metadata.Interface, ix *Index, opts FallbackOptions) *Fallback {
	if opts.QPS <= 0 {
		opts.QPS = 5
	}
	if opts.Burst <= 0 {
		opts.Burst = 10
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 100 * time.Millisecond
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = 3
	}
	if opts.NegativeTTL <= 0 {
		opts.NegativeTTL = 30 * time.Second
	}
	if opts.NegativeEntries <= 0 {
		opts.NegativeEntries = 10_000
	}
	return &Fallback{
		client:   c,
		index:    ix,
		limiter:  flowcontrol.NewTokenBucketRateLimiter(opts.QPS, opts.Burst),
		opts:     opts,
		negative: map[types.UID]time.Time{},
	}
}

// Resolve returns the release of the first owner in refs that belongs to
// one, reading owners the index does not know from the API server within
// the Fallback's bounds. namespace is the namespace of the object carrying
// refs. It reports false when no owner belongs to a release or when the
// bounds ran out first.
func (f *Fallback) Resolve(ctx context.Context, namespace string, refs []metav1.OwnerReference) (Release, bool) {
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	rel, ok, _ := f.resolve(ctx, namespace, refs, f.opts.MaxDepth)
	return rel, ok
}

// resolve also reports whether a miss is conclusive: every owner was read
// (or known), so the answer is worth caching.
func (f *Fallback) resolve(ctx context.Context, namespace string, refs []metav1.OwnerReference, depth int) (Release, bool, bool) {
	if depth <= 0 {
		return Release{}, false, false
	}
	conclusive := true
	for _, controller := range [...]bool{true, false} {
		for i := range refs {
			ref := &refs[i]
			if isController(ref) != controller {
				continue
			}
			if rel, ok := f.index.Owner(namespace, refs[i:i+1]); ok {
				return rel, true, true
			}
			if f.knownNegative(ref.UID) {
				continue
			}
			owner, err := f.get(ctx, namespace, ref)
			switch {
			case apierrors.IsNotFound(err) || (err == nil && owner.UID != ref.UID):
				f.addNegative(ref.UID)
				continue
			case err != nil:
				conclusive = false
				continue
			}
			rel, ok := ReleaseOf(owner)
			ownerConclusive := true
			if !ok {
				rel, ok, ownerConclusive = f.resolve(ctx, owner.Namespace, owner.OwnerReferences, depth-1)
			}
			if ok {
				f.index.Record(owner.UID, RefOf(namespace, ref), rel)
				return rel, true, true
			}
			if ownerConclusive {
				f.addNegative(ref.UID)
			} else {
				conclusive = false
			}
		}
	}
	return Release{}, false, conclusive
}

func (f *Fallback) get(ctx context.Context, namespace string, ref *metav1.OwnerReference) (*metav1.PartialObjectMetadata, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, err
	}
	gvr, namespaced, err := f.resource(gv.WithKind(ref.Kind))
	if err != nil {
		return nil, err
	}
	if !f.limiter.TryAccept() {
		return nil, errRateLimited
	}
	ri := f.client.Resource(gvr)
	if namespaced {
		return ri.Namespace(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	}
	return ri.Get(ctx, ref.Name, metav1.GetOptions{})
}

// builtinResource maps the usual owner kinds to their resources, all
// namespaced.
func builtinResource(gk schema.GroupKind) (string, bool) {
	switch gk {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		return "deployments", true
	case schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}:
		return "replicasets", true
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		return "statefulsets", true
	case schema.GroupKind{Group: "apps", Kind: "DaemonSet"}:
		return "daemonsets", true
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		return "jobs", true
	case schema.GroupKind{Group: "batch", Kind: "CronJob"}:
		return "cronjobs", true
	case schema.GroupKind{Kind: "ReplicationController"}:
		return "replicationcontrollers", true
	}
	return "", false
}

func (f *Fallback) resource(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	if f.opts.Mapper != nil {
		m, err := f.opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return schema.GroupVersionResource{}, false, err
		}
		return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
	}
	if r, ok := builtinResource(gvk.GroupKind()); ok {
		return gvk.GroupVersion().WithResource(r), true, nil
	}
	return schema.GroupVersionResource{}, false, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
}

func (f *Fallback) knownNegative(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	until, ok := f.negative[uid]
	if ok && time.Now().After(until) {
		delete(f.negative, uid)
		return false
	}
	return ok
}

func (f *Fallback) addNegative(uid types.UID) {
	if uid == "" {
		return
	}
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.negative) >= f.opts.NegativeEntries {
		for k, until := range f.negative {
			if now.After(until) {
				delete(f.negative, k)
			}
		}
		if len(f.negative) >= f.opts.NegativeEntries {
			clear(f.negative)
		}
	}
	f.negative[uid] = now.Add(f.opts.NegativeTTL)
}
