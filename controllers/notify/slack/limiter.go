package slack

import (
	"context"
	"fmt"
	"sync"
	"time"

	"tugboat.dev/tugboat/controllers/notify"
)

// limiter spaces messages to a channel by at least interval, and holds a
// channel back after Slack answered 429. Keys are channel ids or names as
// configured (or "webhook:<address>" for an incoming webhook, whose channel
// is fixed).
type limiter struct {
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	next map[string]time.Time // when the next message may go
}

func newLimiter(interval time.Duration, now func() time.Time) *limiter {
	return &limiter{interval: interval, now: now, next: map[string]time.Time{}}
}

// reserve books the next slot for key and returns how long to wait for it.
// When that is longer than max, it books nothing and returns ok false.
func (l *limiter) reserve(key string, max time.Duration) (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	next := l.next[key]
	if next.Before(now) {
		next = now
	}
	wait = next.Sub(now)
	if wait > max {
		return wait, false
	}
	l.next[key] = next.Add(l.interval)
	if len(l.next) > 1024 {
		for k, t := range l.next {
			if t.Before(now) {
				delete(l.next, k)
			}
		}
	}
	return wait, true
}

// block holds key back for d from now.
func (l *limiter) block(key string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := l.now().Add(d); until.After(l.next[key]) {
		l.next[key] = until
	}
}

// wait waits for key's turn, at most MaxLimiterWait; beyond, it returns a
// *notify.RetryAfterError.
func (l *limiter) wait(ctx context.Context, key string) error {
	d, ok := l.reserve(key, MaxLimiterWait)
	if !ok {
		return &notify.RetryAfterError{After: d, Err: fmt.Errorf("slack: the channel is rate-limited for another %s", d.Round(time.Second))}
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
