package loadgen_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/e2e/loadgen"
	"tugboat.dev/tugboat/webhook/receiver"
)

// actionStore is an ingest.ActionStore that offers queued actions until
// their outcome is reported, and keeps the outcomes.
type actionStore struct {
	mu       sync.Mutex
	queued   map[string][]wire.Action // by spoke
	outcomes map[string]wire.ActionOutcome
	offered  map[string]int // how many answers carried each action
	changed  chan struct{}
}

func newActionStore() *actionStore {
	return &actionStore{queued: map[string][]wire.Action{}, outcomes: map[string]wire.ActionOutcome{}, offered: map[string]int{}, changed: make(chan struct{})}
}

func (s *actionStore) queue(spoke string, a wire.Action) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queued[spoke] = append(s.queued[spoke], a)
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *actionStore) Pending(_ context.Context, sp ingest.Spoke) ([]wire.Action, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []wire.Action
	for _, a := range s.queued[sp.Name] {
		if _, ok := s.outcomes[a.ID]; !ok {
			out = append(out, a)
			s.offered[a.ID]++
		}
	}
	return out, nil
}

func (s *actionStore) Report(_ context.Context, sp ingest.Spoke, o wire.ActionOutcome) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.queued[sp.Name] {
		if a.ID != o.ID {
			continue
		}
		if prev, ok := s.outcomes[o.ID]; ok && prev.Result != o.Result {
			return ingest.ErrActionConflict
		}
		s.outcomes[o.ID] = o
		return nil
	}
	return ingest.ErrActionNotFound
}

func (s *actionStore) Wait(ingest.Spoke) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *actionStore) outcome(id string) (wire.ActionOutcome, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.outcomes[id]
	return o, ok
}

// eventStore is countingStore keeping every event, by spoke.
type eventStore struct {
	*countingStore
	mu  sync.Mutex
	got map[string][]wire.Event
}

func (s *eventStore) RecordEvents(ctx context.Context, sp ingest.Spoke, events []wire.Event) error {
	s.mu.Lock()
	s.got[sp.Name] = append(s.got[sp.Name], events...)
	s.mu.Unlock()
	return s.countingStore.RecordEvents(ctx, sp, events)
}

func (s *eventStore) events(spoke string) []wire.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]wire.Event(nil), s.got[spoke]...)
}

func upgrade(spoke, release, version string) wire.Action {
	return wire.Action{
		ID: wire.NewActionID("promotion-uid", spoke, "team-0", release), Promotion: "ns/web-production-" + version,
		Namespace: "team-0", Release: release, Chart: wire.ChartSource{Repository: "https://charts.example.com", Name: release},
		Version: version, Created: time.Now().UTC(),
	}
}

