package reporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"tugboat.dev/tugboat/agent/hubhttp"
	"tugboat.dev/tugboat/agent/keyfile"
	"tugboat.dev/tugboat/api/wire"
)

const (
	// shutdownFlushTimeout bounds the last flush when Start's context ends.
	shutdownFlushTimeout = 2 * time.Second
	// minResyncInterval spaces the state posts that follow lost events.
	minResyncInterval = time.Second
)

// Reporter is a controller-runtime manager.Runnable that runs in every
// replica (declared here without importing the manager package).
var _ interface {
	Start(context.Context) error
	NeedLeaderElection() bool
} = (*Reporter)(nil)

// SnapshotFunc returns every release the agent sees: its level-based truth.
// The Reporter fills Spoke, AgentVersion, ProtocolVersion and TakenAt when
// they are empty,
// and Releases when nil.
type SnapshotFunc func(ctx context.Context) (*wire.StateSnapshot, error)

// Reporter delivers the agent's events to the hub at least once, in signed
// batches, and posts the agent's full state on start, after every reconnect,
// after anything was lost, and periodically as the heartbeat. Create it with
// New, queue events with Enqueue and run it with Start (it is a
// controller-runtime manager.Runnable). It is safe for concurrent use.
type Reporter struct {
	opts     Options
	snapshot SnapshotFunc
	log      logr.Logger
	baseURL  string
	client   *http.Client
	key      *keyfile.File
	out      *outbox
	metrics  *reporterMetrics
	rand     func(n int64) int64

	// wake is signaled (never blocking) when events arrive in an empty
	// outbox or a batch fills.
	wake chan struct{}
	// token is held by whoever talks to the hub (the run loop or Flush), so
	// batches go out one at a time, in order.
	token chan struct{}

	started  atomic.Bool
	stateDue atomic.Bool // a state post is owed (start, reconnect)
	// stateWanted asks for a state post within minResyncInterval of the
	// last: the set of releases changed (RequestState).
	stateWanted atomic.Bool
	dropping    atomic.Bool // the outbox overflowed since the last state post (logged once)
	invalid     atomic.Int64

	// Guarded by token.
	failures     int    // consecutive failed attempts: drives backoff
	failCount    uint64 // failed attempts ever: detects an outage during a flush
	disconnected bool   // the last attempt failed in a way that may have lost state
}

// New returns a Reporter for opts (validated here), reading the key and CA
// files. snapshot is called for every state post.
func New(opts Options, snapshot SnapshotFunc, logger logr.Logger) (*Reporter, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if snapshot == nil {
		return nil, errors.New("reporter: a snapshot function is required")
	}
	log := logger.WithValues("spoke", opts.Spoke)
	key, err := keyfile.New(opts.KeyFile, log)
	if err != nil {
		return nil, err
	}
	client, err := hubhttp.NewClient(opts.CAFile)
	if err != nil {
		return nil, err
	}
	return &Reporter{
		opts:     opts,
		snapshot: snapshot,
		log:      log,
		baseURL:  strings.TrimSuffix(opts.HubURL, "/"),
		client:   client,
		key:      key,
		out:      newOutbox(opts.OutboxCapacity),
		metrics:  newReporterMetrics(opts.Spoke),
		rand:     rand.Int64N,
		wake:     make(chan struct{}, 1),
		token:    make(chan struct{}, 1),
	}, nil
}

// NeedLeaderElection returns false: the reporter runs in every agent
// replica, whether or not it leads; the hub de-duplicates what they send.
func (r *Reporter) NeedLeaderElection() bool { return false }

