package tracker

import (
	"strconv"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"k8s.io/apimachinery/pkg/types"

	"tugboat.dev/tugboat/agent/health"
	"tugboat.dev/tugboat/agent/release"
	"tugboat.dev/tugboat/api/wire"
)

// fluxRelease is what the tracker keeps of a Flux HelmRelease: where its
// Helm release is stored and what its status says.
type fluxRelease struct {
	ref    wire.HelmReleaseRef
	target storageTarget
	status wire.HelmReleaseStatus
	// rv is the HelmRelease's resourceVersion as a number (0 when not
	// one): it tells apart the events of two of its changes.
	rv int64
}

// storageTarget is where a Helm release is stored: the namespace of its
// storage objects and its name.
type storageTarget struct{ namespace, name string }

// ObserveHelmRelease handles an added or updated Flux HelmRelease: it is
// matched to the Helm release it manages (release.HelmReleaseTarget: the
// storage namespace and release name helm-controller uses), which from
// then on carries its reference and status, its health folding in the
// HelmRelease's conditions (health.FoldHelmRelease). A HelmRelease being
// deleted (metadata.deletionTimestamp set) lets go of its release, as a
// deleted one (ForgetHelmRelease): helm-controller uninstalls it (unless
// suspended) and writes no more status, and the status it last wrote (of a
// generation the deletion bumped, so "reconciling") is not the release's.
// Objects of other types are ignored.
func (t *Tracker) ObserveHelmRelease(obj any) {
	hr, ok := obj.(*helmv2.HelmRelease)
	if !ok || hr == nil {
		return
	}
	if hr.DeletionTimestamp != nil {
		t.ForgetHelmRelease(hr)
		return
	}
	storage, name := release.HelmReleaseTarget(hr)
	fr := &fluxRelease{
		ref:    wire.HelmReleaseRef{Namespace: hr.Namespace, Name: hr.Name},
		target: storageTarget{storage, name},
		status: health.HelmReleaseStatus(hr),
	}
	fr.rv, _ = strconv.ParseInt(hr.ResourceVersion, 10, 64)
	key := types.NamespacedName{Namespace: hr.Namespace, Name: hr.Name}
	t.mu.Lock()
	old := t.helmReleases[key]
	t.helmReleases[key] = fr
	if old != nil && old.target != fr.target && t.byTarget[old.target] == key {
		delete(t.byTarget, old.target)
	}
	t.byTarget[fr.target] = key
	touched := t.releasesStoredAtLocked(fr.target)
	if old != nil && old.target != fr.target {
		touched = append(touched, t.releasesStoredAtLocked(old.target)...)
	}
	t.mu.Unlock()
	for _, k := range touched {
		t.queue.Add(k)
	}
}

// ForgetHelmRelease handles a deleted Flux HelmRelease: its release no
// longer carries it.
func (t *Tracker) ForgetHelmRelease(obj any) {
	hr, ok := obj.(*helmv2.HelmRelease)
	if !ok || hr == nil {
		return
	}
	key := types.NamespacedName{Namespace: hr.Namespace, Name: hr.Name}
	t.mu.Lock()
	old := t.helmReleases[key]
	delete(t.helmReleases, key)
	var touched []release.Key
	if old != nil {
		if t.byTarget[old.target] == key {
			delete(t.byTarget, old.target)
		}
		touched = t.releasesStoredAtLocked(old.target)
	}
	t.mu.Unlock()
	for _, k := range touched {
		t.queue.Add(k)
	}
}

// releasesStoredAtLocked returns the keys of the releases stored at target.
func (t *Tracker) releasesStoredAtLocked(target storageTarget) []release.Key {
	var keys []release.Key
	if e := t.releases[release.Key{Namespace: target.namespace, Name: target.name}]; e != nil && e.latest != nil &&
		e.latest.StorageNamespace == target.namespace {
		// Helm's own layout: the release lives where it is stored.
		return append(keys, release.Key{Namespace: target.namespace, Name: target.name})
	}
	for k, e := range t.releases {
		if e.latest != nil && e.latest.Name == target.name && e.latest.StorageNamespace == target.namespace {
			keys = append(keys, k)
		}
	}
	return keys
}

// helmReleaseLocked returns the Flux HelmRelease managing e's release, or
// nil.
func (t *Tracker) helmReleaseLocked(e *entry) *fluxRelease {
	if e.latest == nil {
		return nil
	}
	key, ok := t.byTarget[storageTarget{e.latest.StorageNamespace, e.latest.Name}]
	if !ok {
		return nil
	}
	return t.helmReleases[key]
}

// withHelmReleaseLocked adds to s (the state of e's latest revision) the
// Flux HelmRelease managing it, if any, and folds its conditions into s's
// health. An uninstalled release keeps its own.
func (t *Tracker) withHelmReleaseLocked(e *entry, s *wire.ReleaseState) {
	fr := t.helmReleaseLocked(e)
	if fr == nil {
		return
	}
	ref, st := fr.ref, fr.status
	s.HelmRelease, s.HelmReleaseStatus = &ref, &st
	if s.Status == wire.StatusUninstalled || s.Status == wire.StatusUninstalling {
		return
	}
	s.Health, s.HealthReason = health.FoldHelmRelease(s.Health, s.HealthReason, st, ref.Namespace+"/"+ref.Name)
}

// sameHelmRelease reports whether a and b carry the same HelmRelease
// reference and status.
func sameHelmRelease(a, b *wire.ReleaseState) bool {
	switch {
	case (a.HelmRelease == nil) != (b.HelmRelease == nil), (a.HelmReleaseStatus == nil) != (b.HelmReleaseStatus == nil):
		return false
	case a.HelmRelease != nil && *a.HelmRelease != *b.HelmRelease:
		return false
	}
	return a.HelmReleaseStatus == nil || *a.HelmReleaseStatus == *b.HelmReleaseStatus
}
