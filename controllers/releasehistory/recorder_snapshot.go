package releasehistory

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
)

// A spoke posts its full state every 30 s: with 5,000 spokes, 170
// snapshots a second, nearly all of them unchanged. They cost no write:
// releases equal to their cached ReleaseHistory skip the write queue
// (unchanged), and the Spoke's heartbeat is written only when a reported
// field changed or lastSeen grew older than HeartbeatRefresh (heartbeat).

// Stats counts what the Recorder did with state snapshots, for metrics
// and benchmarks.
type Stats struct {
	// UnchangedReleases counts releases of state snapshots found equal to
	// their cached ReleaseHistory and not queued for a write.
	UnchangedReleases atomic.Int64
	// HeartbeatsSkipped counts snapshots that wrote no heartbeat on their
	// Spoke (nothing changed, lastSeen younger than HeartbeatRefresh).
	HeartbeatsSkipped atomic.Int64
	// Heartbeats counts heartbeats written on Spokes.
	Heartbeats atomic.Int64
	// StaleReleases counts releases of state snapshots left alone because
	// a newer report (an event, or a later snapshot) changed their history
	// after the snapshot was taken: a late or replayed snapshot.
	StaleReleases atomic.Int64
	// FromLastWrite counts writes that started from the recorder's own
	// last write of the history because the cache had not caught up with
	// it (each one a conflict saved).
	FromLastWrite atomic.Int64
	// Writes counts ReleaseHistory writes by the write queue (a write that
	// found nothing to change included), and WrittenOps the ops they
	// applied (one per event batch or snapshot touching the history): their
	// ratio is how much the queue coalesced.
	Writes, WrittenOps atomic.Int64
}

// The Recorders' counters as metrics, for every Recorder of the process
// (as tugboat_history_stalled).
var (
	unchangedReleasesTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tugboat_recorder_snapshot_releases_unchanged_total",
		Help: "Releases of state snapshots found equal to their ReleaseHistory and not written.",
	})
	staleReleasesTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tugboat_recorder_snapshot_releases_stale_total",
		Help: "Releases of state snapshots left alone because a newer report changed their ReleaseHistory after the snapshot was taken (a late or replayed snapshot).",
	})
	heartbeatsSkippedTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tugboat_recorder_heartbeats_skipped_total",
		Help: "State snapshots that wrote no heartbeat on their Spoke (nothing changed, lastSeen younger than --spoke-heartbeat-refresh).",
	})
	heartbeatsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tugboat_recorder_heartbeats_total",
		Help: "Heartbeats written on Spokes.",
	})
	writesTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tugboat_recorder_writes_total",
		Help: "ReleaseHistory writes by the recorder's queue (those that found nothing to change included).",
	})
	fromLastWriteTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tugboat_recorder_writes_from_last_write_total",
		Help: "ReleaseHistory writes that started from the recorder's own last write because the informer cache had not caught up with it (each a conflict saved); a steady rate means the cache lags the API server.",
	})
	writtenOpsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tugboat_recorder_written_ops_total",
		Help: "Ops (an event batch's or a snapshot's changes to one ReleaseHistory) applied by those writes; ops/writes is the coalescing.",
	})
)

func init() {
	metrics.Registry.MustRegister(unchangedReleasesTotal, staleReleasesTotal, fromLastWriteTotal, heartbeatsSkippedTotal, heartbeatsTotal, writesTotal, writtenOpsTotal)
}

