package actions

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"sync"
)

// DefaultChartCacheSize bounds the packaged charts an executor keeps, in
// bytes.
const DefaultChartCacheSize = 64 << 20

// chartKey names one packaged chart: where it came from, and the digest
// its source gave for it (the repository index's digest of the package, or
// the OCI manifest's), so that a chart republished under the same version
// is a different entry and downloaded again.
type chartKey struct {
	repository, name, version, digest string
}

// chartCache keeps packaged charts the executor downloaded, so that one
// promoted into several releases of a spoke, or promoted again, is
// downloaded once. It is bounded in bytes, dropping the least recently
// used first, and checks each entry against the SHA-256 it was stored with
// when it is read: an entry that fails is dropped and downloaded again. It
// is safe for concurrent use.
type chartCache struct {
	max int64

	mu      sync.Mutex
	size    int64
	order   *list.List // of *chartEntry, most recently used first
	entries map[chartKey]*list.Element
}

type chartEntry struct {
	key  chartKey
	data []byte
	sum  [sha256.Size]byte
}

func newChartCache(maxBytes int64) *chartCache {
	return &chartCache{max: maxBytes, order: list.New(), entries: map[chartKey]*list.Element{}}
}

// get returns the package stored under k, when there is one and it is
// intact.
func (c *chartCache) get(k chartKey) ([]byte, bool) {
	if c == nil || k.digest == "" {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		return nil, false
	}
	e := el.Value.(*chartEntry)
	if sha256.Sum256(e.data) != e.sum {
		c.remove(el)
		return nil, false
	}
	c.order.MoveToFront(el)
	return e.data, true
}

// put stores data under k. Without a digest, or larger than the whole
// cache, nothing is stored.
func (c *chartCache) put(k chartKey, data []byte) {
	if c == nil || k.digest == "" || int64(len(data)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.remove(el)
	}
	e := &chartEntry{key: k, data: data, sum: sha256.Sum256(data)}
	c.entries[k] = c.order.PushFront(e)
	c.size += int64(len(data))
	for c.size > c.max {
		c.remove(c.order.Back())
	}
}

func (c *chartCache) remove(el *list.Element) {
	e := c.order.Remove(el).(*chartEntry)
	delete(c.entries, e.key)
	c.size -= int64(len(e.data))
}

// len is the number of entries and their bytes.
func (c *chartCache) len() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.size
}

// hexDigest is the SHA-256 of data, in hex.
func hexDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
