package tracker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"tugboat.dev/tugboat/agent/health"
	"tugboat.dev/tugboat/agent/release"
	"tugboat.dev/tugboat/api/clip"
	"tugboat.dev/tugboat/api/wire"
)

// Sink receives the events the tracker produces (the reporter).
type Sink interface {
	Enqueue(events ...wire.Event)
}

// ObjectLister lists the workloads labeled as belonging to a release.
type ObjectLister func(ctx context.Context, rel release.Key) ([]*unstructured.Unstructured, error)

// Options configure a Tracker.
type Options struct {
	// Spoke is the spoke's name, stamped on every event.
	Spoke string
	// Decode bounds release decoding.
	Decode release.DecodeOptions
	// Fresh lists a release's workloads in the release's namespace from the
	// API server rather than the cache (objects of other namespaces are
	// taken from the cache). When set, a revision newly seen deployed is judged on fresh
	// reads until it is found Current or the cache caught up (fresh.go), so
	// that workloads the informers have not yet seen updated cannot make it
	// look healthy early.
	Fresh ObjectLister
	// Settle is how long after a revision is first seen deployed its health
	// stays InProgress anyway. Without Fresh it defaults to 500ms (the only
	// guard then); with Fresh it defaults to 0.
	Settle time.Duration
	// Logger receives decode problems and similar.
	Logger logr.Logger
	// ReleasesChanged, when set, is called (without the tracker's lock)
	// whenever a release appears or its last revision is gone after the
	// initial lists: the agent then posts its state, so the hub's count
	// of the spoke's releases follows at once.
	ReleasesChanged func()
}

// Tracker tracks releases. Its methods are safe for concurrent use.
type Tracker struct {
	opts    Options
	sink    Sink
	objects ObjectLister
	queue   workqueue.TypedDelayingInterface[release.Key]
	now     func() time.Time

	mu       sync.Mutex
	releases map[release.Key]*entry
	// reported remembers storage objects whose decode failure was already
	// reported, by namespace/name → resourceVersion.
	reported map[string]string
	// helmReleases are the Flux HelmReleases seen, by namespace/name, and
	// byTarget finds the one managing a release by where it is stored.
	helmReleases map[types.NamespacedName]*fluxRelease
	byTarget     map[storageTarget]types.NamespacedName
}

type entry struct {
	revisions map[int]*release.Release
	latest    *release.Release
	// seen holds the statuses already announced, of stored revisions only
	// (forgetRevisionLocked).
	seen     map[statusKey]bool
	health   health.Result
	computed bool
	// deployedAt is when the latest revision was first seen deployed.
	deployedAt time.Time
	deployedOf int
	// confirmed is set once revision deployedOf was found Current (or it
	// was deployed before the agent started); until then its health is
	// judged on fresh reads, the last of which freshRV holds (uid →
	// resourceVersion).
	confirmed bool
	freshRV   map[string]int64
	// judgedOf is the deployed revision health was last computed for on
	// objects that show it reliably (fresh, or a cache caught up): a health
	// computed while an older revision was latest does not speak for a
	// newer one deployed meanwhile.
	judgedOf int
	// sent is the state of the latest revision last sent with an event
	// (status or health), so that a health change is announced even when
	// it happened while a pending status or the settle time masked it.
	sent wire.ReleaseState
	// replay holds the statuses listed at start, announced once the
	// release's health is known: an agent stopped between Helm's write and
	// the event's delivery, or down while a release happened, never sent
	// them. The ids are those of the first report, so the hub drops what
	// it already has.
	replay []statusKey
}

type statusKey struct {
	revision int
	status   wire.ReleaseStatus
}

// New returns a Tracker; call Start to run its health worker.
func New(opts Options, sink Sink, objects ObjectLister) *Tracker {
	if opts.Settle == 0 && opts.Fresh == nil {
		opts.Settle = 500 * time.Millisecond
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	return &Tracker{
		opts: opts, sink: sink, objects: objects,
		queue:    workqueue.NewTypedDelayingQueue[release.Key](),
		now:      time.Now,
		releases: map[release.Key]*entry{},
		reported: map[string]string{},

		helmReleases: map[types.NamespacedName]*fluxRelease{},
		byTarget:     map[storageTarget]types.NamespacedName{},
	}
}

// Start runs the health worker until ctx ends (manager.Runnable).
func (t *Tracker) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		t.queue.ShutDown()
	}()
	for {
		key, shutdown := t.queue.Get()
		if shutdown {
			return nil
		}
		t.recompute(ctx, key)
		t.queue.Done(key)
	}
}

