package actions

import (
	"crypto/sha256"
	"encoding/hex"
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
	kept *lru[chartKey, *chartEntry]
}

type chartEntry struct {
	data []byte
	sum  [sha256.Size]byte
}

func newChartCache(maxBytes int64) *chartCache {
	return &chartCache{kept: newLRU[chartKey, *chartEntry](maxBytes)}
}

// get returns the package stored under k, when there is one and it is
// intact.
func (c *chartCache) get(k chartKey) ([]byte, bool) {
	if c == nil || k.digest == "" {
		return nil, false
	}
	e, ok := c.kept.get(k)
	if !ok {
		return nil, false
	}
	if sha256.Sum256(e.data) != e.sum {
		c.kept.drop(k)
		return nil, false
	}
	return e.data, true
}

// put stores data under k. Without a digest, or larger than the whole
// cache, nothing is stored.
func (c *chartCache) put(k chartKey, data []byte) {
	if c == nil || k.digest == "" {
		return
	}
	c.kept.put(k, &chartEntry{data: data, sum: sha256.Sum256(data)}, int64(len(data)))
}

// len is the number of entries and their bytes.
func (c *chartCache) len() (int, int64) { return c.kept.len() }

// hexDigest is the SHA-256 of data, in hex.
func hexDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