// RecordState reconciles the releases of the Spoke who (in its namespace)
// with snap, records the heartbeat on it (with who.KeyID), and returns once
// everything is persisted.
func (r *Recorder) RecordState(ctx context.Context, who ingest.Spoke, snap *wire.StateSnapshot) error {
	if err := r.started(); err != nil {
		return err
	}
	sp, err := r.spokeOf(ctx, who)
	if err != nil {
		return err
	}
	present := map[string]bool{}
	var waits []chan error
	// stale flags the releases left alone as older than their history's
	// news (each counted once, whichever of the checks below saw it).
	stale := make([]atomic.Bool, len(snap.Releases))
	for i := range snap.Releases {
		s := snap.Releases[i]
		name := tugboatv1alpha1.ReleaseHistoryName(sp.Name, s.Namespace, s.Release)
		present[name] = true
		o := func(st *tugboatv1alpha1.ReleaseHistoryStatus, spec *tugboatv1alpha1.ReleaseHistorySpec) bool {
			if reportedSince(st, snap.TakenAt) {
				// Newer news is recorded: this snapshot is late or replayed.
				stale[i].Store(true)
				return false
			}
			before := st.DeepCopy()
			applyState(st, &s)
			if s.HelmRelease != nil && spec.HelmRelease == nil {
				spec.HelmRelease = &tugboatv1alpha1.ObjectReference{Namespace: s.HelmRelease.Namespace, Name: s.HelmRelease.Name}
			}
			if apiequality.Semantic.DeepEqual(before, st) {
				return false
			}
			reported(st, snap.TakenAt)
			return true
		}
		if r.unchanged(ctx, types.NamespacedName{Namespace: sp.Namespace, Name: name}, o) {
			if !stale[i].Load() {
				r.stats.UnchangedReleases.Add(1)
				unchangedReleasesTotal.Inc()
			}
			continue
		}
		waits = append(waits, r.enqueue(sp, s.Namespace, s.Release, false, o))
	}
	var absent []*atomic.Bool // stale flags of the uninstalls
	var known tugboatv1alpha1.ReleaseHistoryList
	if err := r.client.List(ctx, &known, client.InNamespace(sp.Namespace), client.MatchingFields{HistorySpokeIndex: sp.Name}); err != nil {
		return fmt.Errorf("listing release histories of spoke %s: %w", sp.Name, err)
	}
	for i := range known.Items {
		rh := &known.Items[i]
		if present[rh.Name] || rh.Status.Current == nil || rh.Status.Current.Status == tugboatv1alpha1.ReleaseStatusUninstalled {
			continue
		}
		var late atomic.Bool
		waits = append(waits, r.enqueue(sp, rh.Spec.Namespace, rh.Spec.Release, false, func(st *tugboatv1alpha1.ReleaseHistoryStatus, _ *tugboatv1alpha1.ReleaseHistorySpec) bool {
			if reportedSince(st, snap.TakenAt) {
				// Installed (or changed) after the snapshot was taken.
				late.Store(true)
				return false
			}
			if !markUninstalled(st) {
				return false
			}
			reported(st, snap.TakenAt)
			return true
		}))
		absent = append(absent, &late)
	}
	err = wait(ctx, waits)
	n := 0
	for i := range stale {
		if stale[i].Load() {
			n++
		}
	}
	for _, f := range absent {
		if f.Load() {
			n++
		}
	}
	r.countStale(n)
	if err != nil {
		return err
	}
	// The heartbeat comes last: a Ready Spoke means its releases are
	// recorded, so a missing ReleaseHistory means a missing release.
	return r.heartbeat(ctx, sp, who.KeyID, snap)
}

func (r *Recorder) countStale(n int) {
	r.stats.StaleReleases.Add(int64(n))
	staleReleasesTotal.Add(float64(n))
}

// EventSigningKeyChanged is the reason of the Event on a Spoke whose agent
// signs with another key than before.
const EventSigningKeyChanged = "SigningKeyChanged"

// HeartbeatSink collects the spokes heard from (controllers/heartbeat.Writer,
// a digest per hub replica, which the Spoke controller reads for readiness).
type HeartbeatSink interface {
	// Heard records that the agent of Spoke namespace/name was heard from
	// at at. It must not block. It reports whether the digest is being
	// written: while it is not, the recorder writes lastSeen at least
	// every HeartbeatRefreshWithoutDigest.
	Heard(namespace, name string, at time.Time) bool
}