// NeedLeaderElection is false: every agent replica would track (there is
// one per spoke).
func (t *Tracker) NeedLeaderElection() bool { return false }

// remembered returns how many entries the tracker's maps hold: releases,
// revisions, seen statuses and reported decode failures. Bounded by what is
// stored on the cluster.
func (t *Tracker) remembered() (releases, revisions, seen, reported int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.releases {
		revisions += len(e.revisions)
		seen += len(e.seen)
	}
	return len(t.releases), revisions, seen, len(t.reported)
}

// Releases returns how many releases are tracked.
func (t *Tracker) Releases() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.releases)
}

// Snapshot returns every release's latest revision with its health: the
// level-based truth the hub reconciles against.
func (t *Tracker) Snapshot(context.Context) (*wire.StateSnapshot, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	snap := &wire.StateSnapshot{Spoke: t.opts.Spoke, TakenAt: t.now(), Releases: []wire.ReleaseState{}}
	for _, e := range t.releases {
		if e.latest == nil {
			continue
		}
		snap.Releases = append(snap.Releases, t.stateLocked(e))
	}
	return snap, nil
}

// stateLocked returns the wire state of e's latest revision, with the Flux
// HelmRelease managing it, if any, folded in.
func (t *Tracker) stateLocked(e *entry) wire.ReleaseState {
	s := e.latest.State()
	switch {
	case isPending(s.Status):
		s.Health, s.HealthReason = wire.HealthInProgress, string(s.Status)
	case s.Status == wire.StatusFailed:
		s.Health, s.HealthReason = wire.HealthFailed, clip.String(e.latest.Description, wire.MaxHealthReasonLength)
	case s.Status == wire.StatusUninstalled || s.Status == wire.StatusUninstalling:
		s.Health, s.HealthReason = wire.HealthUnknown, string(s.Status)
	case !e.computed || t.settling(e) || t.unjudged(e):
		s.Health, s.HealthReason = wire.HealthInProgress, fmt.Sprintf("waiting for the workloads of revision %d", s.Revision)
	default:
		s.Health, s.HealthReason = e.health.Health, clip.String(e.health.Reason, wire.MaxHealthReasonLength)
	}
	t.withHelmReleaseLocked(e, &s)
	return s
}

// unjudged reports whether the latest revision, newly deployed, has no
// health computed for it yet on objects that show it reliably.
func (t *Tracker) unjudged(e *entry) bool {
	return t.opts.Fresh != nil && e.deployedOf == e.latest.Revision && !e.confirmed && e.judgedOf != e.deployedOf
}

func (t *Tracker) settling(e *entry) bool {
	return e.deployedOf == e.latest.Revision && t.now().Sub(e.deployedAt) < t.opts.Settle
}

func isPending(s wire.ReleaseStatus) bool {
	return s == wire.StatusPendingInstall || s == wire.StatusPendingUpgrade || s == wire.StatusPendingRollback
}

