package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"tugboat.dev/tugboat/api/wire"
)

// Defaults of Options.
const (
	// DefaultInterval is the least time between two requests of one spoke:
	// 20 requests/s, below the receiver's default limit of 50/s per spoke.
	DefaultInterval = 50 * time.Millisecond
	// DefaultStateInterval is how often each spoke posts a full snapshot:
	// the agent's default (agent/reporter.DefaultStateInterval).
	DefaultStateInterval = 30 * time.Second
	// DefaultReleasesPerBatch is how many releases advance per event batch.
	DefaultReleasesPerBatch = 2
	// DefaultRequestTimeout bounds one request.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultStepInterval is the time between a rollout's steps in fleet
	// pacing: Helm's upgrade, then the Pods' rollout, then health.
	DefaultStepInterval = 2 * time.Second
	// MaxDuration bounds Options.Duration.
	MaxDuration = 30 * time.Minute
)

// Options configure a Generator.
type Options struct {
	// URL is the hub receiver's base URL, e.g. http://127.0.0.1:9443. Its
	// host must be a loopback address or "localhost". Required.
	URL string
	// Spokes are the simulated spokes (see Register). Required.
	Spokes []Spoke
	// Releases is the number of releases per spoke. Required.
	Releases int
	// Duration bounds Run: no request starts after it (requests in flight
	// finish). Required, at most MaxDuration.
	Duration time.Duration
	// MaxRequests bounds the requests of Run (retries included). Required.
	MaxRequests int
	// Interval is the least time between two requests of one spoke.
	Interval time.Duration
	// StateInterval is how often each spoke posts a full state snapshot.
	StateInterval time.Duration
	// ReleasesPerBatch is how many releases advance one rollout step in
	// each event batch.
	ReleasesPerBatch int
	// RequestTimeout bounds one request.
	RequestTimeout time.Duration
	// ChangeInterval, when set, paces Run as a fleet instead of as fast as
	// Interval allows: each spoke starts one release change (a rollout of
	// three event batches StepInterval apart) every ChangeInterval on
	// average (uniformly jittered between half and one and a half times
	// it, the first at a random point within it), and posts its snapshot
	// every StateInterval, jittered by ±10%. Shorter intervals than an
	// agent's compress time: the same traffic as a longer run, sooner.
	ChangeInterval time.Duration
	// StepInterval is the time between the steps of one rollout in fleet
	// pacing (default DefaultStepInterval).
	StepInterval time.Duration
	// AnnounceParallel bounds how many spokes announce at once (0: all
	// at once, as agents starting together do).
	AnnounceParallel int
	// SampleEvery, with OnSample, samples every SampleEvery-th event batch.
	SampleEvery int
	// OnSample, when set, is called just before a sampled batch is first
	// sent, with one release-state event of the batch. It must be quick and
	// safe for concurrent use.
	OnSample func(Sample)
}

// Sample is an event of a batch about to be sent.
type Sample struct {
	// History is the name of the ReleaseHistory the event goes to
	// (<spoke>.<namespace>.<release>).
	History string
	// EventID is the event's id.
	EventID string
	// Sent is when the request was sent.
	Sent time.Time
}

func (o *Options) setDefaults() {
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.StateInterval == 0 {
		o.StateInterval = DefaultStateInterval
	}
	if o.ReleasesPerBatch == 0 {
		o.ReleasesPerBatch = DefaultReleasesPerBatch
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.StepInterval == 0 {
		o.StepInterval = DefaultStepInterval
	}
}

// Validate reports every invalid option.
func (o *Options) Validate() error {
	var errs []error
	if err := checkLoopback(o.URL); err != nil {
		errs = append(errs, err)
	}
	if len(o.Spokes) == 0 {
		errs = append(errs, errors.New("loadgen: at least one spoke is required"))
	}
	seen := make(map[string]bool, len(o.Spokes))
	for _, s := range o.Spokes {
		if s.Name == "" || len(s.Key) < wire.MinKeySize {
			errs = append(errs, fmt.Errorf("loadgen: spoke %q needs a name and a key of at least %d bytes", s.Name, wire.MinKeySize))
			break
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("loadgen: spoke %q is listed twice", s.Name))
			break
		}
		seen[s.Name] = true
	}
	if o.Releases < 1 || o.Releases > wire.MaxReleasesPerSnapshot {
		errs = append(errs, fmt.Errorf("loadgen: releases per spoke must be between 1 and %d, got %d", wire.MaxReleasesPerSnapshot, o.Releases))
	}
	if o.Duration <= 0 || o.Duration > MaxDuration {
		errs = append(errs, fmt.Errorf("loadgen: duration must be positive and at most %s, got %s", MaxDuration, o.Duration))
	}
	if o.MaxRequests < 1 {
		errs = append(errs, fmt.Errorf("loadgen: max requests must be positive, got %d", o.MaxRequests))
	}
	if o.Interval < 0 || o.StateInterval <= 0 || o.RequestTimeout <= 0 {
		errs = append(errs, errors.New("loadgen: intervals and the request timeout must be positive"))
	}
	if o.ReleasesPerBatch < 1 || o.ReleasesPerBatch*8 > wire.MaxEventsPerBatch {
		errs = append(errs, fmt.Errorf("loadgen: releases per batch must be between 1 and %d, got %d", wire.MaxEventsPerBatch/8, o.ReleasesPerBatch))
	}
	if o.AnnounceParallel < 0 {
		errs = append(errs, fmt.Errorf("loadgen: announce parallelism must not be negative, got %d", o.AnnounceParallel))
	}
	if o.ChangeInterval < 0 || o.StepInterval < 0 {
		errs = append(errs, fmt.Errorf("loadgen: change and step intervals must not be negative, got %s and %s", o.ChangeInterval, o.StepInterval))
	}
	if o.SampleEvery < 0 {
		errs = append(errs, fmt.Errorf("loadgen: sample every must not be negative, got %d", o.SampleEvery))
	}
	return errors.Join(errs...)
}

