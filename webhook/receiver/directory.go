package receiver

import (
	"context"
	"errors"
	"time"

	"tugboat.dev/tugboat/controllers/ingest"
)

// SpokeRef identifies a Spoke object: its namespace and name.
type SpokeRef struct {
	Namespace string
	Name      string
}

// String returns namespace/name, or the name alone when the namespace is
// not known (a Store without a SpokeDirectory).
func (r SpokeRef) String() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// Spoke is what the receiver needs to know of one Spoke object.
type Spoke struct {
	SpokeRef
	// Keys are the keys the spoke's agent signs with.
	Keys ingest.SpokeKeys
	// FluxKeys are the keys of the spoke's Flux notification-controller
	// Provider (generic-hmac), separate from the agent's: whoever reads the
	// Provider's Secret on the spoke cannot act as its agent. Empty: the
	// Flux endpoint refuses the spoke.
	FluxKeys ingest.SpokeKeys
	// Suspended is spec.suspend: the receiver answers the spoke's
	// authenticated requests 503.
	Suspended bool
	// LastSnapshotTakenAt is the takenAt of a state snapshot recorded for
	// the spoke, as the Store persisted it (zero when none): a snapshot
	// must be taken after it. The Store persists it with the spoke's
	// heartbeat, not on every snapshot, so it may lag the newest one by
	// the heartbeat refresh (see Store.RecordState).
	LastSnapshotTakenAt time.Time
	// SignedWith is set by the receiver on an authenticated request: the
	// wire.KeyID of the key that verified it.
	SignedWith string
}

// SpokeDirectory finds the Spokes a request path names. Spoke names are
// unique per namespace only, so one name may match Spokes in several
// namespaces (a tenant may squat on another's name); the receiver tells
// them apart by the key that verifies the request, and records into that
// one Spoke (Spoke.Authenticated, passed to the Store explicitly). The hub implements it over the API server
// (webhook/receiver/spokedir).
type SpokeDirectory interface {
	// Spokes returns every live Spoke named name, in any namespace (none
	// for an unknown name), or ingest.ErrNotReady.
	Spokes(ctx context.Context, name string) ([]Spoke, error)
}

// KeyRefresher is implemented by a SpokeDirectory that caches keys. When a
// request of a known Spoke fails to verify with the keys Spokes gave (a
// signature mismatch, not a stale timestamp or a malformed header), the
// receiver asks it for the keys as stored now, and verifies once more only
// when they differ: a key written a moment ago (a rotation, a new Flux key)
// works on its first request, and a bad signature, which cannot change the
// stored keys, costs no extra verification.
type KeyRefresher interface {
	// RefreshKeys returns sp with its agent and Flux keys as stored now,
	// and whether they differ from sp's. It reads the keys at most once per
	// second per Spoke, and at a bounded rate over all Spokes (so bad
	// signatures cannot drive reads at line rate, even naming many spokes);
	// between reads, and over the bound, it answers from what it read last.
	RefreshKeys(ctx context.Context, sp Spoke) (Spoke, bool, error)
}

// storeDirectory is the SpokeDirectory of a receiver without
// Options.Spokes: Store.SpokeKeys gives one spoke per name, with no Flux
// keys (the Flux endpoint refuses every request), never suspended, and
// no persisted snapshot time (the receiver's own floor only).
type storeDirectory struct{ store ingest.Store }

func (d storeDirectory) Spokes(ctx context.Context, name string) ([]Spoke, error) {
	keys, err := d.store.SpokeKeys(ctx, name)
	switch {
	case errors.Is(err, ingest.ErrUnknownSpoke):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return []Spoke{{SpokeRef: SpokeRef{Name: name}, Keys: keys}}, nil
}

// Authenticated returns the Spoke as the receiver hands it to the Store and
// the ingest.ActionStore: its namespace and name, and the id of the key that
// verified the request.
func (sp *Spoke) Authenticated() ingest.Spoke {
	return ingest.Spoke{Namespace: sp.Namespace, Name: sp.Name, KeyID: sp.SignedWith}
}

// FluxEventSummary is what the receiver tells a FluxEventRecorder of an
// accepted Flux event.
type FluxEventSummary struct {
	ReceivedAt time.Time
	// Reason is the event's reason, at most 256 characters.
	Reason string
	// Object is <Kind>/<namespace>/<name> of the involved object, at most
	// 600 characters.
	Object string
	// KeyID is the wire.KeyID of the Flux key that verified it.
	KeyID string
}

// FluxEventRecorder is implemented by a SpokeDirectory that records on the
// Spoke the last Flux event the receiver accepted from it (the liveness of
// an agentless spoke). The receiver calls it after recording the event; a
// failure is logged and does not fail the request.
type FluxEventRecorder interface {
	FluxEventReceived(ctx context.Context, ref SpokeRef, ev FluxEventSummary) error
}
