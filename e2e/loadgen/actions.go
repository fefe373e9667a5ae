package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"tugboat.dev/tugboat/api/clip"
	"tugboat.dev/tugboat/api/wire"
)

// Defaults of ActionOptions.
const (
	// DefaultActionDelay is how long a simulated upgrade takes, from the
	// poll answer that brought it to its outcome.
	DefaultActionDelay = 100 * time.Millisecond
	// DefaultPollTimeout bounds one poll: above the hub's hold (25 s by
	// default), as the agent's is.
	DefaultPollTimeout = 60 * time.Second
	// DefaultMinPollInterval is the agent's: after an answer that brings
	// nothing new, the next poll waits what is left of it.
	DefaultMinPollInterval = time.Second
	// maxPollAnswer bounds a poll's answer, as the agent's does.
	maxPollAnswer = 4 << 20
)

// ActionOptions configure ServeActions.
type ActionOptions struct {
	// Delay is how long an upgrade takes: from receiving the action to
	// reporting its outcome (default DefaultActionDelay).
	Delay time.Duration
	// PollTimeout bounds one poll (default DefaultPollTimeout).
	PollTimeout time.Duration
	// MinPollInterval is the least time between two polls whose answers
	// brought nothing new (default DefaultMinPollInterval).
	MinPollInterval time.Duration
	// Snapshots, when set, has every spoke also post its state snapshot
	// every Options.StateInterval (jittered ±10%), the heartbeat, as an
	// agent does while it waits for actions.
	Snapshots bool
	// OnAction, when set, is called once per action the spokes carried
	// out, after its last report was answered (or it failed). It must be
	// quick and safe for concurrent use.
	OnAction func(ActionReport)
}

func (o *ActionOptions) setDefaults() {
	if o.Delay == 0 {
		o.Delay = DefaultActionDelay
	}
	if o.PollTimeout == 0 {
		o.PollTimeout = DefaultPollTimeout
	}
	if o.MinPollInterval == 0 {
		o.MinPollInterval = DefaultMinPollInterval
	}
}

// ActionReport is what one simulated agent did with one action, on the
// machine's clock.
type ActionReport struct {
	// Spoke is the spoke that received the action.
	Spoke string
	// Action is the action as the hub offered it.
	Action wire.Action
	// Received is when the poll answer that first carried it arrived.
	Received time.Time
	// Result is the outcome reported (wire.ActionSucceeded, or
	// wire.ActionRefused for what a simulated agent does not carry out).
	Result string
	// Revision is the revision the upgrade made (or found at the version).
	Revision int
	// Reported is when the hub answered the outcome's report.
	Reported time.Time
	// HealthySent and HealthyAnswered are when the event batch reporting
	// Revision deployed and Current was sent and answered 202; zero when
	// none was sent (a refused action, or a release already at the version).
	HealthySent, HealthyAnswered time.Time
	// Err is why the agent could not finish reporting (the run ended, the
	// hub refused a report); the reports before it were made.
	Err error
}

// ActionResult counts what ServeActions did.
type ActionResult struct {
	// Requests are the event batches and snapshots sent while serving,
	// counted as Run counts them.
	*Result
	// Polls is how many polls were answered 200; PollErrors how many were
	// not (transport errors, other codes, an unsigned answer).
	Polls, PollErrors int
	// Actions is how many actions were carried out (each once); Repeats how
	// many times an action already carried out was offered again.
	Actions, Repeats int
	// OutcomeErrors counts outcome reports the hub did not answer 200 in
	// the end; OutcomeRetries the answers (429, 503, none) that had a
	// report sent again.
	OutcomeErrors, OutcomeRetries int
}