// ObserveStorage handles an added or updated Helm storage Secret or
// ConfigMap. Corrupt ones are logged, counted and reported once per
// resourceVersion as a Warning event, then skipped.
func (t *Tracker) ObserveStorage(obj any, initial bool) {
	var (
		rel  *release.Release
		err  error
		meta metav1.Object
	)
	switch o := obj.(type) {
	case *corev1.Secret:
		if !release.IsReleaseSecret(o) {
			return
		}
		meta = o
		rel, err = release.DecodeSecret(o, t.opts.Decode)
	case *corev1.ConfigMap:
		if !release.IsReleaseConfigMap(o) {
			return
		}
		meta = o
		rel, err = release.DecodeConfigMap(o, t.opts.Decode)
	default:
		return
	}
	if err != nil {
		t.reportDecodeError(meta, err)
		return
	}
	t.mu.Lock()
	delete(t.reported, meta.GetNamespace()+"/"+meta.GetName()) // decodes now
	key := rel.Key()
	e := t.releases[key]
	appeared := e == nil && !initial
	if e == nil {
		e = &entry{revisions: map[int]*release.Release{}, seen: map[statusKey]bool{}}
		t.releases[key] = e
	}
	if old := e.revisions[rel.Revision]; old != nil && old.StorageUID != rel.StorageUID {
		// Another occurrence of the revision number (its storage object
		// was replaced, and the delete was not seen): its statuses are new.
		forgetRevisionLocked(e, rel.Revision)
	}
	prevLatest := e.latest
	e.revisions[rel.Revision] = rel
	e.latest = pickLatest(e.revisions)
	if e.latest.Status == wire.StatusDeployed && (e.deployedOf != e.latest.Revision) {
		e.deployedOf, e.deployedAt = e.latest.Revision, t.now()
		e.confirmed, e.freshRV = initial, nil
		if initial {
			e.deployedAt = time.Time{} // already settled before the agent started
		}
	}
	var events []wire.Event
	replay := false
	sk := statusKey{rel.Revision, rel.Status}
	if !e.seen[sk] {
		e.seen[sk] = true
		if initial {
			e.replay, replay = append(e.replay, sk), true
		} else {
			events = append(events, t.statusEventLocked(e, rel))
		}
	}
	latestChanged := prevLatest == nil || prevLatest.Revision != e.latest.Revision || prevLatest.Status != e.latest.Status
	t.mu.Unlock()
	if len(events) > 0 {
		t.sink.Enqueue(events...)
	}
	if appeared {
		t.releasesChanged()
	}
	switch {
	case latestChanged:
		t.queue.Add(key)
		if e.latest.Status == wire.StatusDeployed && !initial {
			t.queue.AddAfter(key, t.opts.Settle+10*time.Millisecond)
		}
	case replay:
		// An older revision listed after the health worker already judged
		// the release (the informer's initial list runs beside the worker,
		// in any order): only a recompute announces what it replays, and
		// nothing else would ask for one while the release stays as it is.
		t.queue.Add(key)
	}
}

// pickLatest returns the current revision the way Helm reads it, dropping
// the manifests of older revisions to bound memory.
func pickLatest(revs map[int]*release.Release) *release.Release {
	list := make([]*release.Release, 0, len(revs))
	for _, r := range revs {
		list = append(list, r)
	}
	var latest *release.Release
	for _, r := range release.Latest(list) {
		latest = r
	}
	for _, r := range revs {
		if r != latest {
			r.Manifest = ""
		}
	}
	return latest
}

// ForgetStorage handles a deleted storage object. When the last revision of
// a release is gone, the release is reported uninstalled.
func (t *Tracker) ForgetStorage(obj any) {
	var meta metav1.Object
	switch o := obj.(type) {
	case *corev1.Secret:
		meta = o
	case *corev1.ConfigMap:
		meta = o
	default:
		return
	}
	name, rev, ok := release.ParseStorageName(meta.GetName())
	if !ok {
		return
	}
	t.mu.Lock()
	delete(t.reported, meta.GetNamespace()+"/"+meta.GetName())
	// Helm stores a release in its own namespace (Flux may use another
	// storage namespace): find the release by storage identity.
	// Helm's own: the release's namespace, looked up directly; only a
	// Flux storage namespace needs the scan.
	stored := func(cand *entry) bool {
		r, ok := cand.revisions[rev]
		return ok && r.Name == name && r.StorageNamespace == meta.GetNamespace()
	}
	key := release.Key{Namespace: meta.GetNamespace(), Name: name}
	e := t.releases[key]
	if e == nil || !stored(e) {
		e = nil
		for k, cand := range t.releases {
			if stored(cand) {
				key, e = k, cand
				break
			}
		}
	}
	if e == nil {
		t.mu.Unlock()
		return
	}
	last := e.revisions[rev]
	delete(e.revisions, rev)
	forgetRevisionLocked(e, rev)
	var events []wire.Event
	gone := len(e.revisions) == 0
	if gone {
		uninstalled := *last
		uninstalled.Status = wire.StatusUninstalled
		e.latest = &uninstalled
		events = append(events, t.statusEventLocked(e, &uninstalled))
		delete(t.releases, key)
	} else {
		e.latest = pickLatest(e.revisions)
	}
	t.mu.Unlock()
	t.sink.Enqueue(events...)
	if gone {
		t.releasesChanged()
	}
}

// releasesChanged calls Options.ReleasesChanged, if set.
func (t *Tracker) releasesChanged() {
	if t.opts.ReleasesChanged != nil {
		t.opts.ReleasesChanged()
	}
}

