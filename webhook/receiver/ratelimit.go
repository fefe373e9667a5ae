package receiver

import (
	"math"
	"sync"
	"time"
)

// maxIdleBuckets is how many spokes' buckets the limiter keeps before it
// drops the full (idle) ones.
const maxIdleBuckets = 4096

// limiter is a token bucket per spoke: each request takes one token; tokens
// refill at rate per second up to burst. It is keyed by authenticated spoke
// names only, so its size follows the number of Spokes.
type limiter struct {
	mu      sync.Mutex
	rate    float64
	burst   float64
	now     func() time.Time
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate float64, burst int, now func() time.Time) *limiter {
	return &limiter{rate: rate, burst: float64(burst), now: now, buckets: make(map[string]*bucket)}
}

// allow takes a token from spoke's bucket. When there is none it returns
// false and how long until there is.
func (l *limiter) allow(spoke string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[spoke]
	if b == nil {
		if len(l.buckets) >= maxIdleBuckets {
			l.sweep(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[spoke] = b
	}
	l.refill(b, now)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
	return false, wait
}

func (l *limiter) refill(b *bucket, now time.Time) {
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = math.Min(l.burst, b.tokens+elapsed.Seconds()*l.rate)
		b.last = now
	}
}

// sweep drops the buckets that refilled completely: forgetting them changes
// nothing.
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		l.refill(b, now)
		if b.tokens >= l.burst {
			delete(l.buckets, k)
		}
	}
}
