package pipelineapi

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultSecretCacheTTL is how long a Pipeline's Secret is kept: a rotated
// token or key takes effect within it.
const DefaultSecretCacheTTL = 10 * time.Second

// maxCachedSecrets bounds the Secret cache; it is cleared when full.
const maxCachedSecrets = 10_000

// secretCache keeps the Secrets of Pipelines (and their absence) for a
// TTL, read through an uncached reader: the hub does not watch Secrets, and
// anonymous requests must not each cost an API server read.
type secretCache struct {
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

func newSecretCache(reader client.Reader, ttl time.Duration, now func() time.Time) *secretCache {
	return &secretCache{reader: reader, ttl: ttl, now: now, m: make(map[types.NamespacedName]cachedSecret)}
}

// get returns the Secret key, or a NotFound error. Other errors are not
// cached.
func (c *secretCache) get(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
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
