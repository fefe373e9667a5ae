package releasehistory

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
)

// +kubebuilder:rbac:groups=tugboat.dev,resources=releasehistories,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=tugboat.dev,resources=releasehistories/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=tugboat.dev,resources=spokes,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=spokes/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Recorder persists what spokes report. It implements ingest.Store.
type Recorder struct {
	// Events, when set, receives an Event when a spoke's agent signs with
	// another key than before (a key rotation); set it before Start.
	Events events.EventRecorder
	// Heartbeats, when set, collects every spoke heard from (its state
	// snapshots) into this replica's heartbeat digest
	// (controllers/heartbeat.Writer); the Spoke's status then needs a
	// write only every HeartbeatRefresh. Set it before Start.
	Heartbeats HeartbeatSink

	client client.Client // cached reads, direct writes
	api    client.Reader // uncached reads: secrets, conflict retries
	opts   Options
	now    func() time.Time

	ready atomic.Bool
	stall stall
	queue workqueue.TypedDelayingInterface[types.NamespacedName]

	mu      sync.Mutex
	pending map[types.NamespacedName]*pending
	keys    map[string]cachedKeys
	// written is the resourceVersion of each ReleaseHistory this recorder
	// last wrote: a cached copy at another version may be behind that
	// write, so a snapshot is not compared against it (see unchanged).
	written map[types.NamespacedName]string
	// recent is the object of each write of the last recentKeep, the
	// start of the next write while the cache is behind it.
	recent      map[types.NamespacedName]recentWrite
	recentSwept time.Time

	stats Stats
}

// pending holds the changes to one ReleaseHistory not yet written.
type pending struct {
	spec      tugboatv1alpha1.ReleaseHistorySpec
	owner     metav1.OwnerReference
	ops       []op
	waiters   []chan error
	lastWrite time.Time
	// writing is set while a writer applies ops taken from this entry.
	writing bool
}

// recentKeep is how long the recorder keeps the object of each of its
// writes (recentWrite): longer than its cache lags the API server under
// any load it still serves, short enough that a busy hub keeps few (100
// writes a second keep about 6,000 objects, some 25 MiB).
const recentKeep = time.Minute

// recentWrite is a ReleaseHistory as the API server answered this
// recorder's last write of it. The next write starts from it when the
// cache has not caught up yet: under load the informer lags the writes by
// seconds, and a write from the lagging copy is a conflict (a refused PUT,
// a GET and the PUT again), which adds to the load that made it lag.
type recentWrite struct {
	obj *tugboatv1alpha1.ReleaseHistory
	at  time.Time
}

// op changes a status; it reports whether it changed anything.
type op func(st *tugboatv1alpha1.ReleaseHistoryStatus, spec *tugboatv1alpha1.ReleaseHistorySpec) bool

// cachedKeys are the keys read for a Spoke (by UID), under its key Secret
// name and keys annotation then.
type cachedKeys struct {
	uid                types.UID
	secret, annotation string
	keys               ingest.SpokeKeys
	expires            time.Time
}

var _ ingest.Store = (*Recorder)(nil)

// NewRecorder returns a Recorder reading through c (usually the manager's
// cached client) and api (the manager's APIReader).
func NewRecorder(c client.Client, api client.Reader, opts Options) *Recorder {
	return &Recorder{
		client:  c,
		api:     api,
		opts:    opts,
		now:     time.Now,
		queue:   workqueue.NewTypedDelayingQueue[types.NamespacedName](),
		pending: map[types.NamespacedName]*pending{},
		keys:    map[string]cachedKeys{},
		written: map[types.NamespacedName]string{},
		recent:  map[types.NamespacedName]recentWrite{},
	}
}

// Stats returns the Recorder's counters.
func (r *Recorder) Stats() *Stats { return &r.stats }

// SetupWithManager registers the Spoke name index and adds the Recorder's
// writers to mgr.
func (r *Recorder) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := IndexSpokeNames(ctx, mgr); err != nil {
		return err
	}
	return mgr.Add(r)
}