// ServeActions has every spoke do what an agent with --actions-enabled
// does, until ctx ends: long-poll the hub for its actions (signed GET
// wire.ActionsPath, the answer's signature verified with the spoke's key,
// as the agent does: an unsigned answer is dropped), and carry out each
// upgrade of one of its releases:
//
//  1. an event batch with ReleaseStarted for the next revision (pending
//     upgrade, InProgress), as the agent sends when Helm's pending record
//     appears;
//  2. after opts.Delay, the outcome Succeeded with that revision (signed
//     POST wire.ActionPath), as the agent reports once Helm's upgrade
//     returned;
//  3. once the outcome was answered, an event batch with ReleaseStatus
//     deployed and HealthChanged Current for that revision at the action's
//     version, and the previous revision superseded: what the agent sends
//     once the rollout completed. Until then the spoke's snapshots report
//     the revision pending, so nothing reports it healthy before
//     ActionReport.HealthySent.
//
// An upgrade of a release already at the version deployed is reported
// Succeeded with its revision, changing nothing; any other action (a
// rollback, a preview, a helm test, a release the spoke does not have) is
// reported Refused. An action offered again after its outcome was answered
// is reported again, never carried out twice. One action at a time per
// spoke. It must not run together with Run or Announce.
func (g *Generator) ServeActions(ctx context.Context, opts ActionOptions) (*ActionResult, error) {
	opts.setDefaults()
	if opts.Delay < 0 || opts.PollTimeout < 0 || opts.MinPollInterval < 0 {
		return nil, fmt.Errorf("loadgen: action delay, poll timeout and poll interval must not be negative, got %s, %s and %s",
			opts.Delay, opts.PollTimeout, opts.MinPollInterval)
	}
	start := time.Now()
	results := make([]*ActionResult, len(g.sims))
	snaps := make([]*Result, len(g.sims))
	var wg sync.WaitGroup
	for i, sim := range g.sims {
		res := &ActionResult{Result: newResult()}
		results[i] = res
		if opts.Snapshots {
			snaps[i] = newResult()
			wg.Add(1)
			go func() {
				defer wg.Done()
				g.heartbeat(ctx, sim, snaps[i])
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.serveSpoke(ctx, sim, opts, res)
		}()
	}
	wg.Wait()
	total := &ActionResult{}
	var all []*Result
	for _, r := range snaps {
		if r != nil {
			all = append(all, r)
		}
	}
	for _, r := range results {
		all = append(all, r.Result)
		total.Polls += r.Polls
		total.PollErrors += r.PollErrors
		total.Actions += r.Actions
		total.Repeats += r.Repeats
		total.OutcomeErrors += r.OutcomeErrors
		total.OutcomeRetries += r.OutcomeRetries
	}
	total.Result = merge(all)
	total.Elapsed = time.Since(start)
	return total, nil
}

// String summarizes the result on one line.
func (r *ActionResult) String() string {
	return fmt.Sprintf("%d polls (%d failed), %d actions carried out, %d offered again, %d outcome reports failed, %d sent again after a 429, 503 or no answer; requests: %s",
		r.Polls, r.PollErrors, r.Actions, r.Repeats, r.OutcomeErrors, r.OutcomeRetries, r.Result)
}

// heartbeat posts sim's snapshot every StateInterval (±10%) until ctx ends.
func (g *Generator) heartbeat(ctx context.Context, sim *spokeSim, res *Result) {
	reqCtx := context.WithoutCancel(ctx)
	rnd := rand.New(rand.NewPCG(uint64(sim.index), 0x4ea7)) //nolint:gosec // spreads snapshot times; nothing secret
	next := sim.lastState.Add(g.opts.StateInterval)
	if next.Before(time.Now()) {
		next = time.Now().Add(time.Duration(rnd.Int64N(int64(g.opts.StateInterval))))
	}
	for sleep(ctx, time.Until(next)) {
		sim.mu.Lock()
		now := time.Now()
		body, n := sim.snapshot(now)
		sim.lastState = now
		sim.mu.Unlock()
		next = now.Add(time.Duration(float64(g.opts.StateInterval) * (0.9 + 0.2*rnd.Float64())))
		g.send(ctx, reqCtx, sim, wire.StatePath(sim.spoke.Name), body, false, n, res, func() bool { return true })
	}
}

// doneAction is an action a simulated agent carried out.
type doneAction struct {
	outcome  wire.ActionOutcome
	reported time.Time // when the hub answered its report; zero if it did not
}

// serveSpoke is one simulated agent's actions loop.
func (g *Generator) serveSpoke(ctx context.Context, sim *spokeSim, opts ActionOptions, res *ActionResult) {
	done := map[string]*doneAction{}
	for ctx.Err() == nil {
		polled := time.Now()
		acts, err := g.poll(ctx, sim.spoke, opts.PollTimeout)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			res.PollErrors++
			var he *hubError
			_ = errors.As(err, &he)
			_ = sleep(ctx, max(opts.MinPollInterval, retryDelay(he)))
			continue
		}
		res.Polls++
		received := time.Now()
		fresh := false
		for _, a := range acts {
			if d, ok := done[a.ID]; ok {
				res.Repeats++
				// The hub offers an action until it processed the report; a
				// list asked for after the report was answered means the hub
				// lost it: report it again, as the agent does.
				if !d.reported.IsZero() && polled.After(d.reported) {
					if err := g.report(ctx, sim.spoke, d.outcome, res); err == nil {
						d.reported = time.Now()
					}
				}
				continue
			}
			fresh = true
			res.Actions++
			rep := g.carryOut(ctx, sim, a, received, opts, res)
			done[a.ID] = &doneAction{outcome: wire.ActionOutcome{ID: a.ID, Result: rep.Result, Revision: rep.Revision, Time: rep.Reported}, reported: rep.Reported}
			if opts.OnAction != nil {
				opts.OnAction(rep)
			}
		}
		if !fresh {
			_ = sleep(ctx, opts.MinPollInterval-time.Since(polled))
		}
	}
}

