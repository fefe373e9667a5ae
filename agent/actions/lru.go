package actions

import (
	"container/list"
	"sync"
)

// lru is a cache bounded in bytes (the sizes its entries are put with),
// dropping the least recently used first. It is safe for concurrent use.
// The chart and index caches keep their entries in one.
type lru[K comparable, V any] struct {
	max int64

	mu      sync.Mutex
	size    int64
	order   *list.List // of *lruEntry[K, V], most recently used first
	entries map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key  K
	val  V
	size int64
}

func newLRU[K comparable, V any](maxBytes int64) *lru[K, V] {
	return &lru[K, V]{max: maxBytes, order: list.New(), entries: map[K]*list.Element{}}
}

// get returns the value kept under k, and makes it the most recently used.
func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruEntry[K, V]).val, true
}

// put keeps v under k, replacing what was kept under it; size is what it
// counts against the bound. A value larger than the whole cache is not
// kept (and what k held is dropped).
func (c *lru[K, V]) put(k K, v V, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.remove(el)
	}
	if size > c.max {
		return
	}
	c.entries[k] = c.order.PushFront(&lruEntry[K, V]{key: k, val: v, size: size})
	c.size += size
	for c.size > c.max {
		c.remove(c.order.Back())
	}
}

// drop forgets what is kept under k.
func (c *lru[K, V]) drop(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.remove(el)
	}
}

func (c *lru[K, V]) remove(el *list.Element) {
	e := c.order.Remove(el).(*lruEntry[K, V])
	delete(c.entries, e.key)
	c.size -= e.size
}

// len is the number of entries and their sizes' sum.
func (c *lru[K, V]) len() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.size
}