// IndexSpokeNames registers SpokeNameIndex and HistorySpokeIndex (idempotent per manager is the
// caller's concern: call it once).
func IndexSpokeNames(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &tugboatv1alpha1.Spoke{}, SpokeNameIndex, func(o client.Object) []string {
		return []string{o.GetName()}
	}); err != nil {
		return err
	}
	return mgr.GetFieldIndexer().IndexField(ctx, &tugboatv1alpha1.ReleaseHistory{}, HistorySpokeIndex, func(o client.Object) []string {
		if s := o.GetLabels()[tugboatv1alpha1.LabelSpoke]; s != "" {
			return []string{s}
		}
		return nil
	})
}

// NeedLeaderElection is false: every hub replica records what it receives.
func (r *Recorder) NeedLeaderElection() bool { return false }

// Start runs the writers until ctx ends.
func (r *Recorder) Start(ctx context.Context) error {
	r.ready.Store(true)
	defer r.ready.Store(false)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.probe(ctx)
	}()
	for i := 0; i < r.opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r.processNext(ctx) {
			}
		}()
	}
	<-ctx.Done()
	r.queue.ShutDown()
	wg.Wait()
	return nil
}

// Ready reports nil once the Recorder's writers run, unless its calls to
// the API server time out (ErrStalled).
func (r *Recorder) Ready() error {
	if err := r.started(); err != nil {
		return err
	}
	return r.stalled()
}

// started reports nil once the Recorder's writers run.
func (r *Recorder) started() error {
	if !r.ready.Load() {
		return ingest.ErrNotReady
	}
	return nil
}

// spokeOf returns the Spoke a request was authenticated as: the one in
// sp.Namespace, from the cache. Without a namespace (a receiver that knows
// names alone) it is the one live Spoke of the name (lookupSpoke). A Spoke
// that is gone or being deleted is unknown.
func (r *Recorder) spokeOf(ctx context.Context, sp ingest.Spoke) (*tugboatv1alpha1.Spoke, error) {
	if sp.Namespace == "" {
		return r.lookupSpoke(ctx, sp.Name)
	}
	obj := &tugboatv1alpha1.Spoke{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: sp.Namespace, Name: sp.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ingest.ErrUnknownSpoke
		}
		return nil, fmt.Errorf("reading spoke %s: %w", sp, err)
	}
	if obj.DeletionTimestamp != nil {
		return nil, ingest.ErrUnknownSpoke
	}
	return obj, nil
}

// lookupSpoke finds the Spoke by name across namespaces. A name that is
// ambiguous is treated as unknown.
func (r *Recorder) lookupSpoke(ctx context.Context, name string) (*tugboatv1alpha1.Spoke, error) {
	var list tugboatv1alpha1.SpokeList
	if err := r.client.List(ctx, &list, client.MatchingFields{SpokeNameIndex: name}); err != nil {
		return nil, fmt.Errorf("listing spokes: %w", err)
	}
	var live []tugboatv1alpha1.Spoke
	for _, s := range list.Items {
		if s.DeletionTimestamp == nil {
			live = append(live, s)
		}
	}
	if len(live) != 1 {
		return nil, ingest.ErrUnknownSpoke
	}
	return &live[0], nil
}

// SpokeKeys returns the spoke's keys from its key Secret, cached for
// KeyCacheTTL unless the Spoke's keys annotation
// (tugboatv1alpha1.KeysUpdatedAtAnnotation) or key Secret name changed since
// they were read, as webhook/receiver/spokedir does. The key material is
// used as stored (surrounding whitespace trimmed).
//
// This is the path of a receiver without a SpokeDirectory (the hub always
// has one): unlike spokedir it does not re-read keys when a request fails
// to verify, so a new key written without setting the annotation takes
// effect within KeyCacheTTL.
func (r *Recorder) SpokeKeys(ctx context.Context, spoke string) (ingest.SpokeKeys, error) {
	if !r.ready.Load() {
		return ingest.SpokeKeys{}, ingest.ErrNotReady
	}
	sp, err := r.lookupSpoke(ctx, spoke)
	if err != nil {
		return ingest.SpokeKeys{}, err
	}
	now := r.now()
	read := cachedKeys{uid: sp.UID, secret: sp.Spec.KeySecretRef.Name, annotation: sp.Annotations[tugboatv1alpha1.KeysUpdatedAtAnnotation]}
	r.mu.Lock()
	if c, ok := r.keys[spoke]; ok && now.Before(c.expires) && c.uid == read.uid && c.secret == read.secret && c.annotation == read.annotation {
		r.mu.Unlock()
		return c.keys, nil
	}
	r.mu.Unlock()
	keys, err := r.readKeys(ctx, sp)
	if err != nil {
		return ingest.SpokeKeys{}, err
	}
	read.keys, read.expires = keys, now.Add(r.opts.KeyCacheTTL)
	r.mu.Lock()
	r.keys[spoke] = read
	r.mu.Unlock()
	return keys, nil
}