// Enqueue queues events for delivery and returns at once. It fills an
// empty Spoke with the reporter's spoke, an empty ID with ComputeID and a
// zero Time with now; the caller's values are not modified. Events that
// fail wire validation are dropped here (logged, counted as failed, and
// covered by a state resync), so one bad event never blocks a batch. When
// the outbox is full the oldest events are dropped, counted, and a full
// state snapshot is scheduled, so nothing is lost at the level of state.
func (r *Reporter) Enqueue(events ...wire.Event) {
	if len(events) == 0 {
		return
	}
	now := time.Now()
	evs := make([]wire.Event, 0, len(events))
	for _, ev := range events {
		if ev.Spoke == "" {
			ev.Spoke = r.opts.Spoke
		}
		if ev.Time.IsZero() {
			ev.Time = now
		}
		if ev.ID == "" {
			ev.ID = ev.ComputeID()
		}
		if err := r.check(&ev); err != nil {
			r.metrics.eventsFailed.Inc()
			r.out.requestResync()
			r.signal()
			if n := r.invalid.Add(1); n&(n-1) == 0 { // 1, 2, 4, 8, ...: loud, not a flood
				r.log.Error(err, "Dropping an invalid event (a state resync covers it)", "namespace", ev.Namespace, "release", ev.Release, "kind", ev.Kind, "invalidSoFar", n)
			}
			continue
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 {
		return
	}
	dropped, depth, wake := r.out.push(evs, now, r.opts.BatchMaxEvents)
	r.metrics.eventsQueued.Add(float64(len(evs)))
	r.metrics.queueDepth.Set(float64(depth))
	if dropped > 0 {
		r.metrics.eventsDropped.Add(float64(dropped))
		if r.dropping.CompareAndSwap(false, true) {
			r.log.Info("Outbox full: dropping the oldest events; a full state resync follows", "capacity", r.opts.OutboxCapacity)
		}
	}
	if wake {
		r.signal()
	}
}

// check validates ev as the hub will, as part of a batch from this spoke.
func (r *Reporter) check(ev *wire.Event) error {
	if ev.Spoke != r.opts.Spoke {
		return fmt.Errorf("event spoke %q is not this spoke %q", ev.Spoke, r.opts.Spoke)
	}
	return ev.Validate()
}

// Start runs the reporter until ctx ends: it posts the state, then sends
// batches as they fill or age, retries failures, and posts the state after
// reconnects and every StateInterval. When ctx ends it makes a last,
// short-bounded attempt to flush the outbox. It returns nil after a normal
// shutdown, and an error only when called twice.
func (r *Reporter) Start(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("reporter: already started")
	}
	r.log.Info("Reporting to the hub", "hub", r.baseURL, "batchMaxEvents", r.opts.BatchMaxEvents, "batchMaxWait", r.opts.BatchMaxWait, "stateInterval", r.opts.StateInterval)
	r.stateDue.Store(true)
	r.run(ctx)

	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownFlushTimeout)
	defer cancel()
	if err := r.Flush(fctx); err != nil {
		r.log.Error(err, "Shutting down with undelivered events (the next start posts the full state)", "queued", r.out.depth())
	} else {
		r.log.Info("Reporter stopped; outbox flushed")
	}
	return nil
}

