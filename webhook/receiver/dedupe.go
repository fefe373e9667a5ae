package receiver

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"

	"tugboat.dev/tugboat/api/wire"
)

// eventKey is an event id in binary: the 128-bit prefix of a SHA-256 that
// wire.NewEventID renders as 32 hex digits.
type eventKey [wire.EventIDLength / 2]byte

// keyOf decodes an event id. ids the receiver handles are validated (32
// lowercase hex digits) or computed, so ok is false only for a foreign value.
func keyOf(id string) (k eventKey, ok bool) {
	if len(id) != wire.EventIDLength {
		return k, false
	}
	if _, err := hex.Decode(k[:], []byte(id)); err != nil {
		return k, false
	}
	return k, true
}

// keyFor is the dedupe key of e from the Spoke ref: its id, mixed with the
// Spoke's namespace and name when known, so that a Spoke of the same name in
// another namespace can never make the real one's events look like
// redeliveries.
func keyFor(ref SpokeRef, e *wire.Event) eventKey {
	k, ok := keyOf(e.ID)
	if !ok { // cannot happen for validated or computed ids
		k, _ = keyOf(e.ComputeID())
	}
	if ref.Namespace == "" {
		return k
	}
	h := sha256.New()
	h.Write([]byte(ref.Namespace))
	h.Write([]byte{0})
	h.Write([]byte(ref.Name))
	h.Write([]byte{0})
	h.Write(k[:])
	var out eventKey
	copy(out[:], h.Sum(nil))
	return out
}

// idCache remembers the ids of recently recorded events, at most size of
// them, forgetting the oldest first. Memory is bounded: one map entry and
// one ring slot per id, plus the ids of the writes in progress.
//
// An id counts as a duplicate only once the store committed its event. A
// request first reserves the ids of its batch: each is a duplicate (already
// committed, or repeated earlier in the batch), owned by this request (now
// in flight: the request writes it), or busy (in flight in another
// request). The owner reports the outcome with finish; a busy id's request
// waits for that outcome, then reserves it again: committed, it is now a
// duplicate; failed, it is free and the waiter writes it. A request never
// waits while it owns ids, so two requests cannot wait for each other.
type idCache struct {
	mu       sync.Mutex
	idx      map[eventKey]int
	ring     []slot
	next     int
	inFlight map[eventKey]*flight
}

type slot struct {
	key  eventKey
	used bool
}

// flight is one request's write of the ids it owns: done is closed once the
// store answered.
type flight struct {
	done chan struct{}
}

// idState is what reserve found for one id.
type idState uint8

const (
	idOwned     idState = iota // in flight in this request: write it
	idDuplicate                // committed before, or repeated in the batch
	idBusy                     // in flight in another request: wait for it
)

func newIDCache(size int) *idCache {
	if size < 1 {
		size = 1
	}
	return &idCache{
		idx:      make(map[eventKey]int, min(size, 1<<16)),
		ring:     make([]slot, size),
		inFlight: make(map[eventKey]*flight),
	}
}

// reserve classifies keys into states and takes the free ones for the
// caller, who must call finish with the returned flight (nil when it owns
// none). busy lists the distinct flights of other requests to wait for.
func (c *idCache) reserve(keys []eventKey, states []idState) (mine *flight, busy []*flight) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range keys {
		if _, seen := c.idx[k]; seen {
			states[i] = idDuplicate
			continue
		}
		if f := c.inFlight[k]; f != nil {
			if f == mine {
				states[i] = idDuplicate
				continue
			}
			states[i] = idBusy
			if !slices.Contains(busy, f) {
				busy = append(busy, f)
			}
			continue
		}
		if mine == nil {
			mine = &flight{done: make(chan struct{})}
		}
		c.inFlight[k] = mine
		states[i] = idOwned
	}
	return mine, busy
}

// finish ends f, the write of keys: committed ids are remembered (the
// oldest forgotten when the window is full); failed ones are freed, so a
// retry or a waiting redelivery writes them.
func (c *idCache) finish(f *flight, keys []eventKey, committed bool) {
	if f == nil {
		return
	}
	c.mu.Lock()
	for _, k := range keys {
		if c.inFlight[k] != f {
			continue
		}
		delete(c.inFlight, k)
		if !committed {
			continue
		}
		if old := c.ring[c.next]; old.used {
			delete(c.idx, old.key)
		}
		c.ring[c.next] = slot{key: k, used: true}
		c.idx[k] = c.next
		c.next = (c.next + 1) % len(c.ring)
	}
	c.mu.Unlock()
	close(f.done)
}
