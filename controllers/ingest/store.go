package ingest

import (
	"context"
	"errors"

	"tugboat.dev/tugboat/api/wire"
)

// ErrUnknownSpoke is returned by Store.SpokeKeys for a spoke the hub does not
// know (or whose name is ambiguous). The receiver answers 401 without saying
// which.
var ErrUnknownSpoke = errors.New("unknown spoke")

// ErrNotReady is returned by a Store (or the receiver's spoke directory)
// that cannot serve yet (caches not synced). The receiver answers 503.
var ErrNotReady = errors.New("hub not ready")

// SpokeKeys are the HMAC keys a spoke may sign with: Current always, and
// Previous during a key rotation.
type SpokeKeys struct {
	Current  []byte
	Previous []byte
}

// Store is what the receiver (webhook/receiver) needs from the hub: keys to
// verify requests, and a place to record what arrived. The hub implements it
// over the API server (controllers/releasehistory); tests may use an
// in-memory one.
//
// Record methods are called only with validated, de-duplicated input from a
// verified spoke, named by the Spoke the receiver authenticated (namespace,
// name and the id of the key that verified the request): they record into
// that Spoke and never look it up by name, so a Spoke of the same name in
// another namespace can neither block it nor receive its data. They must be
// safe for concurrent use and should return
// quickly: persistence may be asynchronous (coalesced), as long as an error
// that means "not recorded" is returned (the receiver answers 503 and the
// agent retries).
type Store interface {
	// SpokeKeys returns the keys of the named spoke, or ErrUnknownSpoke.
	SpokeKeys(ctx context.Context, spoke string) (SpokeKeys, error)
	// RecordEvents records events from sp (already de-duplicated by id).
	RecordEvents(ctx context.Context, sp Spoke, events []wire.Event) error
	// RecordState reconciles sp's full state with snap: releases
	// missing from it are uninstalled, unknown ones are created. It is also
	// the spoke's heartbeat, and it persists snap.TakenAt as the spoke's
	// last snapshot time (the receiver's Spoke.LastSnapshotTakenAt) whenever it persists
	// the heartbeat, with sp.KeyID (the key the agent signs with). Each
	// release's record must keep the time of the
	// newest report that changed it and ignore a snapshot taken before it,
	// so that a replayed older snapshot, which the lagging persisted time
	// may let through, cannot undo newer news.
	RecordState(ctx context.Context, sp Spoke, snap *wire.StateSnapshot) error
}
