package reporter

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"tugboat.dev/tugboat/api/wire"
)

const (
	eventually = 10 * time.Second
	poll       = 10 * time.Millisecond
)

var testKey = []byte("0123456789abcdef-test-key-for-the-reporter")

// writeKey writes key to a new file (atomically, by rename, as a Secret
// volume update does) and returns its path.
func writeKey(t testing.TB, path string, key []byte) string {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "key")
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// testOptions returns fast options pointing at rc.
func testOptions(t testing.TB, rc *receiver, key []byte) Options {
	o := NewOptions()
	o.HubURL = rc.url()
	o.Spoke = rc.spoke
	o.KeyFile = writeKey(t, "", key)
	o.CAFile = rc.caFile
	o.BatchMaxWait = 20 * time.Millisecond
	o.BackoffInitial = 10 * time.Millisecond
	o.BackoffMax = 100 * time.Millisecond
	o.StateInterval = time.Hour
	o.RequestTimeout = 5 * time.Second
	o.AgentVersion = "v0.0.0-test"
	return o
}

// fakeState is the agent's level-based truth: one release, web, at a
// revision the test moves.
type fakeState struct {
	mu  sync.Mutex
	rev int
}

func (f *fakeState) set(rev int) {
	f.mu.Lock()
	f.rev = rev
	f.mu.Unlock()
}

func (f *fakeState) snapshot(context.Context) (*wire.StateSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &wire.StateSnapshot{Releases: []wire.ReleaseState{{
		Namespace: "apps", Release: "web", Chart: "web", ChartVersion: fmt.Sprintf("1.%d.0", f.rev),
		Revision: f.rev, Status: wire.StatusDeployed, Health: wire.HealthCurrent,
	}}}, nil
}

// startReporter runs a Reporter until the test ends (then waits for its
// shutdown flush).
func startReporter(t *testing.T, opts Options, snap SnapshotFunc) *Reporter {
	t.Helper()
	r, err := New(opts, snap, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start returned %v", err)
			}
		case <-time.After(eventually):
			t.Errorf("Start did not return after its context ended")
		}
	})
	return r
}

func testEvent(i int) wire.Event {
	return wire.Event{
		Namespace: "apps", Release: "web", Revision: 1,
		Kind: wire.EventObjectUpdated, Type: wire.EventTypeNormal, Reason: "Updated",
		Object:   &wire.ObjectRef{Kind: "Pod", Namespace: "apps", Name: fmt.Sprintf("web-%d", i), UID: fmt.Sprintf("uid-%d", i)},
		Message:  fmt.Sprintf("event %d", i),
		Sequence: int64(i),
	}
}

func testEvents(from, to int) []wire.Event {
	out := make([]wire.Event, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, testEvent(i))
	}
	return out
}

// idOf is the id Enqueue gives testEvent(i) on spoke.
func idOf(spoke string, i int) string {
	ev := testEvent(i)
	ev.Spoke = spoke
	return ev.ComputeID()
}

// value reads a counter or gauge.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

func batchesWithCode(spoke, code string) float64 {
	return value(sharedVecs().batches.WithLabelValues(spoke, code))
}

func statePostsWithCode(spoke, code string) float64 {
	return value(sharedVecs().statePosts.WithLabelValues(spoke, code))
}

