package releasehistory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/ingest"
)

// Every call the Recorder makes to the API server is bounded by
// Options.APITimeout. A call that runs out of time marks the Recorder
// stalled: Ready (the hub's /readyz) fails and tugboat_history_stalled is
// 1, until a call succeeds again (a write, or the probe Start runs while
// stalled).

var (
	stalledGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tugboat_history_stalled",
		Help: "1 while the ReleaseHistory recorder's calls to the API server time out, else 0.",
	})
	apiTimeouts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tugboat_history_api_timeouts_total",
		Help: "Calls of the ReleaseHistory recorder to the API server that ran out of time.",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(stalledGauge, apiTimeouts)
}

// stall records since when calls time out (zero: they do not).
type stall struct {
	mu    sync.Mutex
	since time.Time
}

// bounded runs call with a context bounded by the API timeout and records
// its outcome.
func (r *Recorder) bounded(ctx context.Context, call func(ctx context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, r.opts.APITimeout)
	defer cancel()
	err := call(cctx)
	switch {
	case ctx.Err() != nil:
		// The caller gave up (shutdown, a client that went away): says
		// nothing about the API server.
	case isTimeout(err):
		apiTimeouts.Inc()
		r.stall.set(r.now())
		return fmt.Errorf("the API server did not answer within %s: %w", r.opts.APITimeout, err)
	default:
		r.stall.clear() // it answered (an error such as a conflict is an answer)
	}
	return err
}

// isTimeout reports an error of a call that ran out of time: the context's
// deadline, the client's (rest.Config.Timeout) or the API server's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		(errors.As(err, &ne) && ne.Timeout())
}

func (s *stall) set(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		s.since = now
	}
	stalledGauge.Set(1)
}

func (s *stall) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.since = time.Time{}
	stalledGauge.Set(0)
}

func (s *stall) get() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.since
}

// ErrStalled wraps ingest.ErrNotReady: the API server does not answer
// the Recorder in time.
var ErrStalled = fmt.Errorf("%w: the recorder's calls to the API server time out", ingest.ErrNotReady)

// stalled reports ErrStalled, with since when, or nil.
func (r *Recorder) stalled() error {
	if since := r.stall.get(); !since.IsZero() {
		return fmt.Errorf("%w (since %s)", ErrStalled, since.UTC().Format(time.RFC3339))
	}
	return nil
}

// probe checks, while stalled, whether the API server answers again (a
// bounded list of one ReleaseHistory, uncached), so a stall ends even when
// no write comes (a failing /readyz keeps agents away).
func (r *Recorder) probe(ctx context.Context) {
	interval := r.opts.APITimeout
	if interval < time.Second {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.stall.get().IsZero() {
			continue
		}
		_ = r.bounded(ctx, func(ctx context.Context) error {
			return r.api.List(ctx, &tugboatv1alpha1.ReleaseHistoryList{}, client.Limit(1))
		})
	}
}