// TestGenerator_answersActionsAsAnAgent: simulated agents long-poll a
// real receiver for their actions, carry out each upgrade once (reported
// Succeeded with the next revision after the delay, then that revision
// reported deployed and Current at the action's version), and refuse what
// they do not carry out; an action queued while they wait reaches them
// through the held poll.
func TestGenerator_answersActionsAsAnAgent(t *testing.T) {
	g := NewWithT(t)
	spokes, keys := fleetOf(3)
	events := &eventStore{countingStore: &countingStore{keys: keys, kinds: map[wire.EventKind]int{}, revision: map[string]int{}}, got: map[string][]wire.Event{}}
	acts := newActionStore()
	opts := receiver.NewOptions()
	opts.Registerer = prometheus.NewRegistry()
	opts.Logger = logr.Discard()
	opts.Actions = acts
	opts.ActionPollTimeout = 2 * time.Second
	srv, err := receiver.New(events, opts)
	g.Expect(err).NotTo(HaveOccurred())
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	gen, err := loadgen.New(loadgen.Options{URL: hs.URL, Spokes: spokes, Releases: 1, Duration: time.Minute, MaxRequests: 1000})
	g.Expect(err).NotTo(HaveOccurred())
	defer gen.Close()
	_, err = gen.Announce(context.Background())
	g.Expect(err).NotTo(HaveOccurred())

	first := upgrade(spokes[0].Name, "svc-00", "1.1.0")
	acts.queue(spokes[0].Name, first)
	rollback := wire.Action{ID: wire.NewRollbackActionID("promotion-uid", spokes[1].Name, "team-0", "svc-00"), Type: wire.ActionRollback,
		Promotion: "ns/p", Namespace: "team-0", Release: "svc-00", Rollback: &wire.RollbackAction{Revision: 1, Version: "1.0.0", From: "1.1.0"}}
	acts.queue(spokes[1].Name, rollback)
	unknown := upgrade(spokes[1].Name, "nope", "1.1.0")
	acts.queue(spokes[1].Name, unknown)

	var mu sync.Mutex
	reports := map[string]loadgen.ActionReport{}
	const delay = 150 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan *loadgen.ActionResult, 1)
	go func() {
		res, err := gen.ServeActions(ctx, loadgen.ActionOptions{Delay: delay, MinPollInterval: 50 * time.Millisecond, OnAction: func(r loadgen.ActionReport) {
			mu.Lock()
			defer mu.Unlock()
			reports[r.Action.ID] = r
		}})
		if err != nil {
			t.Error(err)
		}
		served <- res
	}()
	report := func(id string) func() *loadgen.ActionReport {
		return func() *loadgen.ActionReport {
			mu.Lock()
			defer mu.Unlock()
			if r, ok := reports[id]; ok {
				return &r
			}
			return nil
		}
	}
	// Queued once the agents poll (spoke 2's poll is then most likely
	// held): the held poll answers it.
	g.Eventually(report(first.ID)).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).ShouldNot(BeNil())
	late := upgrade(spokes[2].Name, "svc-00", "1.1.0")
	acts.queue(spokes[2].Name, late)

	for _, a := range []wire.Action{first, late} {
		g.Eventually(report(a.ID)).WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).ShouldNot(BeNil(), a.Promotion)
		r := *report(a.ID)()
		g.Expect(r.Err).NotTo(HaveOccurred())
		g.Expect([]any{r.Result, r.Revision}).To(Equal([]any{wire.ActionSucceeded, 2}))
		g.Expect(r.Reported.Sub(r.Received)).To(BeNumerically(">=", delay), "the outcome comes after the delay")
		g.Expect(r.HealthySent).NotTo(BeTemporally("<", r.Reported), "healthy is reported after the outcome")
		g.Expect(r.HealthyAnswered).NotTo(BeTemporally("<", r.HealthySent))
		o, ok := acts.outcome(a.ID)
		g.Expect(ok).To(BeTrue())
		g.Expect([]any{o.Result, o.Revision}).To(Equal([]any{wire.ActionSucceeded, 2}))

		var kinds []string
		for _, e := range events.events(r.Spoke) {
			if e.Revision == 2 && e.State != nil {
				kinds = append(kinds, string(e.Kind)+" "+string(e.State.Status)+" "+string(e.State.Health)+" "+e.State.ChartVersion)
			}
		}
		g.Expect(kinds).To(Equal([]string{
			"ReleaseStarted pending-upgrade InProgress 1.1.0",
			"ReleaseStatus deployed Current 1.1.0",
			"HealthChanged deployed Current 1.1.0",
		}), r.Spoke)
	}
	for _, a := range []wire.Action{rollback, unknown} {
		g.Eventually(func() bool { _, ok := acts.outcome(a.ID); return ok }).WithTimeout(10 * time.Second).Should(BeTrue())
		o, _ := acts.outcome(a.ID)
		g.Expect(o.Result).To(Equal(wire.ActionRefused), a.Release)
		g.Expect(o.Message).NotTo(BeEmpty())
	}
	g.Expect(events.events(spokes[1].Name)).To(HaveLen(0), "a refused action changes nothing")

	// Offered again (the hub lost the report): reported again, not redone.
	acts.mu.Lock()
	delete(acts.outcomes, first.ID)
	close(acts.changed)
	acts.changed = make(chan struct{})
	acts.mu.Unlock()
	g.Eventually(func() bool { _, ok := acts.outcome(first.ID); return ok }).WithTimeout(10 * time.Second).Should(BeTrue())
	o, _ := acts.outcome(first.ID)
	g.Expect([]any{o.Result, o.Revision}).To(Equal([]any{wire.ActionSucceeded, 2}))

	cancel()
	var res *loadgen.ActionResult
	g.Eventually(served).WithTimeout(10 * time.Second).Should(Receive(&res))
	t.Log(res)
	g.Expect(res.Actions).To(Equal(4), "each action carried out once")
	g.Expect(res.Repeats).To(BeNumerically(">=", 1))
	g.Expect(res.PollErrors).To(BeZero())
	g.Expect(res.OutcomeErrors).To(BeZero())
	g.Expect(res.Errors()).To(BeEmpty())
	for _, sp := range spokes {
		var n int
		for _, e := range events.events(sp.Name) {
			if e.Kind == wire.EventReleaseStarted {
				n++
			}
		}
		g.Expect(n).To(BeNumerically("<=", 1), "%s upgraded at most once", sp.Name)
	}
}

// TestGenerator_dropsUnsignedActions: an answer to a poll that is not
// signed with the spoke's key is not acted on, as the agent refuses it.
func TestGenerator_dropsUnsignedActions(t *testing.T) {
	g := NewWithT(t)
	spokes, _ := fleetOf(1)
	var reported sync.Map
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			reported.Store(r.URL.Path, true)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(wire.HeaderResponseSignature, "v1=00")
		_, _ = w.Write([]byte(`{"actions":[{"id":"0123456789abcdef0123456789abcdef","namespace":"team-0","release":"svc-00","version":"9.9.9"}]}`))
	}))
	t.Cleanup(hs.Close)
	gen, err := loadgen.New(loadgen.Options{URL: hs.URL, Spokes: spokes, Releases: 1, Duration: time.Minute, MaxRequests: 1})
	g.Expect(err).NotTo(HaveOccurred())
	defer gen.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	res, err := gen.ServeActions(ctx, loadgen.ActionOptions{MinPollInterval: 50 * time.Millisecond})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Actions).To(BeZero())
	g.Expect(res.Polls).To(BeZero())
	g.Expect(res.PollErrors).To(BeNumerically(">", 0))
	n := 0
	reported.Range(func(any, any) bool { n++; return true })
	g.Expect(n).To(BeZero(), "nothing reported, no event sent")
}