// run is the delivery loop.
func (r *Reporter) run(ctx context.Context) {
	var lastState time.Time
	nextState := time.Now()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		now := time.Now()
		wakeAt := nextState
		if !now.Before(nextState) {
			r.stateDue.Store(true)
		}
		if r.out.resyncNeeded() {
			// Something was lost: resync, but at most once per
			// minResyncInterval, so a stream of drops cannot turn into a
			// stream of full snapshots.
			if at := lastState.Add(minResyncInterval); now.Before(at) {
				wakeAt = earliest(wakeAt, at)
			} else {
				r.stateDue.Store(true)
			}
		}
		if r.stateWanted.Load() {
			if at := lastState.Add(minResyncInterval); now.Before(at) {
				wakeAt = earliest(wakeAt, at)
			} else {
				r.stateDue.Store(true)
			}
		}
		if r.stateDue.Load() {
			// The snapshot is taken after this: it answers every request
			// made so far.
			r.stateWanted.Store(false)
			if r.syncState(ctx) != nil {
				return
			}
			lastState = time.Now()
			nextState = lastState.Add(r.opts.StateInterval)
			continue
		}
		ready, deadline := r.out.ready(now, r.opts.BatchMaxEvents, r.opts.BatchMaxWait)
		if ready {
			if r.withToken(ctx, func() error { return r.sendBatch(ctx, noLimit) }) != nil {
				return
			}
			continue
		}
		if !deadline.IsZero() {
			wakeAt = earliest(wakeAt, deadline)
		}
		timer.Reset(time.Until(wakeAt))
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// RequestState asks for a state post soon, without waiting for the state
// interval: the set of releases changed (one appeared or was uninstalled).
// Events tell the hub about the release itself, but only a state post
// updates the Spoke's status.releaseCount, which would otherwise show the
// old count for up to the state interval. Requests are coalesced, and
// state posts stay at least minResyncInterval apart.
func (r *Reporter) RequestState() {
	r.stateWanted.Store(true)
	r.signal()
}

// signal wakes the run loop without blocking.
func (r *Reporter) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// noLimit lets sendBatch take any queued event.
const noLimit = math.MaxInt64

// Flush delivers every event queued before the call, bounded by ctx. Events
// the hub rejects (400) count as delivered: retrying cannot help. It returns
// an error when ctx ends first. It may be called whether or not Start runs.
func (r *Reporter) Flush(ctx context.Context) error {
	target := r.out.next()
	if r.out.delivered(target) {
		return nil
	}
	err := r.withToken(ctx, func() error { return r.deliverUpTo(ctx, target) })
	if err != nil {
		return fmt.Errorf("reporter: flush interrupted with %d events queued: %w", r.out.depth(), err)
	}
	return nil
}

// withToken runs f holding the send token, or returns ctx's error.
func (r *Reporter) withToken(ctx context.Context, f func() error) error {
	select {
	case r.token <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.token }()
	return f()
}

// deliverUpTo sends batches until every event below seq has left the
// outbox. It returns only ctx's error. Call it with the token.
func (r *Reporter) deliverUpTo(ctx context.Context, seq int64) error {
	for !r.out.delivered(seq) {
		if err := r.sendBatch(ctx, seq); err != nil {
			return err
		}
	}
	return nil
}

// sendBatch sends one batch from the head of the outbox (events below
// limit) and retries it until the hub accepts or rejects it. Each retry
// re-reads the head, so it resends the same events, topped up with events
// queued meanwhile (and without those the outbox dropped). It returns only
// ctx's error. Call it with the token.
func (r *Reporter) sendBatch(ctx context.Context, limit int64) error {
	path := wire.EventsPath(r.opts.Spoke)
	for {
		evs, start := r.out.peek(limit, r.opts.BatchMaxEvents)
		if len(evs) == 0 {
			return nil
		}
		body, n := r.encodeBatch(evs)
		end := start + int64(n)
		res := r.post(ctx, path, body)
		r.metrics.batches.WithLabelValues(r.opts.Spoke, res.codeLabel()).Inc()
		o, delay := r.judge("events", res)
		switch o {
		case accepted:
			r.metrics.eventsSent.Add(float64(n))
			r.metrics.queueDepth.Set(float64(r.out.remove(end)))
			return nil
		case rejected:
			r.metrics.eventsFailed.Add(float64(n))
			r.metrics.queueDepth.Set(float64(r.out.remove(end)))
			r.out.requestResync()
			return nil
		}
		r.failCount++
		if err := sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// encodeBatch encodes the longest prefix of evs (halving) whose batch fits
// the hub's body limit, and returns the body and how many events it holds.
// A single event too large is sent anyway; the hub's 413 drops it.
func (r *Reporter) encodeBatch(evs []wire.Event) ([]byte, int) {
	n := len(evs)
	for {
		body, err := json.Marshal(wire.EventBatch{
			Spoke:        r.opts.Spoke,
			AgentVersion: r.opts.AgentVersion,
			SentAt:       time.Now().UTC(),
			Events:       evs[:n],
		})
		if err != nil {
			// Cannot happen for wire types; send nothing useful rather
			// than panic, and let the hub's 400 drop it.
			r.log.Error(err, "Cannot encode an event batch")
		}
		if int64(len(body)) <= wire.DefaultEventBatchLimit || n == 1 {
			return body, n
		}
		n /= 2
	}
}

// syncState takes a snapshot, delivers the events queued before it was
// taken, then posts it, so the hub's last word is the snapshot. When the
// hub fails meanwhile it starts over with a fresh snapshot, so what is
// posted after a reconnect is the state at reconnect time. It returns only
// ctx's error.
func (r *Reporter) syncState(ctx context.Context) error {
	return r.withToken(ctx, func() error {
		path := wire.StatePath(r.opts.Spoke)
		snapFailures := 0
		for {
			gen := r.out.resyncGeneration()
			snap, err := r.takeSnapshot(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				snapFailures++
				d := hubhttp.Backoff(snapFailures, r.opts.BackoffInitial, r.opts.BackoffMax, r.rand)
				r.log.Error(err, "Cannot take the state snapshot; retrying", "retryIn", d.String())
				if err := sleep(ctx, d); err != nil {
					return err
				}
				continue
			}
			before := r.failCount
			if err := r.deliverUpTo(ctx, r.out.next()); err != nil {
				return err
			}
			if r.failCount != before {
				continue // the hub failed meanwhile: the snapshot is stale
			}
			body, err := json.Marshal(snap)
			if err != nil {
				return fmt.Errorf("encoding state snapshot: %w", err)
			}
			res := r.post(ctx, path, body)
			r.metrics.statePosts.WithLabelValues(r.opts.Spoke, res.codeLabel()).Inc()
			o, delay := r.judge("state", res)
			if o != retry {
				// Rejected: retrying at once cannot help; the next
				// interval tries again.
				r.out.ackResync(gen)
				r.stateDue.Store(false)
				r.dropping.Store(false)
				if o == accepted {
					r.log.V(1).Info("Posted state", "releases", len(snap.Releases))
				}
				return nil
			}
			r.failCount++
			if err := sleep(ctx, delay); err != nil {
				return err
			}
		}
	})
}

// takeSnapshot calls the snapshot function within the request timeout and
// stamps the result. The returned snapshot is a copy.
func (r *Reporter) takeSnapshot(ctx context.Context) (*wire.StateSnapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	defer cancel()
	snap, err := r.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if snap == nil {
		return nil, errors.New("snapshot function returned no snapshot")
	}
	s := *snap
	if s.Spoke == "" {
		s.Spoke = r.opts.Spoke
	}
	if s.ProtocolVersion == 0 {
		s.ProtocolVersion = wire.ProtocolVersion
	}
	if s.AgentVersion == "" {
		s.AgentVersion = r.opts.AgentVersion
	}
	if s.TakenAt.IsZero() {
		s.TakenAt = time.Now().UTC()
	}
	if s.Releases == nil {
		s.Releases = []wire.ReleaseState{}
	}
	return &s, nil
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
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
