package receiver

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"tugboat.dev/tugboat/api/wire"
)

// A state snapshot is level state: the hub reconciles the spoke's releases
// against it, and a release missing from it is marked uninstalled. An old
// snapshot replayed (a captured request, within the replay window) could
// therefore undo what happened since. Two guards keep it from doing so:
//
//   - Each snapshot of a Spoke must be taken after the last one recorded:
//     its takenAt (the spoke's clock) must be later than the newest takenAt
//     this replica recorded and than the one persisted on the Spoke. An
//     older or equal one is answered 409 with a body naming both times; the
//     agent then takes a fresh snapshot. The Store persists the time with
//     the spoke's heartbeat (every --spoke-heartbeat-refresh), not on every
//     snapshot: one API write per snapshot of every spoke was the largest
//     load a fleet put on the API server.
//   - So another replica, or a restarted hub, may accept a replayed
//     snapshot taken after the persisted time. The Store records, on each
//     release's history, the time of the newest report (event or snapshot)
//     that changed it, and a snapshot taken before that changes nothing
//     there (see Store.RecordState): a replay can only repeat what the hub
//     already holds.
//
// A takenAt more than the replay window ahead of the hub's clock is
// refused (400), so a spoke's wrong clock cannot stop it from reporting
// later.

// stateFloors remembers, per Spoke, the newest takenAt recorded by this
// replica, and serializes a Spoke's state posts so that two cannot pass the
// check and then record in the wrong order. Its size follows the number of
// authenticated Spokes.
type stateFloors struct {
	mu sync.Mutex
	m  map[SpokeRef]*stateFloor
}

type stateFloor struct {
	mu      sync.Mutex
	takenAt time.Time
}

func newStateFloors() *stateFloors { return &stateFloors{m: make(map[SpokeRef]*stateFloor)} }

func (f *stateFloors) of(ref SpokeRef) *stateFloor {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.m[ref]
	if fl == nil {
		fl = &stateFloor{}
		f.m[ref] = fl
	}
	return fl
}

// recordState records snap for sp when it was taken after every snapshot
// recorded for sp, and updates the revision tracker.
// It answers 400, 409 or 503 and returns false otherwise.
func (s *Server) recordState(ctx context.Context, w http.ResponseWriter, sp *Spoke, snap *wire.StateSnapshot) bool {
	const ep = endpointState
	if limit := s.now().Add(s.opts.ReplayWindow); snap.TakenAt.After(limit) {
		s.badInput(w, ep, sp.Name, &wire.InvalidError{Errors: []wire.FieldError{{
			Field:  "takenAt",
			Detail: fmt.Sprintf("%s is more than %s ahead of the hub's clock: check the spoke's clock", snap.TakenAt.UTC().Format(time.RFC3339Nano), s.opts.ReplayWindow),
		}}})
		return false
	}
	fl := s.states.of(sp.SpokeRef)
	fl.mu.Lock()
	defer fl.mu.Unlock()
	floor := fl.takenAt
	if sp.LastSnapshotTakenAt.After(floor) {
		floor = sp.LastSnapshotTakenAt
	}
	// Compared to the microsecond, the precision the Spoke's status keeps.
	takenAt := snap.TakenAt.Truncate(time.Microsecond)
	if !takenAt.After(floor) {
		s.reject(ep, reasonStaleSnapshot, sp.String(), "takenAt", snap.TakenAt, "lastRecorded", floor)
		writeError(w, http.StatusConflict, wire.ErrorResponse{
			Error: fmt.Sprintf("stale snapshot: takenAt %s is not after the last snapshot recorded for spoke %s (taken at %s): send a new snapshot",
				snap.TakenAt.UTC().Format(time.RFC3339Nano), sp.Name, floor.UTC().Format(time.RFC3339Nano)),
			Fields: []wire.FieldError{{Field: "takenAt", Detail: "must be after " + floor.UTC().Format(time.RFC3339Nano)}},
		})
		return false
	}
	if err := s.store.RecordState(ctx, sp.Authenticated(), snap); err != nil {
		s.unavailable(w, ep, sp.Name, "recording state", err)
		return false
	}
	fl.takenAt = takenAt
	s.revs.observeSnapshot(sp.String(), snap)
	return true
}