func TestReporter_deliversSignedEventsAndState(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, "spoke-signed", testKey)
	state := &fakeState{rev: 3}
	r := startReporter(t, testOptions(t, rc, testKey), state.snapshot)

	g.Eventually(rc.stateCount, eventually, poll).Should(BeNumerically(">=", 1))
	r.Enqueue(testEvents(0, 5)...)
	g.Eventually(rc.eventCount, eventually, poll).Should(Equal(5))

	for i := range 5 {
		g.Expect(rc.hasEvent(idOf(rc.spoke, i))).To(BeTrue(), "event %d", i)
	}
	s := rc.statesSince(time.Time{})[0].snap
	g.Expect(s.Spoke).To(Equal(rc.spoke))
	g.Expect(s.AgentVersion).To(Equal("v0.0.0-test"))
	g.Expect(s.TakenAt).NotTo(BeZero())
	g.Expect(s.Releases).To(HaveLen(1))
	g.Expect(s.Releases[0].Revision).To(Equal(3))

	g.Expect(value(r.metrics.eventsQueued)).To(Equal(5.0))
	g.Eventually(func() float64 { return value(r.metrics.eventsSent) }, eventually, poll).Should(Equal(5.0))
	g.Eventually(func() float64 { return value(r.metrics.queueDepth) }, eventually, poll).Should(BeZero())
	g.Expect(value(r.metrics.lastContact)).To(BeNumerically(">", 0))
	g.Expect(rc.countCode(http.StatusUnauthorized)).To(BeZero())
}

func TestReporter_wrongKeyIsRejectedUntilTheKeyFileRotates(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, "spoke-wrong-key", testKey)
	opts := testOptions(t, rc, []byte("another-key-of-sufficient-length"))
	r := startReporter(t, opts, (&fakeState{rev: 1}).snapshot)
	r.Enqueue(testEvents(0, 3)...)

	g.Eventually(func() int { return rc.countCode(http.StatusUnauthorized) }, eventually, poll).Should(BeNumerically(">=", 3))
	g.Expect(rc.eventCount()).To(BeZero())
	g.Expect(rc.stateCount()).To(BeZero())
	// The receiver counts a 401 as it answers; the reporter counts it once
	// it has read the answer: wait for that, with a bound (reading the
	// counters at once failed in CI with 2 of 3 counted).
	g.Eventually(func() float64 { return statePostsWithCode(rc.spoke, "401") + batchesWithCode(rc.spoke, "401") }, eventually, poll).
		Should(BeNumerically(">=", 3))

	// The operator fixes the Secret: the file changes, the next request
	// signs with the new key, everything queued is delivered and the
	// reconnect posts the state.
	writeKey(t, opts.KeyFile, testKey)
	g.Eventually(rc.eventCount, eventually, poll).Should(Equal(3))
	g.Eventually(rc.stateCount, eventually, poll).Should(BeNumerically(">=", 1))
}

func TestReporter_batchesBySize(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, "spoke-batch-size", testKey)
	opts := testOptions(t, rc, testKey)
	opts.BatchMaxWait = time.Hour // only a full batch goes out by itself
	r := startReporter(t, opts, (&fakeState{rev: 1}).snapshot)
	g.Eventually(rc.stateCount, eventually, poll).Should(Equal(1))

	r.Enqueue(testEvents(0, 250)...)
	g.Eventually(rc.eventCount, eventually, poll).Should(Equal(200))
	g.Expect(rc.batchSizes()).To(Equal([]int{100, 100}))

	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	g.Expect(r.Flush(ctx)).To(Succeed())
	g.Expect(rc.eventCount()).To(Equal(250))
	sizes := rc.batchSizes()
	g.Expect(len(sizes)).To(BeNumerically(">=", 3))
	for _, n := range sizes {
		g.Expect(n).To(BeNumerically("<=", 100))
	}
}

func TestReporter_batchesByTime(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, "spoke-batch-time", testKey)
	opts := testOptions(t, rc, testKey)
	opts.BatchMaxWait = 150 * time.Millisecond
	r := startReporter(t, opts, (&fakeState{rev: 1}).snapshot)
	g.Eventually(rc.stateCount, eventually, poll).Should(Equal(1))

	queued := time.Now()
	for i := range 3 {
		r.Enqueue(testEvent(i))
	}
	g.Eventually(rc.eventCount, eventually, poll).Should(Equal(3))
	g.Expect(rc.batchSizes()).To(Equal([]int{3}), "three events queued together wait for each other")
	sent := rc.requestsOf("events")[0].at
	g.Expect(sent.Sub(queued)).To(BeNumerically(">=", opts.BatchMaxWait), "a partial batch waits BatchMaxWait")
}

