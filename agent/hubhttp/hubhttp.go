// Package hubhttp is what the agent's two hub clients share: the reporter
// (agent/reporter: events and state) and the action poller
// (agent/actions): the HTTP client they reach the hub with, the backoff
// between retries and the reading of the hub's Retry-After. Signing lives
// in api/wire and the key in agent/keyfile; each client keeps its own
// requests, answers and retry policy.
package hubhttp

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter caps a Retry-After the hub asks for.
const MaxRetryAfter = 5 * time.Minute

// NewClient returns an HTTP client for the hub: TLS 1.2 or later, trusting
// the PEM certificates of caFile (the system's roots when caFile is ""),
// and following no redirect, since a redirect would (re-)send a request to
// a path its signature does not cover: the 3xx is returned instead.
func NewClient(caFile string) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading hub CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("hub CA file %s holds no PEM certificate", caFile)
		}
		tlsConfig.RootCAs = pool
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	return &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// Backoff returns the delay before retry number attempt (1 for the first):
// full jitter, drawn uniformly from [0, ceiling] where the ceiling is
// initial·2^(attempt-1), capped at maxDelay. rnd(n) returns a number in
// [0, n).
func Backoff(attempt int, initial, maxDelay time.Duration, rnd func(n int64) int64) time.Duration {
	ceiling := initial
	for i := 1; i < attempt && ceiling < maxDelay; i++ {
		if ceiling > maxDelay/2 {
			ceiling = maxDelay
			break
		}
		ceiling *= 2
	}
	ceiling = min(ceiling, maxDelay)
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(rnd(int64(ceiling) + 1))
}

// ParseRetryAfter reads a Retry-After value: delay-seconds or an HTTP date
// (RFC 9110 §10.2.3), relative to now. The delay is capped at
// MaxRetryAfter; a date in the past means no delay. ok is false (and the
// delay 0) when v is absent or invalid.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 63); err == nil {
		if secs > uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), MaxRetryAfter), true
}
