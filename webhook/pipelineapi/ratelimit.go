package pipelineapi

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
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
// per address, and the API server nothing. Behind a proxy (an ingress) every
// connection comes from the proxy: when its address is in trusted, the
// client is the nearest address of X-Forwarded-For that is not a trusted
// proxy, so anonymous clients behind the same ingress cannot exhaust the
// real CI's bucket. X-Forwarded-For from anyone else is ignored (a client
// could write any address into it).
type clientLimiter struct {
	limit   rate.Limit
	burst   int
	now     func() time.Time
	trusted []netip.Prefix

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func newClientLimiter(perSecond float64, burst int, now func() time.Time, trusted []netip.Prefix) *clientLimiter {
	return &clientLimiter{limit: rate.Limit(perSecond), burst: burst, now: now, trusted: trusted, m: make(map[string]*rate.Limiter)}
}

// isTrusted reports whether addr is one of the trusted proxies.
func (l *clientLimiter) isTrusted(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, p := range l.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// clientOf is r's client address: the connection's peer, or, when the peer
// is a trusted proxy, the nearest X-Forwarded-For address that is not one
// (the whole chain trusted: the first address of the chain).
func (l *clientLimiter) clientOf(r *http.Request) string {
	client := r.RemoteAddr
	if host, _, err := net.SplitHostPort(client); err == nil {
		client = host
	}
	peer, err := netip.ParseAddr(client)
	if err != nil || !l.isTrusted(peer) {
		return client
	}
	var chain []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				chain = append(chain, a)
			}
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		addr, err := netip.ParseAddr(chain[i])
		if err != nil {
			// Not an address: whatever wrote it is not a proxy we trust;
			// the last good hop stands for the client.
			return client
		}
		client = addr.Unmap().String()
		if !l.isTrusted(addr) {
			return client
		}
	}
	return client
}

// allow takes a token from the bucket of r's client, or returns false and
// how long until there is one.
func (l *clientLimiter) allow(r *http.Request) (bool, time.Duration) {
	client := l.clientOf(r)
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
