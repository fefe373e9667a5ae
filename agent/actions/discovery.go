package actions

import (
	"fmt"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// DiscoveryMaxAge is how long the executor trusts what it discovered of
// the spoke's APIs (groups, versions, kinds, the OpenAPI v3 documents Helm
// validates manifests against, and the Kubernetes version) before it
// discovers them again, at the start of the next action.
const DiscoveryMaxAge = 10 * time.Minute

// apis is the executor's view of the spoke's APIs, shared by every action:
// Helm would otherwise discover them, and download the OpenAPI document,
// for each one, which is most of the time between an action's arrival and
// its upgrade starting. The memory cache keeps the groups, the kinds and
// the OpenAPI v3 documents; apis adds the capabilities Helm's templates
// see. It is safe for concurrent use.
type apis struct {
	discovery.CachedDiscoveryInterface
	now    func() time.Time
	maxAge time.Duration

	mu     sync.Mutex
	filled time.Time // when the view was started (zero: empty)
	caps   *chartutil.Capabilities
	mapper meta.RESTMapper // nil: not built for this view yet
}

func newAPIs(cfg *rest.Config, now func() time.Time) (*apis, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("actions: creating a discovery client: %w", err)
	}
	return &apis{CachedDiscoveryInterface: memory.NewMemCacheClient(dc), now: now, maxAge: DiscoveryMaxAge}, nil
}

// begin starts an action: it drops a view older than maxAge and reports
// whether the action starts with a view discovered before it (warm), which
// a failure may be due to.
func (a *apis) begin() (warm bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if !a.filled.IsZero() && now.Sub(a.filled) < a.maxAge {
		return true
	}
	a.CachedDiscoveryInterface.Invalidate()
	a.filled, a.caps, a.mapper = now, nil, nil
	return false
}

// Invalidate drops the view: the next action discovers the APIs again.
// Helm calls it after installing a chart's CRDs.
func (a *apis) Invalidate() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.CachedDiscoveryInterface.Invalidate()
	a.filled, a.caps, a.mapper = time.Time{}, nil, nil
}

// restMapper is the view's REST mapper (kinds to resources, with kubectl's
// shortcuts), shared by every action until the view is dropped. Built per
// Helm configuration, as Helm's getter does, it made every build of a
// manifest map every group and resource of the spoke again: the largest
// part of an upgrade's CPU once the OpenAPI documents were no longer
// parsed for each (docs/benchmarks.md). A kind it does not know makes it
// drop the view when the view is not fresh (as kubectl's mapper does);
// an upgrade that fails for one is retried with a new view (upgrade).
func (a *apis) restMapper() meta.RESTMapper {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mapper == nil {
		a.mapper = &viewMapper{restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(a), a, nil)}
	}
	return a.mapper
}

// viewMapper is a view's REST mapper: one value, which Helm can reset
// (after installing CRDs), dropping the view.
type viewMapper struct{ meta.RESTMapper }

// Reset implements meta.ResettableRESTMapper.
func (m *viewMapper) Reset() { meta.MaybeResetRESTMapper(m.RESTMapper) }

// viewGetter is a Helm REST client getter whose REST mapper is the view's.
type viewGetter struct {
	genericclioptions.RESTClientGetter
	apis *apis
}

// ToRESTMapper returns the view's REST mapper.
func (g viewGetter) ToRESTMapper() (meta.RESTMapper, error) { return g.apis.restMapper(), nil }

// capabilities are what Helm's templates see of the cluster
// (.Capabilities), from the shared view. Set on an action.Configuration,
// they keep Helm from invalidating the view for every action.
func (a *apis) capabilities() (*chartutil.Capabilities, error) {
	a.mu.Lock()
	if c := a.caps; c != nil {
		a.mu.Unlock()
		return c, nil
	}
	filled := a.filled
	a.mu.Unlock()
	v, err := a.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the Kubernetes version: %w", err)
	}
	versions, err := action.GetVersionSet(a)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		// An API service registered but not served fails only its own
		// group, as Helm tolerates it.
		return nil, fmt.Errorf("reading the served API versions: %w", err)
	}
	c := &chartutil.Capabilities{
		APIVersions: versions,
		KubeVersion: chartutil.KubeVersion{Version: v.GitVersion, Major: v.Major, Minor: v.Minor},
		HelmVersion: chartutil.DefaultCapabilities.HelmVersion,
	}
	a.mu.Lock()
	if a.filled.Equal(filled) {
		a.caps = c // else invalidated meanwhile: not kept
	}
	a.mu.Unlock()
	return c, nil
}
