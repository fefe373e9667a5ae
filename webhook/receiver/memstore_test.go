package receiver_test

import (
	"context"
	"sync"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/webhook/receiver"
)

// memStore is an in-memory receiver.Store: a map behind a mutex.
type memStore struct {
	mu        sync.Mutex
	keys      map[string]receiver.SpokeKeys
	events    map[string][]wire.Event
	snapshots map[string][]*wire.StateSnapshot
	// keysErr and recordErr, when set, are returned by SpokeKeys and the
	// Record methods.
	keysErr   error
	recordErr error
	// onRecord, when set, runs at the start of every RecordEvents call,
	// outside the lock; an error it returns fails the call, which then
	// records nothing.
	onRecord func(events []wire.Event) error
}

var _ receiver.Store = (*memStore)(nil)

func newMemStore() *memStore {
	return &memStore{
		keys:      make(map[string]receiver.SpokeKeys),
		events:    make(map[string][]wire.Event),
		snapshots: make(map[string][]*wire.StateSnapshot),
	}
}

func (m *memStore) setKeys(spoke string, current, previous []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys[spoke] = receiver.SpokeKeys{Current: current, Previous: previous}
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

func (m *memStore) SpokeKeys(_ context.Context, spoke string) (receiver.SpokeKeys, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keysErr != nil {
		return receiver.SpokeKeys{}, m.keysErr
	}
	k, ok := m.keys[spoke]
	if !ok {
		return receiver.SpokeKeys{}, receiver.ErrUnknownSpoke
	}
	return k, nil
}

func (m *memStore) RecordEvents(_ context.Context, spoke string, events []wire.Event) error {
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
	m.events[spoke] = append(m.events[spoke], events...)
	return nil
}

func (m *memStore) RecordState(_ context.Context, spoke string, snap *wire.StateSnapshot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recordErr != nil {
		return m.recordErr
	}
	m.snapshots[spoke] = append(m.snapshots[spoke], snap)
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

func (m *memStore) snapshotsOf(spoke string) []*wire.StateSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*wire.StateSnapshot(nil), m.snapshots[spoke]...)
}