// heartbeat records on the Spoke that its agent was heard from: in the
// heartbeat digest (Heartbeats) always, and on the Spoke's status when
// needed. sp is the Spoke as the cache holds it: when the snapshot changes
// none of the fields the heartbeat writes, the recorded lastSeen is
// younger than HeartbeatRefresh and the Spoke is not waiting for a
// heartbeat (Ready Unknown, AgentNotSeen: a spoke back is written at once,
// so that it is Ready without waiting for a digest), nothing is written (the cache can only be behind the
// API server, so a lastSeen it shows is at most as young as the stored
// one; a lagging cache costs an extra write, never a missed one). id is
// the wire.KeyID of the key that verified the snapshot (status.signingKeyID;
// "" leaves it alone).
func (r *Recorder) heartbeat(ctx context.Context, sp *tugboatv1alpha1.Spoke, id string, snap *wire.StateSnapshot) error {
	now := r.now().UTC()
	patch := &tugboatv1alpha1.Spoke{}
	patch.Status.LastSeen = &metav1.Time{Time: now.Truncate(time.Second)}
	patch.Status.AgentVersion = snap.AgentVersion
	patch.Status.KubernetesVersion = snap.KubernetesVersion
	patch.Status.ReleaseCount = clampRevision(len(snap.Releases))
	keyID, hasID := "", id != ""
	if hasID {
		keyID = fmt.Sprintf(`,"signingKeyID":%q`, id)
	}
	refresh := r.opts.HeartbeatRefresh
	if r.Heartbeats != nil && !r.Heartbeats.Heard(sp.Namespace, sp.Name, now) {
		// The digest is not written: lastSeen must carry readiness.
		refresh = min(refresh, r.opts.HeartbeatRefreshWithoutDigest)
	}
	st := &sp.Status
	if st.LastSeen != nil && now.Sub(st.LastSeen.Time) < refresh && !waitingForHeartbeat(sp) &&
		st.AgentVersion == snap.AgentVersion && st.KubernetesVersion == snap.KubernetesVersion &&
		st.AgentProtocolVersion == clampRevision(snap.ProtocolVersion) && st.ReleaseCount == patch.Status.ReleaseCount &&
		(!hasID || st.SigningKeyID == id) {
		r.stats.HeartbeatsSkipped.Add(1)
		heartbeatsSkippedTotal.Inc()
		return nil
	}
	// The snapshot's time goes with it: the receiver refuses snapshots
	// taken at or before it, after a restart and on other replicas too.
	takenAt, err := metav1.NewMicroTime(snap.TakenAt.UTC().Truncate(time.Microsecond)).MarshalJSON()
	if err != nil {
		return err
	}
	data := fmt.Sprintf(`{"status":{"lastSeen":%q,"agentVersion":%q,"agentProtocolVersion":%d,"kubernetesVersion":%q,"releaseCount":%d,"lastSnapshotTakenAt":%s%s}}`,
		patch.Status.LastSeen.Format(time.RFC3339), patch.Status.AgentVersion, snap.ProtocolVersion, patch.Status.KubernetesVersion, patch.Status.ReleaseCount, takenAt, keyID)
	previousKeyID := st.SigningKeyID // the patch below updates sp from the answer
	if err := r.bounded(ctx, func(ctx context.Context) error {
		return r.client.Status().Patch(ctx, sp, client.RawPatch(types.MergePatchType, []byte(data)))
	}); err != nil {
		return fmt.Errorf("recording heartbeat of spoke %s: %w", sp.Name, err)
	}
	if hasID && previousKeyID != "" && previousKeyID != id && r.Events != nil {
		// Key ids are fingerprints (wire.KeyID), not keys.
		r.Events.Eventf(sp, nil, corev1.EventTypeNormal, EventSigningKeyChanged, "Rotate",
			"the agent signs with key %s now, no longer with %s (a key rotation)", id, previousKeyID)
	}
	r.stats.Heartbeats.Add(1)
	heartbeatsTotal.Inc()
	return nil
}

// waitingForHeartbeat reports whether sp's Ready condition says its agent
// was not heard from (Unknown, AgentNotSeen).
func waitingForHeartbeat(sp *tugboatv1alpha1.Spoke) bool {
	c := apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
	return c != nil && c.Status == metav1.ConditionUnknown && c.Reason == tugboatv1alpha1.AgentNotSeenReason.String()
}

// unchanged reports whether applying o to the cached ReleaseHistory key
// would write nothing, so a state snapshot can skip the write queue (and
// its wait). It answers false, and the op goes through the queue, whenever
// the op could overtake another or the cached copy may be behind: the key
// has queued ops or a write in flight, or the cache does not hold the
// version this recorder last wrote. A copy
// behind another replica's write is compared all the same: at worst the
// snapshot is applied one snapshot later, as it would be if it had come
// first.
func (r *Recorder) unchanged(ctx context.Context, key types.NamespacedName, o op) bool {
	r.mu.Lock()
	p := r.pending[key]
	busy := p != nil && (len(p.ops) > 0 || p.writing)
	last, wrote := r.written[key]
	r.mu.Unlock()
	if busy {
		return false
	}
	rh := &tugboatv1alpha1.ReleaseHistory{}
	if err := r.client.Get(ctx, key, rh); err != nil {
		return false
	}
	if wrote && rh.ResourceVersion != last {
		return false
	}
	before := rh.DeepCopy()
	if o(&rh.Status, &rh.Spec) {
		return false
	}
	trim(&rh.Status, r.opts.RevisionLimit, r.opts.MaxStatusBytes)
	setReady(rh)
	return apiequality.Semantic.DeepEqual(before.Spec, rh.Spec) && apiequality.Semantic.DeepEqual(before.Status, rh.Status)
}

// hasWritten reports whether this recorder wrote the ReleaseHistory key.
func (r *Recorder) hasWritten(key types.NamespacedName) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.written[key]
	return ok
}

// wrote remembers the version of a ReleaseHistory this recorder wrote.
func (r *Recorder) wrote(key types.NamespacedName, rv string) {
	r.mu.Lock()
	r.written[key] = rv
	r.mu.Unlock()
}