// checkLoopback accepts http(s) URLs whose host is a loopback address.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("loadgen: URL %q must be http(s)://<loopback address>:<port>", raw)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("loadgen: URL %q is not a loopback address: loadgen only talks to a local hub", raw)
	}
	return nil
}

// Generator simulates a fleet of agents. Announce and Run must not be
// called concurrently.
type Generator struct {
	opts   Options
	base   string
	client *http.Client
	sims   []*spokeSim
	// batches counts event batches, for sampling.
	batches atomic.Int64
}

// New returns a Generator for opts (validated, defaults applied).
func New(opts Options) (*Generator, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{opts: opts, base: string(bytes.TrimRight([]byte(opts.URL), "/"))}
	g.Grow(opts.Spokes)
	return g, nil
}

// Grow adds to the fleet the spokes of spokes it does not simulate yet
// (by name), as a fleet grows: the spokes it already simulates keep their
// releases, revisions and event sequences, so their next events are new to
// the hub (a new Generator would start them over, and the hub would answer
// them as duplicates). Call it between runs, never during Announce or Run;
// the next Announce has every spoke, old and new, post its state.
func (g *Generator) Grow(spokes []Spoke) {
	known := make(map[string]bool, len(g.sims))
	for _, sim := range g.sims {
		known[sim.spoke.Name] = true
	}
	now := time.Now()
	for _, s := range spokes {
		if !known[s.Name] {
			known[s.Name] = true
			g.sims = append(g.sims, newSpokeSim(len(g.sims), s, g.opts.Releases, now))
		}
	}
	if g.client != nil {
		g.client.CloseIdleConnections()
	}
	g.client = &http.Client{Transport: &http.Transport{
		Proxy: nil,
		// Two per spoke: under ServeActions each holds a poll while it
		// reports or posts its snapshot.
		MaxIdleConns:        2*len(g.sims) + 16,
		MaxIdleConnsPerHost: 2*len(g.sims) + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// Close releases the Generator's idle connections.
func (g *Generator) Close() { g.client.CloseIdleConnections() }

// Announce has every spoke post its full state once, as agents do when
// they start, all at once. Requests answered 429 or 503 are retried until
// ctx ends. Each spoke's next snapshot (in Run) comes at a random point
// within StateInterval, so snapshots do not all come together.
func (g *Generator) Announce(ctx context.Context) (*Result, error) {
	start := time.Now()
	results := make([]*Result, len(g.sims))
	var wg sync.WaitGroup
	slots := make(chan struct{}, max(g.opts.AnnounceParallel, len(g.sims)))
	if g.opts.AnnounceParallel > 0 {
		slots = make(chan struct{}, g.opts.AnnounceParallel)
	}
	for i, sim := range g.sims {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			res := newResult()
			results[i] = res
			rnd := rand.New(rand.NewPCG(uint64(i), 0x5eed)) //nolint:gosec // spreads snapshot times; nothing secret
			for ctx.Err() == nil {
				body, n := sim.snapshot(time.Now())
				o := g.post(ctx, sim.spoke, wire.StatePath(sim.spoke.Name), body)
				res.record(o, false, n)
				if o.code == http.StatusAccepted {
					offset := time.Duration(rnd.Int64N(int64(g.opts.StateInterval)))
					sim.lastState = time.Now().Add(-offset)
					return
				}
				if !o.retryable() || !sleep(ctx, o.retryAfter) {
					return
				}
			}
		}()
	}
	wg.Wait()
	total := merge(results)
	total.Elapsed = time.Since(start)
	if err := ctx.Err(); err != nil {
		return total, fmt.Errorf("loadgen: announcing: %w", err)
	}
	if total.Snapshots != len(g.sims) {
		return total, fmt.Errorf("loadgen: only %d of %d spokes announced their state: %s", total.Snapshots, len(g.sims), total)
	}
	return total, nil
}

// Run sends the fleet's traffic until Duration passed, MaxRequests were
// sent, or ctx ended, whichever comes first, and returns what the hub
// answered. Each spoke has one request in flight at a time.
func (g *Generator) Run(ctx context.Context) (*Result, error) {
	return g.RunFor(ctx, g.opts.Duration)
}

// RunFor is Run for d instead of Options.Duration (at most MaxDuration):
// a warm-up before the measured Run, for instance.
func (g *Generator) RunFor(ctx context.Context, d time.Duration) (*Result, error) {
	if d <= 0 || d > MaxDuration {
		return nil, fmt.Errorf("loadgen: duration must be positive and at most %s, got %s", MaxDuration, d)
	}
	start := time.Now()
	deadline := start.Add(d)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var budget atomic.Int64
	budget.Store(int64(g.opts.MaxRequests))
	take := func() bool { return budget.Add(-1) >= 0 }

	results := make([]*Result, len(g.sims))
	var wg sync.WaitGroup
	for i, sim := range g.sims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := newResult()
			results[i] = res
			if g.opts.ChangeInterval > 0 {
				g.runFleetSpoke(ctx, sim, res, take)
				return
			}
			g.runSpoke(ctx, sim, res, take)
		}()
	}
	wg.Wait()
	total := merge(results)
	total.Elapsed = time.Since(start)
	return total, nil
}

