package pipelineapi

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of the per-client rate limit.
const (
	// DefaultRateLimit is each client's sustained request rate, per second.
	DefaultRateLimit = 5.0
	// DefaultRateBurst is how many requests a client may send at once.
	DefaultRateBurst = 20
	// maxClients bounds the limiter's memory: past it, the buckets that
	// refilled are dropped (forgetting them changes nothing), and when none
	// did, all are.
	maxClients = 10_000
)

// clientLimiter is a token bucket per client address, taken before a
// request is read or authenticated: an anonymous flood costs one map entry
// per address, and the API server nothing. Behind a proxy every request
// comes from the proxy's address, so the limit is the proxy's: raise
// Options.RateLimit there.
type clientLimiter struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func newClientLimiter(perSecond float64, burst int, now func() time.Time) *clientLimiter {
	return &clientLimiter{limit: rate.Limit(perSecond), burst: burst, now: now, m: make(map[string]*rate.Limiter)}
}

// allow takes a token from the bucket of r's client, or returns false and
// how long until there is one.
func (l *clientLimiter) allow(r *http.Request) (bool, time.Duration) {
	client := r.RemoteAddr
	if host, _, err := net.SplitHostPort(client); err == nil {
		client = host
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.m[client]
	if lim == nil {
		if len(l.m) >= maxClients {
			l.sweep(now)
		}
		lim = rate.NewLimiter(l.limit, l.burst)
		l.m[client] = lim
	}
	res := lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (l *clientLimiter) sweep(now time.Time) {
	for k, lim := range l.m {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.m, k)
		}
	}
	if len(l.m) >= maxClients {
		clear(l.m)
	}
}

// retryAfterSeconds renders d rounded up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64(math.Ceil(d.Seconds()))), 10)
}
