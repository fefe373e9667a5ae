package actions

import (
	"github.com/prometheus/client_golang/prometheus"
	"helm.sh/helm/v3/pkg/repo"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// DefaultIndexCacheSize bounds the repository indexes an executor keeps, in
// bytes of the index.yaml files they were parsed from.
const DefaultIndexCacheSize = 16 << 20

// indexEntry is a repository index as last read, with the validators its
// server sent, so that the next read is a conditional GET.
type indexEntry struct {
	base         string // the repository URL, without a trailing slash
	etag         string
	lastModified string
	index        *repo.IndexFile
	size         int64 // bytes of the index.yaml
}

// indexCache keeps the parsed index of each HTTP chart repository the
// executor read, with its ETag and Last-Modified. An action asks the
// repository again every time (If-None-Match, If-Modified-Since): a 304
// reuses the parsed index, so neither the index (often megabytes) is
// downloaded nor parsed again. Nothing is ever used without the server's
// word, so a revoked credential or a republished index is seen at once.
// Bounded in bytes of the indexes' files, least recently used first; an
// index whose server sends neither validator is not kept. Safe for
// concurrent use.
type indexCache struct {
	kept *lru[string, *indexEntry]
}

func newIndexCache(maxBytes int64) *indexCache {
	return &indexCache{kept: newLRU[string, *indexEntry](maxBytes)}
}

// get returns the entry kept for the repository base.
func (c *indexCache) get(base string) (*indexEntry, bool) {
	if c == nil {
		return nil, false
	}
	return c.kept.get(base)
}

// put keeps e, replacing the entry of its repository. Without a validator,
// or larger than the whole cache, it is not kept, and an older entry of
// the repository is dropped.
func (c *indexCache) put(e *indexEntry) {
	if c == nil {
		return
	}
	if e.etag == "" && e.lastModified == "" {
		c.kept.drop(e.base)
		return
	}
	c.kept.put(e.base, e, e.size)
}

// drop forgets the index of the repository base.
func (c *indexCache) drop(base string) {
	if c != nil {
		c.kept.drop(base)
	}
}

// len is the number of entries and their bytes.
func (c *indexCache) len() (int, int64) { return c.kept.len() }

// indexReads counts the reads of repository indexes by outcome: downloaded
// (and parsed), or notModified (the kept index reused on a 304).
var indexReads = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tugboat_agent_chart_index_reads_total",
	Help: "Reads of HTTP chart repository indexes by the actions executor, by result: downloaded (and parsed) or notModified (the kept index reused after a conditional GET).",
}, []string{"result"})

func init() {
	ctrlmetrics.Registry.MustRegister(indexReads)
}