func TestReporter_deliversEverythingAcrossAHubOutage(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, "spoke-outage", testKey)
	spoke := rc.spoke
	state := &fakeState{rev: 1}
	r := startReporter(t, testOptions(t, rc, testKey), state.snapshot)
	g.Eventually(rc.stateCount, eventually, poll).Should(Equal(1))
	r.Enqueue(testEvents(0, 10)...)
	g.Eventually(rc.eventCount, eventually, poll).Should(Equal(10))

	// The hub goes away; the agent keeps recording.
	rc.stop()
	for i := 10; i < 30; i += 5 {
		r.Enqueue(testEvents(i, i+5)...)
	}
	g.Eventually(func() float64 { return batchesWithCode(spoke, "error") }, eventually, poll).Should(BeNumerically(">=", 2))
	state.set(2) // a release happened during the outage

	back := time.Now()
	rc.restart(t)
	g.Eventually(rc.eventCount, eventually, poll).Should(Equal(30), "every event arrives, exactly once after de-duplication")
	g.Eventually(func() []acceptedState { return rc.statesSince(back) }, eventually, poll).ShouldNot(BeEmpty())
	after := rc.statesSince(back)
	last := after[len(after)-1]
	g.Expect(last.snap.Releases[0].Revision).To(Equal(2), "the resync carries the final state")
	g.Expect(last.at).NotTo(BeTemporally("<", rc.lastEventAt()), "the snapshot follows the events queued before it")
	g.Expect(value(r.metrics.eventsDropped)).To(BeZero())
}

func TestReporter_outboxOverflowDropsOldestAndResyncs(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, "spoke-overflow", testKey)
	spoke := rc.spoke
	rc.setHook(func(string, *wire.EventBatch) (int, http.Header) { return http.StatusServiceUnavailable, nil })
	opts := testOptions(t, rc, testKey)
	opts.OutboxCapacity = 10
	r := startReporter(t, opts, (&fakeState{rev: 4}).snapshot)
	g.Eventually(func() float64 { return statePostsWithCode(spoke, "503") }, eventually, poll).Should(BeNumerically(">=", 1))

	// One call, so no batch is in flight when the oldest are dropped (an
	// in-flight copy could still arrive: harmless, but not this test's
	// point).
	r.Enqueue(testEvents(0, 50)...)
	g.Expect(value(r.metrics.eventsDropped)).To(Equal(40.0))
	g.Expect(value(r.metrics.queueDepth)).To(BeNumerically("<=", 10))
	g.Expect(r.out.resyncNeeded()).To(BeTrue())

	back := time.Now()
	rc.setHook(nil)
	g.Eventually(rc.eventCount, eventually, poll).Should(Equal(10))
	for i := 40; i < 50; i++ {
		g.Expect(rc.hasEvent(idOf(spoke, i))).To(BeTrue(), "newest event %d kept", i)
	}
	g.Expect(rc.hasEvent(idOf(spoke, 0))).To(BeFalse(), "oldest event dropped")
	g.Eventually(func() []acceptedState { return rc.statesSince(back) }, eventually, poll).ShouldNot(BeEmpty())
	g.Expect(rc.statesSince(back)[0].snap.Releases[0].Revision).To(Equal(4))
	g.Eventually(r.out.resyncNeeded, eventually, poll).Should(BeFalse())
}

