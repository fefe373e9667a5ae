package receiver_test

import (
	"context"
	"sync"
	"time"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/webhook/receiver"
)

// testNamespace is the namespace of the spokes setKeys registers.
const testNamespace = "tenant-a"

// memStore is an in-memory ingest.Store and receiver.SpokeDirectory:
// maps behind a mutex.
type memStore struct {
	mu     sync.Mutex
	spokes []receiver.Spoke
	events map[string][]wire.Event
	// into counts the events recorded into each Spoke (namespace/name), as
	// the receiver named it.
	into map[string]int
	// signedWith is the key id of each Spoke's last snapshot, as the
	// receiver named it.
	signedWith map[string]string
	snapshots  map[string][]*wire.StateSnapshot
	// keysErr and recordErr, when set, are returned by SpokeKeys and the
	// Record methods.
	keysErr   error
	recordErr error
	// onRecord, when set, runs at the start of every RecordEvents call,
	// outside the lock; an error it returns fails the call, which then
	// records nothing.
	onRecord func(events []wire.Event) error
}

var (
	_ ingest.Store            = (*memStore)(nil)
	_ receiver.SpokeDirectory = (*memStore)(nil)
)

func newMemStore() *memStore {
	return &memStore{
		events:     make(map[string][]wire.Event),
		into:       make(map[string]int),
		signedWith: make(map[string]string),
		snapshots:  make(map[string][]*wire.StateSnapshot),
	}
}

// spoke returns the Spoke name in testNamespace, added when missing. The
// caller holds the lock.
func (m *memStore) spoke(name string) *receiver.Spoke {
	for i := range m.spokes {
		if m.spokes[i].Name == name && m.spokes[i].Namespace == testNamespace {
			return &m.spokes[i]
		}
	}
	m.spokes = append(m.spokes, receiver.Spoke{SpokeRef: receiver.SpokeRef{Namespace: testNamespace, Name: name}})
	return &m.spokes[len(m.spokes)-1]
}

// setKeys sets the agent keys of Spoke spoke in testNamespace.
func (m *memStore) setKeys(spoke string, current, previous []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spoke(spoke).Keys = ingest.SpokeKeys{Current: current, Previous: previous}
}

// setFluxKeys sets the Flux keys of Spoke spoke in testNamespace.
func (m *memStore) setFluxKeys(spoke string, current, previous []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spoke(spoke).FluxKeys = ingest.SpokeKeys{Current: current, Previous: previous}
}

// suspend sets spec.suspend of Spoke spoke in testNamespace.
func (m *memStore) suspend(spoke string, suspended bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spoke(spoke).Suspended = suspended
}

// addSpoke registers another Spoke (another namespace, say).
func (m *memStore) addSpoke(sp receiver.Spoke) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spokes = append(m.spokes, sp)
}

// lastSnapshotTakenAt is the snapshot time persisted for the Spoke ref.
func (m *memStore) lastSnapshotTakenAt(ref receiver.SpokeRef) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, sp := range m.spokes {
		if sp.SpokeRef == ref {
			return sp.LastSnapshotTakenAt
		}
	}
	return time.Time{}
}

// Spokes implements receiver.SpokeDirectory.
func (m *memStore) Spokes(_ context.Context, name string) ([]receiver.Spoke, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keysErr != nil {
		return nil, m.keysErr
	}
	var out []receiver.Spoke
	for _, sp := range m.spokes {
		if sp.Name == name {
			out = append(out, sp)
		}
	}
	return out, nil
}

// hookRecord sets onRecord.
func (m *memStore) hookRecord(fn func(events []wire.Event) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onRecord = fn
}

func (m *memStore) fail(keysErr, recordErr error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keysErr, m.recordErr = keysErr, recordErr
}

func (m *memStore) SpokeKeys(_ context.Context, spoke string) (ingest.SpokeKeys, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keysErr != nil {
		return ingest.SpokeKeys{}, m.keysErr
	}
	var found []ingest.SpokeKeys
	for _, sp := range m.spokes {
		if sp.Name == spoke {
			found = append(found, sp.Keys)
		}
	}
	if len(found) != 1 {
		return ingest.SpokeKeys{}, ingest.ErrUnknownSpoke
	}
	return found[0], nil
}

func (m *memStore) RecordEvents(_ context.Context, sp ingest.Spoke, events []wire.Event) error {
	m.mu.Lock()
	hook := m.onRecord
	m.mu.Unlock()
	if hook != nil {
		if err := hook(events); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recordErr != nil {
		return m.recordErr
	}
	m.events[sp.Name] = append(m.events[sp.Name], events...)
	m.into[sp.String()] += len(events)
	return nil
}

func (m *memStore) RecordState(_ context.Context, sp ingest.Spoke, snap *wire.StateSnapshot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recordErr != nil {
		return m.recordErr
	}
	m.snapshots[sp.Name] = append(m.snapshots[sp.Name], snap)
	// Persisted on the Spoke the receiver authenticated, as the hub's
	// recorder does with the heartbeat.
	ref := receiver.SpokeRef{Namespace: sp.Namespace, Name: sp.Name}
	for i := range m.spokes {
		if m.spokes[i].SpokeRef == ref {
			m.spokes[i].LastSnapshotTakenAt = snap.TakenAt
		}
	}
	m.signedWith[sp.String()] = sp.KeyID
	return nil
}

// recorded returns every event recorded for spoke.
func (m *memStore) recorded(spoke string) []wire.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]wire.Event(nil), m.events[spoke]...)
}

// total counts everything recorded, events and snapshots, for all spokes.
func (m *memStore) total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.events {
		n += len(e)
	}
	for _, s := range m.snapshots {
		n += len(s)
	}
	return n
}

// keyIDOf is the key id the receiver gave with the last snapshot of the
// Spoke ref.
func (m *memStore) keyIDOf(ref receiver.SpokeRef) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.signedWith[ref.String()]
}

// recordedInto counts the events recorded into the Spoke ref.
func (m *memStore) recordedInto(ref receiver.SpokeRef) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.into[ref.String()]
}

func (m *memStore) snapshotsOf(spoke string) []*wire.StateSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*wire.StateSnapshot(nil), m.snapshots[spoke]...)
}
