package receiver

import (
	"encoding/hex"
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

// idCache remembers the ids of recently recorded events, at most size of
// them, forgetting the oldest first. Memory is bounded: one map entry and
// one ring slot per id.
//
// An id is reserved before the store records its event and released again
// when the store fails, so that a failed batch is not mistaken for a
// duplicate when the agent retries it, while two concurrent deliveries of
// the same batch still record each event once.
type idCache struct {
	mu   sync.Mutex
	idx  map[eventKey]int
	ring []slot
	next int
}

type slot struct {
	key  eventKey
	used bool
}

func newIDCache(size int) *idCache {
	if size < 1 {
		size = 1
	}
	return &idCache{idx: make(map[eventKey]int, min(size, 1<<16)), ring: make([]slot, size)}
}

// reserve marks each key as seen and reports, in dup, which were seen
// before (including earlier in keys).
func (c *idCache) reserve(keys []eventKey, dup []bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range keys {
		if _, seen := c.idx[k]; seen {
			dup[i] = true
			continue
		}
		if old := c.ring[c.next]; old.used {
			delete(c.idx, old.key)
		}
		c.ring[c.next] = slot{key: k, used: true}
		c.idx[k] = c.next
		c.next = (c.next + 1) % len(c.ring)
	}
}

// release forgets keys that reserve took but whose events were not
// recorded.
func (c *idCache) release(keys []eventKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if i, ok := c.idx[k]; ok && c.ring[i].key == k {
			delete(c.idx, k)
			c.ring[i] = slot{}
		}
	}
}