func TestReporter_honoursRetryAfter(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, "spoke-retry-after", testKey)
	var once sync.Once
	rc.setHook(func(kind string, _ *wire.EventBatch) (code int, h http.Header) {
		if kind == "events" {
			once.Do(func() { code, h = http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}} })
		}
		return code, h
	})
	r := startReporter(t, testOptions(t, rc, testKey), (&fakeState{rev: 1}).snapshot)
	g.Eventually(rc.stateCount, eventually, poll).Should(Equal(1))

	r.Enqueue(testEvent(0))
	g.Eventually(rc.eventCount, eventually, poll).Should(Equal(1))
	reqs := rc.requestsOf("events")
	g.Expect(len(reqs)).To(BeNumerically(">=", 2))
	g.Expect(reqs[0].code).To(Equal(http.StatusTooManyRequests))
	g.Expect(reqs[1].at.Sub(reqs[0].at)).To(BeNumerically(">=", 990*time.Millisecond),
		"the retry waits for Retry-After (the backoff alone would retry within 100ms)")
}

func TestReporter_dropsARejectedBatchAndContinues(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, "spoke-rejected", testKey)
	spoke := rc.spoke
	rc.setHook(func(kind string, b *wire.EventBatch) (int, http.Header) {
		if b != nil && b.Events[0].Reason == "Poison" {
			return http.StatusBadRequest, nil
		}
		return 0, nil
	})
	opts := testOptions(t, rc, testKey)
	opts.BatchMaxEvents = 1
	r := startReporter(t, opts, (&fakeState{rev: 1}).snapshot)
	g.Eventually(rc.stateCount, eventually, poll).Should(Equal(1))

	evs := testEvents(0, 3)
	evs[1].Reason = "Poison"
	r.Enqueue(evs...)
	g.Eventually(rc.eventCount, eventually, poll).Should(Equal(2))
	g.Expect(rc.hasEvent(idOf(spoke, 0))).To(BeTrue())
	g.Expect(rc.hasEvent(idOf(spoke, 2))).To(BeTrue())
	g.Expect(batchesWithCode(spoke, "400")).To(Equal(1.0), "the rejected batch is not retried")
	g.Expect(value(r.metrics.eventsFailed)).To(Equal(1.0))
	g.Eventually(rc.stateCount, eventually, poll).Should(Equal(2), "a rejected batch schedules a state resync")
}

func TestReporter_dropsInvalidEventsAtEnqueue(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, "spoke-invalid", testKey)
	r := startReporter(t, testOptions(t, rc, testKey), (&fakeState{rev: 1}).snapshot)
	g.Eventually(rc.stateCount, eventually, poll).Should(Equal(1))

	bad := testEvent(1)
	bad.Release = "Not A Release"
	r.Enqueue(testEvent(0), bad, testEvent(2))
	g.Expect(value(r.metrics.eventsFailed)).To(Equal(1.0))
	g.Eventually(rc.eventCount, eventually, poll).Should(Equal(2))
	g.Expect(rc.countCode(http.StatusBadRequest)).To(BeZero())
}

func TestReporter_heartbeat(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, "spoke-heartbeat", testKey)
	opts := testOptions(t, rc, testKey)
	opts.StateInterval = 200 * time.Millisecond
	startReporter(t, opts, (&fakeState{rev: 1}).snapshot)
	g.Eventually(rc.stateCount, 5*time.Second, poll).Should(BeNumerically(">=", 3))
}

func TestReporter_flushesOnShutdown(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, "spoke-shutdown", testKey)
	opts := testOptions(t, rc, testKey)
	opts.BatchMaxWait = time.Hour
	r, err := New(opts, (&fakeState{rev: 1}).snapshot, testr.New(t))
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	g.Eventually(rc.stateCount, eventually, poll).Should(Equal(1))

	r.Enqueue(testEvents(0, 7)...)
	cancel()
	g.Eventually(done, eventually).Should(Receive(BeNil()))
	g.Expect(rc.eventCount()).To(Equal(7))
	g.Expect(r.Start(context.Background())).To(HaveOccurred(), "a Reporter runs once")
}

