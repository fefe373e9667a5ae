package actions

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"tugboat.dev/tugboat/agent/hubhttp"
	"tugboat.dev/tugboat/api/wire"
)

const (
	// doneTTL is how long a reported outcome is remembered, so that an
	// action the hub offers again before it has processed the report is
	// answered with the same outcome instead of being run again.
	doneTTL = 10 * time.Minute
	// maxDone bounds the remembered outcomes.
	maxDone = 1024
)

// Runner carries out one action; *Executor is the real one.
type Runner interface {
	Execute(ctx context.Context, a wire.Action) (wire.ActionOutcome, error)
}

// Poller long-polls the hub for this spoke's actions, runs each (one at a
// time per release, at most MaxConcurrent at once, never twice at once),
// and reports every outcome until the hub accepts it. It is a
// controller-runtime manager.Runnable that runs in every replica.
type Poller struct {
	hub  *hubClient
	run  Runner
	opts Options
	log  logr.Logger
	rand func(n int64) int64

	sem      chan struct{}
	releases keyedMutex
	wg       sync.WaitGroup

	// finished is signaled (never blocking) when an action's outcome was
	// reported: the hub stops offering it, so a poll no longer returns it
	// at once.
	finished chan struct{}

	mu       sync.Mutex
	inflight map[string]bool
	done     map[string]doneEntry
}

type doneEntry struct {
	outcome wire.ActionOutcome
	at      time.Time
	// reported is when the hub answered the outcome's report (accepted or
	// forgot it): a list of actions asked for before then may still name
	// the action, and is no reason to report it again.
	reported time.Time
}

// New returns a Poller that reaches hub and carries out actions on the
// cluster cfg reaches.
func New(cfg *rest.Config, opts Options, hub Hub, log logr.Logger) (*Poller, error) {
	exec, err := NewExecutor(cfg, opts, log)
	if err != nil {
		return nil, err
	}
	return NewPoller(exec, opts, hub, log)
}

// NewPoller returns a Poller that hands actions to run.
func NewPoller(run Runner, opts Options, hub Hub, log logr.Logger) (*Poller, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log = log.WithValues("spoke", hub.Spoke)
	hc, err := newHubClient(hub, opts, log)
	if err != nil {
		return nil, err
	}
	return &Poller{
		hub:      hc,
		run:      run,
		opts:     opts,
		log:      log,
		rand:     rand.Int64N,
		sem:      make(chan struct{}, opts.MaxConcurrent),
		finished: make(chan struct{}, 1),
		inflight: map[string]bool{},
		done:     map[string]doneEntry{},
	}, nil
}

// NeedLeaderElection is false: the agent does not elect a leader.
func (p *Poller) NeedLeaderElection() bool { return false }

// Start polls until ctx ends, then waits for the actions under way: an
// upgrade that has started is let finish, so it does not leave a pending
// revision behind (their reports are abandoned; the hub offers the actions
// again and the next agent finds them done).
func (p *Poller) Start(ctx context.Context) error {
	l, err := (&limitsSource{flags: p.opts.Limits, path: p.opts.LimitsFile}).get()
	if err != nil {
		p.log.Error(err, "The actions limits file cannot be used; every action will be refused until it can", "file", p.opts.LimitsFile)
	}
	p.log.Info("Polling the hub for promotion actions",
		"allowedNamespaces", l.Namespaces, "allowedChartSources", l.ChartSources, "allowDowngrades", l.AllowDowngrades)
	if len(l.Namespaces) == 0 {
		p.log.Info("No namespace may receive promotions: every action will be refused (set " + flagNamespaces + ")")
	}
	failures := 0
	for ctx.Err() == nil {
		started := time.Now()
		actions, err := p.hub.poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			failures++
			d := hubhttp.Backoff(failures, p.opts.BackoffInitial, p.opts.BackoffMax, p.rand)
			var he *hubError
			if errors.As(err, &he) && he.retryAfter > d {
				d = he.retryAfter
			}
			p.logFailure("Cannot poll the hub for actions; retrying", err, failures, d)
			_ = sleep(ctx, d)
			continue
		}
		if failures > 0 {
			p.log.Info("Polling the hub for actions again", "after", failures)
		}
		failures = 0
		fresh := false
		for _, a := range actions {
			if p.dispatch(ctx, a, started) {
				fresh = true
			}
		}
		p.pace(ctx, started, fresh, len(actions) > 0)
	}
	p.wg.Wait()
	return nil
}

// pace waits before the next poll, so that a hub answering at once cannot
// make the agent spin, without delaying an action that is ready:
//   - after an answer with a new action, it polls again at once (a second
//     action queued meanwhile is not held back);
//   - after an answer that only repeats actions under way (the hub offers an
//     action until its outcome is reported), it waits until one of them is
//     reported or MinPollInterval has passed since the poll started;
//   - after an empty answer (the hub held the poll until its timeout), it
//     waits what is left of MinPollInterval since the poll started.
func (p *Poller) pace(ctx context.Context, started time.Time, fresh, repeats bool) {
	if fresh {
		return
	}
	wait := p.opts.MinPollInterval - time.Since(started)
	if wait <= 0 {
		return
	}
	if !repeats {
		_ = sleep(ctx, wait)
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-p.finished:
	}
}