// forgetRevisionLocked drops what e remembers of revision rev's statuses,
// once its storage object is gone (Helm prunes old revisions, see
// --history-max) or replaced: seen holds entries only for revisions that
// are stored, so it stays bounded however long the release lives.
func forgetRevisionLocked(e *entry, rev int) {
	for k := range e.seen {
		if k.revision == rev {
			delete(e.seen, k)
		}
	}
}

// Touch schedules the health of a release to be recomputed.
func (t *Tracker) Touch(key release.Key) { t.queue.Add(key) }

// recompute lists the release's workloads, computes its health and emits a
// HealthChanged event when the health (or its reason) changed.
func (t *Tracker) recompute(ctx context.Context, key release.Key) {
	t.mu.Lock()
	e := t.releases[key]
	t.mu.Unlock()
	if e == nil {
		return
	}
	objs, err := t.objects(ctx, key)
	judgedOf := 0
	if err == nil {
		objs, judgedOf, err = t.judgeObjects(ctx, key, e, objs)
	}
	if err != nil {
		t.opts.Logger.Error(err, "listing the workloads of a release", "release", key.String())
		t.queue.AddAfter(key, time.Second)
		return
	}
	res := health.Compute(objs)
	var maxRV int64
	for _, o := range objs {
		if rv, err := strconv.ParseInt(o.GetResourceVersion(), 10, 64); err == nil && rv > maxRV {
			maxRV = rv
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.releases[key] != e || e.latest == nil {
		return
	}
	e.health, e.computed, e.judgedOf = res, true, judgedOf
	if res.Health == wire.HealthCurrent && judgedOf != 0 && judgedOf == e.deployedOf && e.deployedOf == e.latest.Revision {
		e.confirmed = true
	}
	t.replayLocked(e)
	after := t.stateLocked(e)
	if t.settling(e) {
		// Come back when the settle time is over. The AddAfter in
		// ObserveStorage is not enough: the queue keeps only the earliest
		// of two delayed adds of a key, which for two deploys within the
		// settle time is the first one's.
		t.queue.AddAfter(key, e.deployedAt.Add(t.opts.Settle).Sub(t.now())+10*time.Millisecond)
	}
	// Compare with what the hub was last told, not with the state an
	// instant ago: a rollout that completed while the revision was pending
	// or settling changes nothing now, yet the hub still has to hear it.
	if e.sent.Revision == after.Revision && e.sent.Health == after.Health && e.sent.HealthReason == after.HealthReason &&
		sameHelmRelease(&e.sent, &after) {
		return
	}
	e.sent = after
	reason, typ := "Progressing", wire.EventTypeNormal
	switch after.Health {
	case wire.HealthCurrent:
		reason = "RolloutComplete"
	case wire.HealthFailed:
		reason, typ = "RolloutFailed", wire.EventTypeWarning
	case wire.HealthUnknown:
		reason = "HealthUnknown"
	}
	msg := after.HealthReason
	if after.Health == wire.HealthCurrent {
		msg = fmt.Sprintf("rollout complete: revision %d (%s %s) is healthy", after.Revision, after.Chart, after.ChartVersion)
	}
	if fr := t.helmReleaseLocked(e); fr != nil && fr.rv > maxRV {
		// A change of the HelmRelease alone makes a new event.
		maxRV = fr.rv
	}
	if maxRV == 0 {
		maxRV = t.now().UnixNano()
	}
	state := after
	t.sink.Enqueue(t.event(key.Namespace, key.Name, after.Revision, e.latest.StorageUID, wire.EventHealthChanged, typ, reason, msg, nil,
		maxRV<<2|int64(healthRank(after.Health)), &state))
}

// replayLocked announces the statuses e listed at start that are still
// stored, oldest revision first; the latest one's event carries the health
// just computed, so the one after it is not announced again.
func (t *Tracker) replayLocked(e *entry) {
	if len(e.replay) == 0 {
		return
	}
	slices.SortFunc(e.replay, func(a, b statusKey) int { return cmp.Compare(a.revision, b.revision) })
	var events []wire.Event
	for _, sk := range e.replay {
		if rel := e.revisions[sk.revision]; rel != nil && rel.Status == sk.status {
			events = append(events, t.statusEventLocked(e, rel))
		}
	}
	e.replay = nil
	if len(events) > 0 {
		t.sink.Enqueue(events...)
	}
}

func healthRank(h wire.Health) int {
	switch h {
	case wire.HealthCurrent:
		return 1
	case wire.HealthFailed:
		return 2
	case wire.HealthInProgress:
		return 3
	}
	return 0
}