func TestGenerator_refusesNegativeActionOptions(t *testing.T) {
	g := NewWithT(t)
	spokes, _ := fleetOf(1)
	gen, err := loadgen.New(loadgen.Options{URL: "http://127.0.0.1:1", Spokes: spokes, Releases: 1, Duration: time.Second, MaxRequests: 1})
	g.Expect(err).NotTo(HaveOccurred())
	defer gen.Close()
	_, err = gen.ServeActions(context.Background(), loadgen.ActionOptions{Delay: -time.Second})
	g.Expect(err).To(MatchError(ContainSubstring("must not be negative")))
}

// snapshotStore is eventStore keeping, for each snapshot, when it arrived
// and the state of its first release.
type snapshotStore struct {
	*eventStore
	mu    sync.Mutex
	snaps []snapshotSeen
}

type snapshotSeen struct {
	at    time.Time
	state wire.ReleaseState
}

func (s *snapshotStore) RecordState(ctx context.Context, sp ingest.Spoke, snap *wire.StateSnapshot) error {
	s.mu.Lock()
	if len(snap.Releases) > 0 {
		s.snaps = append(s.snaps, snapshotSeen{at: time.Now(), state: snap.Releases[0]})
	}
	s.mu.Unlock()
	return s.countingStore.RecordState(ctx, sp, snap)
}

// TestGenerator_heartbeatsNeverReportAnUpgradeHealthyEarly: while an
// upgrade is under way, the spoke's snapshots (every 20 ms here) report its
// revision pending; none says it is deployed and Current before the
// simulated agent reports it so (ActionReport.HealthySent), which the
// rollout benchmark takes as the moment the target qualified.
func TestGenerator_heartbeatsNeverReportAnUpgradeHealthyEarly(t *testing.T) {
	g := NewWithT(t)
	spokes, keys := fleetOf(1)
	store := &snapshotStore{eventStore: &eventStore{countingStore: &countingStore{keys: keys, kinds: map[wire.EventKind]int{}, revision: map[string]int{}}, got: map[string][]wire.Event{}}}
	acts := newActionStore()
	opts := receiver.NewOptions()
	opts.Registerer = prometheus.NewRegistry()
	opts.Logger = logr.Discard()
	opts.Actions = acts
	opts.ActionPollTimeout = time.Second
	srv, err := receiver.New(store, opts)
	g.Expect(err).NotTo(HaveOccurred())
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	gen, err := loadgen.New(loadgen.Options{URL: hs.URL, Spokes: spokes, Releases: 1, Duration: time.Minute, MaxRequests: 1000,
		StateInterval: 20 * time.Millisecond})
	g.Expect(err).NotTo(HaveOccurred())
	defer gen.Close()

	a := upgrade(spokes[0].Name, "svc-00", "1.1.0")
	acts.queue(spokes[0].Name, a)
	var mu sync.Mutex
	var rep *loadgen.ActionReport
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = gen.ServeActions(ctx, loadgen.ActionOptions{Delay: 300 * time.Millisecond, Snapshots: true, OnAction: func(r loadgen.ActionReport) {
			mu.Lock()
			defer mu.Unlock()
			rep = &r
		}})
	}()
	g.Eventually(func() bool { mu.Lock(); defer mu.Unlock(); return rep != nil }).WithTimeout(10 * time.Second).Should(BeTrue())
	// Snapshots go on after the upgrade; then stop.
	g.Eventually(func() int { store.mu.Lock(); defer store.mu.Unlock(); return len(store.snaps) }).WithTimeout(5 * time.Second).Should(BeNumerically(">", 15))
	cancel()
	<-done

	mu.Lock()
	healthySent := rep.HealthySent
	mu.Unlock()
	g.Expect(healthySent).NotTo(BeZero())
	store.mu.Lock()
	defer store.mu.Unlock()
	pending, healthyAfter := 0, 0
	for _, s := range store.snaps {
		st := s.state
		if st.Revision != 2 {
			continue
		}
		if st.Status == wire.StatusDeployed && st.Health == wire.HealthCurrent {
			g.Expect(s.at).To(BeTemporally(">=", healthySent), "a snapshot reported revision 2 healthy before the agent did")
			g.Expect(st.ChartVersion).To(Equal("1.1.0"))
			healthyAfter++
			continue
		}
		g.Expect([]any{st.Status, st.Health}).To(Equal([]any{wire.StatusPendingUpgrade, wire.HealthInProgress}))
		pending++
	}
	g.Expect(pending).To(BeNumerically(">", 0), "snapshots were taken during the upgrade")
	g.Expect(healthyAfter).To(BeNumerically(">", 0), "and after it")
}
