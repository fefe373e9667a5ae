package harness

import (
	"context"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GetCounter is a client.Reader that counts, by key, the Gets of objects
// of type T it passes on to the Reader it wraps (which may be set after
// CountGets, before the first Get). Tests wrap a manager's APIReader with
// it to prove that a read reaches the real API server only when it must.
type GetCounter[T client.Object] struct {
	client.Reader

	mu    sync.Mutex
	gets  map[client.ObjectKey]int
	total int
}

// CountGets returns a GetCounter of the T Gets through r.
func CountGets[T client.Object](r client.Reader) *GetCounter[T] {
	return &GetCounter[T]{Reader: r, gets: map[client.ObjectKey]int{}}
}

// Get counts a Get of a T, then passes it on.
func (c *GetCounter[T]) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(T); ok {
		c.mu.Lock()
		c.gets[key]++
		c.total++
		c.mu.Unlock()
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// Of is how many Gets of the T named key went through.
func (c *GetCounter[T]) Of(key client.ObjectKey) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets[key]
}

// Total is how many Gets of a T went through.
func (c *GetCounter[T]) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}
