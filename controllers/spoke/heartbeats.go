package spoke

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Heartbeats tells when any hub replica last heard a spoke's agent: the
// replicas' heartbeat digests (controllers/heartbeat.Index), read from the
// cache. The hub writes a Spoke's status.lastSeen only on a change of
// readiness or every --spoke-heartbeat-refresh, so readiness comes from the
// newest of lastSeen and the digests.
type Heartbeats interface {
	// LastHeard returns the newest time a digest heard spoke (zero: none).
	LastHeard(ctx context.Context, spoke types.NamespacedName) (time.Time, error)
	// Object is the kind of the digests, watched so that a spoke heard
	// again while not Ready is reconciled without waiting.
	Object() client.Object
	// HeardIn returns the spokes one digest object heard, and when.
	HeardIn(o client.Object) map[types.NamespacedName]time.Time
}

// notHeard is the set of Spokes whose last reconcile found no heartbeat
// within the timeout: a digest that hears one of them brings it back.
type notHeard struct{ m sync.Map }

func (n *notHeard) set(k types.NamespacedName, lost bool) {
	if lost {
		n.m.Store(k, struct{}{})
	} else {
		n.m.Delete(k)
	}
}

func (n *notHeard) has(k types.NamespacedName) bool { _, ok := n.m.Load(k); return ok }

// lastHeard returns the newest time sp's agent was heard from: its
// status.lastSeen or, newer, a replica's digest (zero when neither). A
// digest that cannot be read counts as none: the spoke is judged by
// lastSeen alone, and the error logged.
func (r *Reconciler) lastHeard(ctx context.Context, sp *tugboatv1alpha1.Spoke) time.Time {
	var seen time.Time
	if sp.Status.LastSeen != nil {
		seen = sp.Status.LastSeen.Time
	}
	if r.Heartbeats == nil {
		return seen
	}
	t, err := r.Heartbeats.LastHeard(ctx, client.ObjectKeyFromObject(sp))
	if err != nil {
		log.FromContext(ctx).Error(err, "reading the heartbeat digests; judging the spoke by status.lastSeen")
		return seen
	}
	if t.After(seen) {
		return t
	}
	return seen
}

// recordLastSeen writes seen as status.lastSeen when it is newer: on a
// change of readiness, so that a lost spoke shows when it was last heard,
// and one back shows it was heard again.
func recordLastSeen(sp *tugboatv1alpha1.Spoke, seen time.Time) {
	if sp.Status.LastSeen == nil || seen.Truncate(time.Second).After(sp.Status.LastSeen.Time) {
		sp.Status.LastSeen = &metav1.Time{Time: seen.Truncate(time.Second)}
	}
}

// heardAgain maps a digest to the Spokes it heard within the heartbeat
// timeout whose last reconcile found them not heard from.
func (r *Reconciler) heardAgain(_ context.Context, o client.Object) []reconcile.Request {
	now := r.Now()
	var reqs []reconcile.Request
	for k, t := range r.Heartbeats.HeardIn(o) {
		if r.notHeard.has(k) && now.Sub(t) <= r.Options.HeartbeatTimeout {
			reqs = append(reqs, reconcile.Request{NamespacedName: k})
		}
	}
	return reqs
}
