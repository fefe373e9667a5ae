package agent

import (
	"context"
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Flux HelmReleases (helm.toolkit.fluxcd.io/v2) are watched when the
// cluster serves them: the tracker matches each to the Helm release it
// manages and folds its conditions into the release's health
// (agent/tracker/helmreleases.go). The agent checks at start; a cluster
// without Flux is checked again every HelmReleaseDiscoveryInterval, so
// installing Flux later needs no restart. An agent without the right to
// list HelmReleases (a ClusterRole from before this rule) logs why and
// carries on without them.

// helmReleasesServed reports whether the cluster serves HelmReleases at
// helm.toolkit.fluxcd.io/v2.
func helmReleasesServed(dc discovery.DiscoveryInterface) (bool, error) {
	list, err := dc.ServerResourcesForGroupVersion(helmv2.GroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == "helmreleases" {
			return true, nil
		}
	}
	return false, nil
}

// watchHelmReleases feeds the HelmRelease informer to the tracker and
// returns its registration. It first lists one HelmRelease through the
// API server, so that an agent whose role lacks the right gets a clear
// error instead of an informer that never syncs.
func (r *runner) watchHelmReleases(ctx context.Context) (toolscache.ResourceEventHandlerRegistration, error) {
	a := r.a
	var probe helmv2.HelmReleaseList
	if err := a.Manager.GetAPIReader().List(ctx, &probe, client.Limit(1)); err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("the agent may not list %s HelmReleases (its ClusterRole needs get, list and watch on helmreleases): %w",
				helmv2.GroupVersion.Group, err)
		}
		return nil, fmt.Errorf("listing HelmReleases: %w", err)
	}
	inf, err := a.Manager.GetCache().GetInformer(ctx, &helmv2.HelmRelease{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("watching HelmReleases: %w", err)
	}
	return inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    a.Tracker.ObserveHelmRelease,
		UpdateFunc: func(_, o any) { a.Tracker.ObserveHelmRelease(o) },
		DeleteFunc: func(o any) { a.Tracker.ForgetHelmRelease(unwrapTombstone(o)) },
	})
}

// startHelmReleases watches HelmReleases when the cluster serves them, and
// returns the registration to wait for (nil when not watching yet). When
// they are not served, or the watch could not start, it keeps checking
// every HelmReleaseDiscoveryInterval in the background (not at all when
// that is zero).
func (r *runner) startHelmReleases(ctx context.Context) toolscache.ResourceEventHandlerRegistration {
	a := r.a
	// An error is logged when it first happens; its repeats at V(1).
	var last string
	logErr := func(err error, msg string) {
		if s := msg + err.Error(); s != last {
			last = s
			a.log.Error(err, msg)
			return
		}
		a.log.V(1).Info(msg, "error", err.Error())
	}
	try := func() (toolscache.ResourceEventHandlerRegistration, bool) {
		served, err := helmReleasesServed(a.discovery)
		if err != nil {
			logErr(err, "discovering Flux HelmReleases")
			return nil, false
		}
		if !served {
			return nil, false
		}
		reg, err := r.watchHelmReleases(ctx)
		if err != nil {
			logErr(err, "Flux HelmReleases are served but not watched: the releases they manage are reported as plain Helm releases")
			return nil, false
		}
		a.log.Info("watching Flux HelmReleases", "groupVersion", helmv2.GroupVersion.String())
		return reg, true
	}
	if reg, ok := try(); ok {
		return reg
	}
	interval := a.opts.HelmReleaseDiscoveryInterval
	if interval <= 0 {
		return nil
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, ok := try(); ok {
					return
				}
			}
		}
	}()
	return nil
}

// transformHelmRelease keeps of a HelmRelease what the tracker reads
// (release.HelmReleaseTarget, health.HelmReleaseStatus): its identity,
// generation, the spec fields naming its release and storage, suspend, and
// its status but the inventory. Values, which may be large, are dropped.
func transformHelmRelease(o any) (any, error) {
	hr, ok := o.(*helmv2.HelmRelease)
	if !ok {
		return o, nil
	}
	hr.ManagedFields, hr.Annotations = nil, nil
	hr.Spec = helmv2.HelmReleaseSpec{
		ReleaseName: hr.Spec.ReleaseName, TargetNamespace: hr.Spec.TargetNamespace,
		StorageNamespace: hr.Spec.StorageNamespace, Suspend: hr.Spec.Suspend,
	}
	hr.Status.Inventory = nil
	return hr, nil
}