// dispatch starts an action unless it is under way; an action reported
// recently is reported again instead of being run again, unless the list
// naming it was asked for (at polled) before the hub answered that report.
// It returns whether the action was new to this poller (neither under way
// nor reported).
func (p *Poller) dispatch(ctx context.Context, a wire.Action, polled time.Time) bool {
	log := p.log.WithValues("action", a.ID)
	if a.ID == "" {
		log.Error(nil, "The hub sent an action without an id; ignoring it", "namespace", a.Namespace, "release", a.Release)
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight[a.ID] {
		return false
	}
	d, done := p.done[a.ID]
	done = done && time.Since(d.at) < doneTTL
	if done && polled.Before(d.reported) {
		// The hub answered this poll before it answered the report.
		return false
	}
	p.inflight[a.ID] = true
	p.wg.Add(1)
	if done {
		log.V(1).Info("Action offered again after it was carried out; reporting its outcome again")
		go p.finish(ctx, d.outcome)
		return false
	}
	go p.carryOut(ctx, a)
	return true
}

// carryOut runs one action under the release's lock and reports it.
func (p *Poller) carryOut(ctx context.Context, a wire.Action) {
	unlock, err := p.acquire(ctx, releaseKey(a))
	if err != nil {
		p.release(a.ID)
		return
	}
	out, err := p.run.Execute(ctx, a)
	unlock()
	if err != nil {
		// Nothing was done (ctx ended); the hub offers it again.
		p.release(a.ID)
		return
	}
	p.remember(out)
	p.finish(ctx, out)
}

// finish reports out and forgets that its action is under way.
func (p *Poller) finish(ctx context.Context, out wire.ActionOutcome) {
	if p.report(ctx, out) {
		p.mu.Lock()
		if d, ok := p.done[out.ID]; ok {
			d.reported = time.Now()
			p.done[out.ID] = d
		}
		p.mu.Unlock()
	}
	p.release(out.ID)
	select {
	case p.finished <- struct{}{}:
	default:
	}
}

// release marks an action as no longer under way.
func (p *Poller) release(id string) {
	p.mu.Lock()
	delete(p.inflight, id)
	p.mu.Unlock()
	p.wg.Done()
}

// remember keeps an outcome for re-delivery, dropping expired ones.
func (p *Poller) remember(out wire.ActionOutcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for id, d := range p.done {
		if now.Sub(d.at) >= doneTTL || len(p.done) >= maxDone {
			delete(p.done, id)
		}
	}
	p.done[out.ID] = doneEntry{outcome: out, at: now}
}

// acquire takes a slot and the release's lock.
func (p *Poller) acquire(ctx context.Context, key string) (func(), error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	unlock, err := p.releases.lock(ctx, key)
	if err != nil {
		<-p.sem
		return nil, err
	}
	return func() { unlock(); <-p.sem }, nil
}

// report posts out until the hub accepts it, forgot the action (404), or
// refuses the body (400, 413), or ctx ends. It returns whether the hub
// answered the report (anything but ctx ending).
func (p *Poller) report(ctx context.Context, out wire.ActionOutcome) bool {
	log := p.log.WithValues("action", out.ID, "result", out.Result)
	for attempt := 1; ; attempt++ {
		err := p.hub.report(ctx, out)
		var he *hubError
		errors.As(err, &he)
		switch {
		case err == nil:
			log.V(1).Info("Outcome reported")
			return true
		case he != nil && he.code == http.StatusNotFound:
			log.Info("The hub no longer knows the action; dropping its outcome")
			return true
		case he != nil && (he.code == http.StatusBadRequest || he.code == http.StatusRequestEntityTooLarge):
			log.Error(err, "The hub rejected the outcome; dropping it")
			return true
		case ctx.Err() != nil:
			log.Info("Stopping before the outcome was reported; the hub will offer the action again")
			return false
		}
		d := hubhttp.Backoff(attempt, p.opts.BackoffInitial, p.opts.BackoffMax, p.rand)
		if he != nil && he.retryAfter > d {
			d = he.retryAfter
		}
		p.logFailure("Cannot report an action's outcome; retrying", err, attempt, d, "action", out.ID)
		if sleep(ctx, d) != nil {
			log.Info("Stopping before the outcome was reported; the hub will offer the action again")
			return false
		}
	}
}

// logFailure logs the first failure of a run, and every 401, at error
// level; the rest at V(1).
func (p *Poller) logFailure(msg string, err error, failures int, retryIn time.Duration, kv ...any) {
	kv = append(kv, "failures", failures, "retryIn", retryIn.Round(time.Millisecond).String())
	if errors.Is(err, errUnsignedAnswer) {
		kv = append(kv, "hint", "an answer not signed with this spoke's key was refused: something between the agent and the hub may be tampering with it, or the hub predates response signing")
		p.log.Error(err, msg, kv...)
		return
	}
	var he *hubError
	if errors.As(err, &he) && he.code == http.StatusUnauthorized {
		kv = append(kv, "hint", "the hub did not accept the signature: check the spoke name, the key file and the clock")
		p.log.Error(err, msg, kv...)
		return
	}
	if failures == 1 {
		p.log.Error(err, msg, kv...)
		return
	}
	p.log.V(1).Info(msg, append(kv, "err", err.Error())...)
}

// releaseKey is what actions are serialized on: the Helm release, or the
// HelmRelease.
func releaseKey(a wire.Action) string {
	if a.HelmRelease != nil {
		ns := a.HelmRelease.Namespace
		if ns == "" {
			ns = a.Namespace
		}
		return "helmrelease:" + ns + "/" + a.HelmRelease.Name
	}
	return "release:" + a.Namespace + "/" + a.Release
}

// keyedMutex is a set of mutexes by key, held while a context lasts.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{}
	refs int
}

// lock takes the key's lock, or returns ctx's error; unlock releases it.
func (k *keyedMutex) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()

	put := func() {
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; put() }, nil
	case <-ctx.Done():
		put()
		return nil, ctx.Err()
	}
}