func TestNew_rejectsBadInput(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, "spoke-new", testKey)
	snap := (&fakeState{rev: 1}).snapshot

	opts := testOptions(t, rc, testKey)
	_, err := New(opts, nil, logr.Discard())
	g.Expect(err).To(MatchError(ContainSubstring("snapshot")))

	short := testOptions(t, rc, []byte("short"))
	_, err = New(short, snap, logr.Discard())
	g.Expect(err).To(MatchError(ContainSubstring("at least 32 bytes")))

	noCA := testOptions(t, rc, testKey)
	noCA.CAFile = writeKey(t, "", []byte("not a certificate at all"))
	_, err = New(noCA, snap, logr.Discard())
	g.Expect(err).To(MatchError(ContainSubstring("no PEM certificate")))

	missing := testOptions(t, rc, testKey)
	missing.KeyFile = filepath.Join(t.TempDir(), "absent")
	_, err = New(missing, snap, logr.Discard())
	g.Expect(err).To(HaveOccurred())
}

// TestReporter_requestStatePostsSoonAndCoalesces: with a state interval of
// an hour, RequestState brings a state post at once (at most
// minResyncInterval after the last); a burst of requests brings one post,
// not one each.
func TestReporter_requestStatePostsSoonAndCoalesces(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, "spoke-request-state", testKey)
	state := &fakeState{rev: 1}
	r := startReporter(t, testOptions(t, rc, testKey), state.snapshot)
	g.Eventually(rc.stateCount, eventually, poll).Should(Equal(1), "the post at start")

	state.set(2)
	for range 5 {
		r.RequestState()
	}
	g.Eventually(rc.stateCount, 5*time.Second, poll).Should(Equal(2))
	g.Consistently(rc.stateCount, 3*minResyncInterval, poll).Should(Equal(2), "five requests, one post")
	states := rc.statesSince(time.Time{})
	g.Expect(states[len(states)-1].snap.Releases[0].Revision).To(Equal(2), "the snapshot is taken after the request")

	r.RequestState()
	g.Eventually(rc.stateCount, 5*time.Second, poll).Should(Equal(3))
}

// healthEvent is the tracker's HealthChanged event of revision rev of web
// reaching health h.
func healthEvent(rev int, h wire.Health) wire.Event {
	return wire.Event{
		Namespace: "apps", Release: "web", Revision: rev,
		Kind: wire.EventHealthChanged, Type: wire.EventTypeNormal, Reason: "RolloutComplete",
		Message:  fmt.Sprintf("revision %d is %s", rev, h),
		Sequence: int64(rev)<<2 | 1,
		State: &wire.ReleaseState{
			Namespace: "apps", Release: "web", Chart: "web", ChartVersion: fmt.Sprintf("1.%d.0", rev),
			Revision: rev, Status: wire.StatusDeployed, Health: h,
		},
	}
}

// A health transition that can start or end a promotion does not wait for
// its batch: with a batch window of an hour, it still reaches the hub, with
// the events queued before it.
func TestReporter_sendsAPromotionTriggeringHealthTransitionAtOnce(t *testing.T) {
	for _, h := range []wire.Health{wire.HealthCurrent, wire.HealthFailed} {
		t.Run(string(h), func(t *testing.T) {
			g := NewWithT(t)
			rc := newReceiver(t, "spoke-urgent", testKey)
			opts := testOptions(t, rc, testKey)
			opts.BatchMaxWait = time.Hour
			r := startReporter(t, opts, (&fakeState{rev: 1}).snapshot)
			g.Eventually(rc.stateCount, eventually, poll).Should(Equal(1))

			r.Enqueue(testEvents(0, 3)...)
			ev := healthEvent(2, h)
			r.Enqueue(ev)
			ev.Spoke = rc.spoke
			id := ev.ComputeID()
			g.Eventually(func() bool { return rc.hasEvent(id) }, eventually, poll).Should(BeTrue(), "the health transition reached the hub")
			for i := range 3 {
				g.Expect(rc.hasEvent(idOf(rc.spoke, i))).To(BeTrue(), "event %d, queued before it, went along", i)
			}
			g.Expect(rc.batchSizes()).To(Equal([]int{4}))
		})
	}
}