// carryOut carries out one action and reports it.
func (g *Generator) carryOut(ctx context.Context, sim *spokeSim, a wire.Action, received time.Time, opts ActionOptions, res *ActionResult) ActionReport {
	reqCtx := context.WithoutCancel(ctx)
	rep := ActionReport{Spoke: sim.spoke.Name, Action: a, Received: received, Result: wire.ActionRefused}
	outcome := wire.ActionOutcome{ID: a.ID, Result: wire.ActionRefused}
	r := sim.release(a.Namespace, a.Release)
	upgraded := false
	switch {
	case a.TypeOf() != wire.ActionUpgrade:
		outcome.Message = "the load generator's simulated agent carries out upgrades only, not " + clip.String(a.TypeOf(), 64)
	case r == nil:
		outcome.Message = fmt.Sprintf("spoke %s has no release %s/%s", sim.spoke.Name, clip.String(a.Namespace, 64), clip.String(a.Release, 64))
	case a.Version == "":
		outcome.Message = "the action names no version"
	default:
		sim.mu.Lock()
		if r.version() == a.Version && r.status == wire.StatusDeployed {
			outcome.Result, outcome.Revision, outcome.Message = wire.ActionSucceeded, r.revision, "the release already runs "+a.Version
			sim.mu.Unlock()
			break
		}
		started, n := sim.upgradeStarted(r, a.Version, time.Now())
		sim.mu.Unlock()
		g.send(ctx, reqCtx, sim, wire.EventsPath(sim.spoke.Name), started, true, n, res.Result, func() bool { return true })
		if !sleep(ctx, time.Until(received.Add(opts.Delay))) {
			rep.Err = ctx.Err()
			return rep
		}
		sim.mu.Lock()
		outcome.Result, outcome.Revision, outcome.Message = wire.ActionSucceeded, r.revision, "upgraded by the load generator's simulated agent"
		sim.mu.Unlock()
		upgraded = true
	}
	outcome.Time = time.Now().UTC()
	rep.Result, rep.Revision = outcome.Result, outcome.Revision
	if err := g.report(ctx, sim.spoke, outcome, res); err != nil {
		res.OutcomeErrors++
		rep.Err = err
		return rep
	}
	rep.Reported = time.Now()
	if upgraded {
		// The release turns healthy only now, so that no snapshot (the
		// heartbeat) reports it healthy before HealthySent.
		sim.mu.Lock()
		rep.HealthySent = time.Now()
		healthy, healthyEvents := sim.upgradeHealthy(r, rep.HealthySent)
		sim.mu.Unlock()
		o := g.sendOutcome(ctx, reqCtx, sim, wire.EventsPath(sim.spoke.Name), healthy, healthyEvents, res.Result)
		if o.code == http.StatusAccepted && o.err == nil {
			rep.HealthyAnswered = time.Now()
		} else {
			rep.Err = fmt.Errorf("reporting revision %d healthy: answered %d", rep.Revision, o.code)
			if o.err != nil {
				rep.Err = fmt.Errorf("%w: %w", rep.Err, o.err)
			}
		}
	}
	return rep
}

