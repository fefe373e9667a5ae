package loadgen

import (
	"context"
	"math/rand/v2"
	"time"

	"tugboat.dev/tugboat/api/wire"
)

// runFleetSpoke is one simulated agent's loop under fleet pacing
// (Options.ChangeInterval): a snapshot every StateInterval (±10%) and, one
// at a time, release changes whose three rollout steps are sent
// StepInterval apart, the next change starting ChangeInterval (±50%) after
// the last one ended.
func (g *Generator) runFleetSpoke(ctx context.Context, sim *spokeSim, res *Result, take func() bool) {
	reqCtx := context.WithoutCancel(ctx)
	rnd := rand.New(rand.NewPCG(uint64(sim.index), 0xf1ee7)) //nolint:gosec // spreads request times; nothing secret
	jitter := func(d time.Duration, spread float64) time.Duration {
		return time.Duration(float64(d) * (1 - spread + 2*spread*rnd.Float64()))
	}
	now := time.Now()
	// The next snapshot is due StateInterval after the last; one overdue
	// (a long announce) comes at a random point within StateInterval, so
	// that overdue snapshots do not all come at once.
	nextState := sim.lastState.Add(g.opts.StateInterval)
	if nextState.Before(now) {
		nextState = now.Add(time.Duration(rnd.Int64N(int64(g.opts.StateInterval))))
	}
	nextChange := now.Add(time.Duration(rnd.Int64N(int64(g.opts.ChangeInterval))))
	var rolling *release
	for {
		due := nextChange
		if nextState.Before(due) {
			due = nextState
		}
		if !sleep(ctx, time.Until(due)) || !take() {
			return
		}
		began := time.Now()
		if !nextState.After(began) {
			body, n := sim.snapshot(began)
			sim.lastState = began
			nextState = began.Add(jitter(g.opts.StateInterval, 0.1))
			g.send(ctx, reqCtx, sim, wire.StatePath(sim.spoke.Name), body, false, n, res, take)
			continue
		}
		if rolling == nil {
			rolling = &sim.releases[sim.next]
			sim.next = (sim.next + 1) % len(sim.releases)
		}
		body, n, sample := sim.batchOf(began, rolling)
		if rolling.step == 0 { // the rollout is complete
			rolling = nil
			nextChange = began.Add(jitter(g.opts.ChangeInterval, 0.5))
		} else {
			nextChange = began.Add(g.opts.StepInterval)
		}
		if k := g.batches.Add(1); g.opts.OnSample != nil && g.opts.SampleEvery > 0 && k%int64(g.opts.SampleEvery) == 0 && sample.id != "" {
			g.opts.OnSample(Sample{History: sample.history, EventID: sample.id, Sent: time.Now()})
		}
		g.send(ctx, reqCtx, sim, wire.EventsPath(sim.spoke.Name), body, true, n, res, take)
	}
}
