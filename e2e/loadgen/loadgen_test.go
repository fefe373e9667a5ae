package loadgen_test

import (
	"context"
	"fmt"
	"maps"
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

// countingStore is an ingest.Store that keeps counts and the latest state
// of each release, so the test can check what the generator sent.
type countingStore struct {
	keys map[string][]byte

	mu        sync.Mutex
	events    int
	snapshots int
	kinds     map[wire.EventKind]int
	revision  map[string]int // spoke/namespace/release → newest revision in a state
}

func (s *countingStore) SpokeKeys(_ context.Context, spoke string) (ingest.SpokeKeys, error) {
	k, ok := s.keys[spoke]
	if !ok {
		return ingest.SpokeKeys{}, ingest.ErrUnknownSpoke
	}
	return ingest.SpokeKeys{Current: k}, nil
}

func (s *countingStore) RecordEvents(_ context.Context, sp ingest.Spoke, events []wire.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events += len(events)
	for _, e := range events {
		s.kinds[e.Kind]++
		if e.State != nil {
			k := sp.Name + "/" + e.Namespace + "/" + e.Release
			s.revision[k] = max(s.revision[k], e.State.Revision)
		}
	}
	return nil
}

func (s *countingStore) RecordState(_ context.Context, _ ingest.Spoke, _ *wire.StateSnapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshots++
	return nil
}

func fleetOf(n int) ([]loadgen.Spoke, map[string][]byte) {
	spokes := make([]loadgen.Spoke, n)
	keys := map[string][]byte{}
	for i := range spokes {
		name := loadgen.SpokeName("lg", i)
		spokes[i] = loadgen.Spoke{Name: name, Key: []byte(fmt.Sprintf("key-of-%s-0123456789abcdef0123456789", name))}
		keys[name] = spokes[i].Key
	}
	return spokes, keys
}

// receiverFor serves a real receiver, with its default limits, over
// loopback HTTP.
func receiverFor(t *testing.T, store ingest.Store) *httptest.Server {
	t.Helper()
	opts := receiver.NewOptions()
	opts.Registerer = prometheus.NewRegistry()
	opts.Logger = logr.Discard()
	srv, err := receiver.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs
}

func TestGenerator_sendsTrafficTheReceiverAccepts(t *testing.T) {
	g := NewWithT(t)
	spokes, keys := fleetOf(5)
	store := &countingStore{keys: keys, kinds: map[wire.EventKind]int{}, revision: map[string]int{}}
	hs := receiverFor(t, store)

	var samplesMu sync.Mutex
	var samples []loadgen.Sample
	gen, err := loadgen.New(loadgen.Options{
		URL: hs.URL, Spokes: spokes, Releases: 4, Duration: 2 * time.Second, MaxRequests: 400,
		Interval: 10 * time.Millisecond, StateInterval: 500 * time.Millisecond, SampleEvery: 3,
		OnSample: func(s loadgen.Sample) {
			samplesMu.Lock()
			defer samplesMu.Unlock()
			samples = append(samples, s)
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer gen.Close()

	ann, err := gen.Announce(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ann.Snapshots).To(Equal(5))
	g.Expect(ann.SnapshotReleases).To(Equal(20))
	g.Expect(store.snapshots).To(Equal(5))

	start := time.Now()
	res, err := gen.Run(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	t.Log(res)
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
	g.Expect(res.Requests).To(BeNumerically("<=", 400), "bounded by MaxRequests")
	g.Expect(res.Requests).To(BeNumerically(">", 100))
	g.Expect(res.Errors()).To(BeEmpty(), "every generated request is valid and signed")
	g.Expect(res.Codes[202]).To(Equal(res.Requests))
	g.Expect(res.Duplicates).To(BeZero())
	g.Expect(res.EventsAccepted).To(Equal(res.EventsSent))
	g.Expect(res.Snapshots).To(BeNumerically(">=", 5), "periodic snapshots")
	g.Expect(res.AcceptedEventsPerSecond()).To(BeNumerically(">", 0))
	g.Expect(res.Latency(0.99)).To(BeNumerically(">=", res.Latency(0.5)))

	store.mu.Lock()
	defer store.mu.Unlock()
	g.Expect(store.events).To(Equal(res.EventsAccepted))
	g.Expect(store.snapshots).To(Equal(5 + res.Snapshots))
	for _, k := range []wire.EventKind{wire.EventReleaseStarted, wire.EventReleaseStatus, wire.EventHealthChanged,
		wire.EventObjectCreated, wire.EventObjectUpdated, wire.EventObjectDeleted, wire.EventKubernetes} {
		g.Expect(store.kinds[k]).To(BeNumerically(">", 0), "events of kind %s", k)
	}
	g.Expect(store.revision).To(HaveLen(20), "every release rolled out")
	for k, rev := range store.revision {
		g.Expect(rev).To(BeNumerically(">=", 2), k)
	}

	samplesMu.Lock()
	defer samplesMu.Unlock()
	g.Expect(samples).NotTo(BeEmpty())
	for _, s := range samples {
		g.Expect(s.EventID).To(HaveLen(wire.EventIDLength))
		g.Expect(s.History).To(MatchRegexp(`^lg-\d{3}\.team-\d\.svc-\d{2}$`))
	}
}

func TestGenerator_stopsAtItsDeadline(t *testing.T) {
	g := NewWithT(t)
	spokes, keys := fleetOf(2)
	hs := receiverFor(t, &countingStore{keys: keys, kinds: map[wire.EventKind]int{}, revision: map[string]int{}})
	gen, err := loadgen.New(loadgen.Options{URL: hs.URL, Spokes: spokes, Releases: 2, Duration: 500 * time.Millisecond, MaxRequests: 1 << 30})
	g.Expect(err).NotTo(HaveOccurred())
	defer gen.Close()
	res, err := gen.Run(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Elapsed).To(BeNumerically("<", 2*time.Second))
	// 2 spokes at one request per 50 ms for 0.5 s.
	g.Expect(res.Requests).To(BeNumerically("<=", 2*11))
}

func TestOptions_refuseAnythingButLoopback(t *testing.T) {
	g := NewWithT(t)
	spokes, _ := fleetOf(1)
	for _, u := range []string{"http://10.0.0.1:9443", "https://hub.example.com", "http://0.0.0.0:80", "ftp://127.0.0.1", "127.0.0.1:9443"} {
		_, err := loadgen.New(loadgen.Options{URL: u, Spokes: spokes, Releases: 1, Duration: time.Second, MaxRequests: 1})
		g.Expect(err).To(MatchError(ContainSubstring("loadgen: URL")), u)
	}
	for _, u := range []string{"http://127.0.0.1:9443", "http://[::1]:9443", "http://localhost:1"} {
		_, err := loadgen.New(loadgen.Options{URL: u, Spokes: spokes, Releases: 1, Duration: time.Second, MaxRequests: 1})
		g.Expect(err).NotTo(HaveOccurred(), u)
	}
	_, err := loadgen.New(loadgen.Options{URL: "http://127.0.0.1:1", Spokes: spokes, Releases: 1})
	g.Expect(err).To(MatchError(And(ContainSubstring("duration"), ContainSubstring("max requests"))))
	_, err = loadgen.New(loadgen.Options{URL: "http://127.0.0.1:1", Spokes: append(spokes, spokes[0]), Releases: 1, Duration: time.Second, MaxRequests: 1})
	g.Expect(err).To(MatchError(ContainSubstring(`spoke "lg-000" is listed twice`)))
}

// TestGenerator_fleetPacing: with a change interval the generator sends
// what a fleet of agents sends (rollouts of three batches, one release at
// a time, and periodic snapshots), far less than as fast as Interval
// allows.
func TestGenerator_fleetPacing(t *testing.T) {
	g := NewWithT(t)
	spokes, keys := fleetOf(4)
	store := &countingStore{keys: keys, kinds: map[wire.EventKind]int{}, revision: map[string]int{}}
	hs := receiverFor(t, store)
	const (
		duration = 3 * time.Second
		change   = 400 * time.Millisecond
		step     = 50 * time.Millisecond
		state    = 500 * time.Millisecond
	)
	gen, err := loadgen.New(loadgen.Options{
		URL: hs.URL, Spokes: spokes, Releases: 3, Duration: duration, MaxRequests: 10_000,
		ChangeInterval: change, StepInterval: step, StateInterval: state, AnnounceParallel: 2,
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer gen.Close()
	ann, err := gen.Announce(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ann.Snapshots).To(Equal(4))

	res, err := gen.Run(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	t.Log(res)
	g.Expect(res.Errors()).To(BeEmpty())
	// Per spoke: a snapshot every 0.45–0.55 s → 5 to 7 in 3 s.
	g.Expect(res.Snapshots).To(BeNumerically(">=", 4*4))
	g.Expect(res.Snapshots).To(BeNumerically("<=", 4*7))
	// Per spoke: a rollout (3 batches over 0.1 s) then 0.2–0.6 s of rest:
	// at most 3 s / 0.3 s = 10 rollouts, at least 3 s / 0.7 s - 1 = 3.
	g.Expect(res.EventBatches).To(BeNumerically(">=", 4*3*2))
	g.Expect(res.EventBatches).To(BeNumerically("<=", 4*3*11))
	// As fast as Interval allows, 4 spokes would send 240 requests.
	g.Expect(res.Requests).To(BeNumerically("<", 200))
	g.Expect(res.StateLatency(0.99)).To(BeNumerically(">", 0))

	store.mu.Lock()
	defer store.mu.Unlock()
	g.Expect(store.snapshots).To(Equal(4 + res.Snapshots))
	g.Expect(store.events).To(Equal(res.EventsAccepted))
	rolledOut := 0
	for _, rev := range store.revision {
		if rev >= 2 {
			rolledOut++
		}
	}
	// Changes go round the releases of each spoke: all 12 changed.
	g.Expect(rolledOut).To(Equal(12))
}

func TestOptions_refuseNegativeFleetPacing(t *testing.T) {
	g := NewWithT(t)
	spokes, _ := fleetOf(1)
	_, err := loadgen.New(loadgen.Options{URL: "http://127.0.0.1:1", Spokes: spokes, Releases: 1, Duration: time.Second, MaxRequests: 1,
		ChangeInterval: -time.Second, AnnounceParallel: -1})
	g.Expect(err).To(MatchError(And(ContainSubstring("change and step intervals must not be negative"), ContainSubstring("announce parallelism"))))
}

// A fleet that grows between runs (BenchmarkHub_fleet's sizes, in order)
// keeps the spokes it had: their next events are new to the receiver, not
// duplicates of the first run's, and their releases roll on from where
// they were.
func TestGenerator_growsTheFleetWithoutStartingItOver(t *testing.T) {
	g := NewWithT(t)
	spokes, keys := fleetOf(4)
	store := &countingStore{keys: keys, kinds: map[wire.EventKind]int{}, revision: map[string]int{}}
	hs := receiverFor(t, store)
	gen, err := loadgen.New(loadgen.Options{
		URL: hs.URL, Spokes: spokes[:2], Releases: 2, Duration: time.Second, MaxRequests: 10_000,
		ChangeInterval: 100 * time.Millisecond, StepInterval: 10 * time.Millisecond, StateInterval: 300 * time.Millisecond,
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer gen.Close()
	ann, err := gen.Announce(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ann.Snapshots).To(Equal(2))
	first, err := gen.Run(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.EventsAccepted).To(BeNumerically(">", 0))
	store.mu.Lock()
	before := maps.Clone(store.revision)
	store.mu.Unlock()
	g.Expect(before).To(HaveLen(4), "both releases of both spokes rolled out")

	gen.Grow(spokes) // the first two again, and two new ones
	ann, err = gen.Announce(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ann.Snapshots).To(Equal(4), "every spoke announces, old and new")
	second, err := gen.RunFor(context.Background(), time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	t.Log(second)
	g.Expect(second.Errors()).To(BeEmpty())
	g.Expect(second.Duplicates).To(BeZero(), "the first spokes' events are new")
	g.Expect(second.EventsAccepted).To(Equal(second.EventsSent))

	store.mu.Lock()
	defer store.mu.Unlock()
	g.Expect(store.revision).To(HaveLen(8))
	for k, rev := range before {
		g.Expect(store.revision[k]).To(BeNumerically(">", rev), "%s rolls on from revision %d", k, rev)
	}
	_, err = gen.RunFor(context.Background(), 0)
	g.Expect(err).To(MatchError(ContainSubstring("duration must be positive")))
}