// sendOutcome is send that returns the last answer.
func (g *Generator) sendOutcome(ctx, reqCtx context.Context, sim *spokeSim, path string, body []byte, n int, res *Result) outcome {
	for {
		o := g.post(reqCtx, sim.spoke, path, body)
		res.record(o, true, n)
		if !o.retryable() || !sleep(ctx, o.retryAfter) {
			return o
		}
	}
}

// errUnsigned: an answer that does not verify with the spoke's key.
var errUnsigned = errors.New("loadgen: the hub's answer is not signed with the spoke's key")

// poll long-polls the hub for s's actions. The answer is used only when
// its signature verifies with s's key.
func (g *Generator) poll(ctx context.Context, s Spoke, timeout time.Duration) ([]wire.Action, error) {
	raw, err := g.signed(ctx, s, http.MethodGet, wire.ActionsPath(s.Name), nil, timeout)
	if err != nil {
		return nil, err
	}
	var list wire.ActionList
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("loadgen: decoding the hub's actions: %w", err)
	}
	return list.Actions, nil
}

// report posts an action's outcome until the hub answers it 200, refuses
// it for good (another code than 429 and 503), or ctx ends: as the agent
// does, a transport error, a 429 or a 503 is retried after Retry-After (1 s
// without one). The requests themselves are not canceled with ctx.
func (g *Generator) report(ctx context.Context, s Spoke, o wire.ActionOutcome, res *ActionResult) error {
	body, err := json.Marshal(o)
	if err != nil {
		return err
	}
	for {
		_, err = g.signed(context.WithoutCancel(ctx), s, http.MethodPost, wire.ActionPath(s.Name, o.ID), body, g.opts.RequestTimeout)
		var he *hubError
		if err == nil || errors.As(err, &he) && !he.retryable() || !sleep(ctx, retryDelay(he)) {
			return err
		}
		res.OutcomeRetries++
	}
}

// hubError is an answer other than 200 on the actions channel.
type hubError struct {
	method, path string
	code         int
	body         string
	retryAfter   time.Duration
}

func (e *hubError) Error() string {
	return fmt.Sprintf("loadgen: %s %s answered %d: %s", e.method, e.path, e.code, e.body)
}

func (e *hubError) retryable() bool {
	return e.code == http.StatusTooManyRequests || e.code == http.StatusServiceUnavailable
}

// retryDelay is how long to wait before sending again after he (nil: no
// answer at all).
func retryDelay(he *hubError) time.Duration {
	if he == nil || he.retryAfter <= 0 {
		return time.Second
	}
	return he.retryAfter
}

// signed sends a request of the actions channel, signed with s's key and
// with a fresh nonce, and returns the body of a 200 answer whose response
// signature verifies.
func (g *Generator) signed(ctx context.Context, s Spoke, method, path string, body []byte, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, g.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "tugboat-loadgen")
	wire.SignRequest(req, s.Key, body, time.Now())
	req.Header.Set(wire.HeaderNonce, wire.NewNonce())
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxPollAnswer))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		he := &hubError{method: method, path: path, code: resp.StatusCode, body: clip.String(string(bytes.TrimSpace(raw)), 256)}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
			he.retryAfter = time.Duration(secs) * time.Second
		}
		return nil, he
	}
	if err := wire.VerifyResponse(s.Key, req, resp.StatusCode, resp.Header.Get(wire.HeaderResponseSignature), raw); err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", errUnsigned, method, path, err)
	}
	return raw, nil
}