func (r *Recorder) readKeys(ctx context.Context, sp *tugboatv1alpha1.Spoke) (ingest.SpokeKeys, error) {
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: sp.Namespace, Name: sp.Spec.KeySecretRef.Name}
	if err := r.bounded(ctx, func(ctx context.Context) error { return r.api.Get(ctx, key, secret) }); err != nil {
		if apierrors.IsNotFound(err) {
			// The Spoke controller generates it; until then the spoke
			// cannot authenticate.
			return ingest.SpokeKeys{}, ingest.ErrUnknownSpoke
		}
		return ingest.SpokeKeys{}, fmt.Errorf("reading key secret %s: %w", key, err)
	}
	cur := []byte(strings.TrimSpace(string(secret.Data[tugboatv1alpha1.SpokeKeySecretKey])))
	prev := []byte(strings.TrimSpace(string(secret.Data[tugboatv1alpha1.SpokePreviousKeySecretKey])))
	if len(cur) == 0 {
		return ingest.SpokeKeys{}, ingest.ErrUnknownSpoke
	}
	if len(prev) == 0 || hmac.Equal(prev, cur) {
		prev = nil
	}
	return ingest.SpokeKeys{Current: cur, Previous: prev}, nil
}

// RecordEvents applies events to the ReleaseHistories of the Spoke who
// (in its namespace) and returns once they are persisted.
func (r *Recorder) RecordEvents(ctx context.Context, who ingest.Spoke, events []wire.Event) error {
	if err := r.started(); err != nil {
		return err
	}
	sp, err := r.spokeOf(ctx, who)
	if err != nil {
		return err
	}
	// One op per ReleaseHistory, applying its events in the batch's order:
	// queued one by one, a writer could take the first event before the
	// others are queued and write the history twice for one batch.
	type target struct{ namespace, release string }
	var order []target
	byTarget := map[target][]int{}
	for i := range events {
		t := target{events[i].Namespace, events[i].Release}
		if _, ok := byTarget[t]; !ok {
			order = append(order, t)
		}
		byTarget[t] = append(byTarget[t], i)
	}
	var waits []chan error
	for _, t := range order {
		idx := byTarget[t]
		decisive := false
		for _, i := range idx {
			decisive = decisive || events[i].Decisive()
		}
		waits = append(waits, r.enqueue(sp, t.namespace, t.release, decisive, func(st *tugboatv1alpha1.ReleaseHistoryStatus, spec *tugboatv1alpha1.ReleaseHistorySpec) bool {
			changed := false
			for _, i := range idx {
				if recordEvent(st, spec, &events[i], r.opts.EventLimit) {
					changed = true
				}
			}
			capReported(st, r.now().Add(wire.DefaultWindow))
			return changed
		}))
	}
	return wait(ctx, waits)
}

// enqueue adds an op for the ReleaseHistory of (spoke, namespace, release)
// and returns a channel that receives the result of the write that
// includes it. The write waits for WriteInterval after the previous one
// (so that a burst of ops is one write), unless the op is decisive: it
// carries news a Pipeline decides on (wire.Event.Decisive), which is
// written as soon as no other write of the history is under way.
func (r *Recorder) enqueue(sp *tugboatv1alpha1.Spoke, namespace, release string, decisive bool, o op) chan error {
	key := types.NamespacedName{Namespace: sp.Namespace, Name: tugboatv1alpha1.ReleaseHistoryName(sp.Name, namespace, release)}
	ch := make(chan error, 1)
	r.mu.Lock()
	p := r.pending[key]
	if p == nil {
		p = &pending{}
		r.pending[key] = p
	}
	p.spec = tugboatv1alpha1.ReleaseHistorySpec{Spoke: sp.Name, Namespace: namespace, Release: release}
	p.owner = metav1.OwnerReference{
		APIVersion: tugboatv1alpha1.GroupVersion.String(), Kind: "Spoke", Name: sp.Name, UID: sp.UID,
		BlockOwnerDeletion: ptr.To(false),
	}
	p.ops = append(p.ops, o)
	p.waiters = append(p.waiters, ch)
	delay := time.Until(p.lastWrite.Add(r.opts.WriteInterval))
	r.mu.Unlock()
	if delay > 0 && !decisive {
		r.queue.AddAfter(key, delay)
	} else {
		r.queue.Add(key)
	}
	return ch
}