// runSpoke is one simulated agent's loop.
func (g *Generator) runSpoke(ctx context.Context, sim *spokeSim, res *Result, take func() bool) {
	// Requests in flight when ctx ends finish: they are not canceled.
	reqCtx := context.WithoutCancel(ctx)
	for ctx.Err() == nil && take() {
		began := time.Now()
		var (
			path   string
			body   []byte
			n      int
			sample sampled
			isEvts bool
		)
		if began.Sub(sim.lastState) >= g.opts.StateInterval {
			path = wire.StatePath(sim.spoke.Name)
			body, n = sim.snapshot(began)
			sim.lastState = began
		} else {
			path, isEvts = wire.EventsPath(sim.spoke.Name), true
			body, n, sample = sim.batch(began, g.opts.ReleasesPerBatch)
			if k := g.batches.Add(1); g.opts.OnSample != nil && g.opts.SampleEvery > 0 && k%int64(g.opts.SampleEvery) == 0 && sample.id != "" {
				g.opts.OnSample(Sample{History: sample.history, EventID: sample.id, Sent: time.Now()})
			}
		}
		g.send(ctx, reqCtx, sim, path, body, isEvts, n, res, take)
		if !sleep(ctx, time.Until(began.Add(g.opts.Interval))) {
			return
		}
	}
}

// send posts body until it is answered other than 429 or 503, the run
// ends, or the request budget is spent (retries after Retry-After, as the
// agent does).
func (g *Generator) send(ctx, reqCtx context.Context, sim *spokeSim, path string, body []byte, isEvts bool, n int, res *Result, take func() bool) {
	for {
		o := g.post(reqCtx, sim.spoke, path, body)
		res.record(o, isEvts, n)
		if !o.retryable() || !sleep(ctx, o.retryAfter) || !take() {
			return
		}
	}
}

// outcome is one request's result.
type outcome struct {
	code       int
	accepted   wire.AcceptedResponse
	retryAfter time.Duration
	err        error
	latency    time.Duration
}

// retryable: the agent would send the same body again after retryAfter.
func (o outcome) retryable() bool {
	return o.err != nil || o.code == http.StatusTooManyRequests || o.code == http.StatusServiceUnavailable
}

// post sends body to path, signed with the spoke's key now.
func (g *Generator) post(ctx context.Context, s Spoke, path string, body []byte) outcome {
	ctx, cancel := context.WithTimeout(ctx, g.opts.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.base+path, bytes.NewReader(body))
	if err != nil {
		return outcome{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tugboat-loadgen")
	start := time.Now()
	wire.SignRequest(req, s.Key, body, start)
	resp, err := g.client.Do(req)
	if err != nil {
		return outcome{err: err, latency: time.Since(start), retryAfter: 100 * time.Millisecond}
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	o := outcome{code: resp.StatusCode, latency: time.Since(start), err: err}
	if err == nil && resp.StatusCode == http.StatusAccepted {
		if err := json.Unmarshal(raw, &o.accepted); err != nil {
			o.err = fmt.Errorf("decoding the 202 answer: %w", err)
		}
	}
	o.retryAfter = time.Second
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
		o.retryAfter = time.Duration(secs) * time.Second
	}
	return o
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
