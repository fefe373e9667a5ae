// Package secretcache keeps Secrets (and their absence) read through an
// uncached reader for a short TTL, for the hub's HTTP endpoints that read a
// Pipeline's Secret for each request (the CI pipeline API, Slack
// interactions): the hub does not watch Secrets, and anonymous requests must
// not each cost an API server read. It is not a general cache: no watch, no
// eviction but by TTL and size.
package secretcache

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultTTL is how long a Secret is kept: a rotated token or key takes
// effect within it.
const DefaultTTL = 10 * time.Second

// maxCachedSecrets bounds the cache; it is cleared when full.
const maxCachedSecrets = 10_000

// Cache keeps Secrets (and their absence) for a TTL, read through an
// uncached reader. It is safe for concurrent use.
type Cache struct {
	reader client.Reader
	ttl    time.Duration
	now    func() time.Time

	mu sync.Mutex
	m  map[types.NamespacedName]cachedSecret
}

type cachedSecret struct {
	secret  *corev1.Secret // nil: not found
	expires time.Time
}

// New returns a Cache reading through reader, keeping each answer for ttl
// (DefaultTTL when 0) by the clock now (time.Now when nil).
func New(reader client.Reader, ttl time.Duration, now func() time.Time) *Cache {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Cache{reader: reader, ttl: ttl, now: now, m: make(map[types.NamespacedName]cachedSecret)}
}

// Get returns the Secret key, or a NotFound error. Other errors are not
// cached.
func (c *Cache) Get(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if !ok || !now.Before(e.expires) {
		secret := &corev1.Secret{}
		err := c.reader.Get(ctx, key, secret)
		switch {
		case apierrors.IsNotFound(err):
			secret = nil
		case err != nil:
			return nil, err
		}
		e = cachedSecret{secret: secret, expires: now.Add(c.ttl)}
		c.mu.Lock()
		if len(c.m) >= maxCachedSecrets {
			clear(c.m)
		}
		c.m[key] = e
		c.mu.Unlock()
	}
	if e.secret == nil {
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
	}
	return e.secret, nil
}