func (r *Recorder) processNext(ctx context.Context) bool {
	key, shutdown := r.queue.Get()
	if shutdown {
		return false
	}
	defer r.queue.Done(key)
	r.mu.Lock()
	p := r.pending[key]
	if p == nil {
		r.mu.Unlock()
		return true
	}
	if len(p.ops) == 0 {
		// Idle: forget the entry once its write interval has passed.
		if r.now().Sub(p.lastWrite) >= r.opts.WriteInterval {
			delete(r.pending, key)
		}
		r.mu.Unlock()
		return true
	}
	ops, waiters, spec, owner := p.ops, p.waiters, p.spec, p.owner
	p.ops, p.waiters, p.writing = nil, nil, true
	last := r.recent[key].obj
	r.mu.Unlock()

	written, err := r.write(ctx, key, spec, owner, ops, last)
	r.stats.Writes.Add(1)
	r.stats.WrittenOps.Add(int64(len(ops)))
	writesTotal.Inc()
	writtenOpsTotal.Add(float64(len(ops)))

	r.mu.Lock()
	p.lastWrite, p.writing = r.now(), false
	switch {
	case written != nil:
		r.remember(key, written)
	case err != nil:
		delete(r.recent, key)
	}
	r.mu.Unlock()
	for _, w := range waiters {
		w <- err
	}
	// Either writes what arrived meanwhile, or forgets the idle entry.
	r.queue.AddAfter(key, r.opts.WriteInterval)
	return true
}

// remember keeps obj as the recorder's last write of key, and forgets the
// writes older than recentKeep (at most once per recentKeep). The caller
// holds r.mu.
func (r *Recorder) remember(key types.NamespacedName, obj *tugboatv1alpha1.ReleaseHistory) {
	now := r.now()
	r.recent[key] = recentWrite{obj: obj, at: now}
	if now.Sub(r.recentSwept) < recentKeep {
		return
	}
	r.recentSwept = now
	for k, w := range r.recent {
		if now.Sub(w.at) >= recentKeep {
			delete(r.recent, k)
		}
	}
}

// write applies ops to the ReleaseHistory key, creating it if needed, and
// writes its status once. It starts from the cached copy, or from last
// (what this recorder wrote last) when the cache does not hold that yet.
// Conflicts are retried on a fresh read from the API server, and so is a
// history that is gone although last says otherwise. It returns the
// object as written (nil when nothing was written).
func (r *Recorder) write(ctx context.Context, key types.NamespacedName, spec tugboatv1alpha1.ReleaseHistorySpec, owner metav1.OwnerReference, ops []op,
	last *tugboatv1alpha1.ReleaseHistory) (*tugboatv1alpha1.ReleaseHistory, error) {
	var reader client.Reader = r.client
	for attempt := 0; ; attempt++ {
		var written *tugboatv1alpha1.ReleaseHistory
		err := r.bounded(ctx, func(ctx context.Context) (err error) {
			written, err = r.tryWrite(ctx, reader, key, spec, owner, ops, last)
			return err
		})
		retry := apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || (last != nil && apierrors.IsNotFound(err))
		if err == nil || attempt >= 5 || !retry {
			if err != nil {
				return nil, fmt.Errorf("writing ReleaseHistory %s: %w", key, err)
			}
			return written, nil
		}
		reader, last = r.api, nil
	}
}

func (r *Recorder) tryWrite(ctx context.Context, reader client.Reader, key types.NamespacedName, spec tugboatv1alpha1.ReleaseHistorySpec, owner metav1.OwnerReference, ops []op,
	last *tugboatv1alpha1.ReleaseHistory) (*tugboatv1alpha1.ReleaseHistory, error) {
	rh := &tugboatv1alpha1.ReleaseHistory{}
	err := reader.Get(ctx, key, rh)
	if last != nil && (apierrors.IsNotFound(err) || (err == nil && rh.ResourceVersion != last.ResourceVersion)) {
		// The cache is behind this recorder's own last write (or another
		// replica wrote since: the write then conflicts and is retried on
		// a read from the API server).
		rh, err = last.DeepCopy(), nil
		r.stats.FromLastWrite.Add(1)
		fromLastWriteTotal.Inc()
	}
	if apierrors.IsNotFound(err) && reader != r.api && r.hasWritten(key) {
		// This recorder wrote it, so the cache is behind (relisting, say):
		// ask the API server rather than create it blindly, which costs a
		// refused POST before the same read.
		err = r.api.Get(ctx, key, rh)
	}
	switch {
	case apierrors.IsNotFound(err):
		rh = &tugboatv1alpha1.ReleaseHistory{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: key.Namespace, Name: key.Name,
				Labels: map[string]string{
					tugboatv1alpha1.LabelSpoke: spec.Spoke, tugboatv1alpha1.LabelRelease: spec.Release, tugboatv1alpha1.LabelReleaseNamespace: spec.Namespace,
				},
				OwnerReferences: []metav1.OwnerReference{owner},
			},
			Spec: spec,
		}
		// Spec fields ops may fill (the HelmRelease) are set before create.
		probe := rh.Status.DeepCopy()
		for _, o := range ops {
			o(probe, &rh.Spec)
		}
		if err := r.client.Create(ctx, rh); err != nil {
			return nil, err
		}
		r.wrote(key, rh.ResourceVersion)
	case err != nil:
		return nil, err
	}
	specBefore := rh.Spec.DeepCopy()
	before := rh.Status.DeepCopy()
	changed := false
	for _, o := range ops {
		if o(&rh.Status, &rh.Spec) {
			changed = true
		}
	}
	if !apiequality.Semantic.DeepEqual(specBefore, &rh.Spec) {
		status := rh.Status.DeepCopy()
		if err := r.client.Update(ctx, rh); err != nil {
			return nil, err
		}
		r.wrote(key, rh.ResourceVersion)
		rh.Status = *status
	}
	trim(&rh.Status, r.opts.RevisionLimit, r.opts.MaxStatusBytes)
	setReady(rh)
	if !changed && apiequality.Semantic.DeepEqual(before, &rh.Status) {
		return nil, nil
	}
	if err := r.client.Status().Update(ctx, rh); err != nil {
		return nil, err
	}
	r.wrote(key, rh.ResourceVersion)
	return rh, nil
}

// setReady mirrors the current revision's health into the Ready condition.
func setReady(rh *tugboatv1alpha1.ReleaseHistory) {
	cond := metav1.Condition{Type: tugboatv1alpha1.ReadyCondition.String(), ObservedGeneration: rh.Generation}
	switch {
	case rh.Status.Current == nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, "NoRevision", "no revision reported yet"
	case rh.Status.Current.Status == tugboatv1alpha1.ReleaseStatusUninstalled:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Uninstalled", "the release is not installed on the spoke"
	case rh.Status.Current.Health == tugboatv1alpha1.HealthCurrent:
		cond.Status, cond.Reason = metav1.ConditionTrue, "Current"
		cond.Message = fmt.Sprintf("revision %d (%s %s) is healthy", rh.Status.Current.Revision, rh.Status.Current.Chart, rh.Status.Current.ChartVersion)
	case rh.Status.Current.Health == tugboatv1alpha1.HealthFailed:
		cond.Status, cond.Reason = metav1.ConditionFalse, "Failed"
		cond.Message = orDefault(rh.Status.Current.HealthReason, "the release failed")
	case rh.Status.Current.Health == tugboatv1alpha1.HealthUnknown:
		// e.g. after a Flux remediation: nothing the spoke sent tells.
		cond.Status, cond.Reason = metav1.ConditionUnknown, "HealthUnknown"
		cond.Message = orDefault(rh.Status.Current.HealthReason, "the release's health is not known")
	default:
		cond.Status, cond.Reason = metav1.ConditionUnknown, "InProgress"
		cond.Message = orDefault(rh.Status.Current.HealthReason, "rollout in progress")
	}
	cond.Message = clip.String(cond.Message, 1024)
	apimeta.SetStatusCondition(&rh.Status.Conditions, cond)
	rh.Status.ObservedGeneration = rh.Generation
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// wait returns the first error of waits, or ctx's error.
func wait(ctx context.Context, waits []chan error) error {
	var errs []error
	for _, w := range waits {
		select {
		case err := <-w:
			if err != nil {
				errs = append(errs, err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}
