package receiver_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/webhook/receiver"
)

// blockFirstWrite makes the store's first RecordEvents call wait until
// release is closed and then return result; later calls record normally.
// entered is closed once the first call is inside the store.
func blockFirstWrite(h *harness, result error) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	h.store.hookRecord(func([]wire.Event) error {
		if calls.Add(1) != 1 {
			return nil
		}
		close(entered)
		<-release
		return result
	})
	return entered, release
}

// postAsync serves a signed event batch in the background.
func postAsync(h *harness, body []byte) <-chan *httptest.ResponseRecorder {
	out := make(chan *httptest.ResponseRecorder, 1)
	go func() { out <- h.do(signed(wire.EventsPath(testSpoke), testKey, body, testNow)) }()
	return out
}

// TestReceiver_inFlightDuplicateWaitsForTheFailedWrite is issue 13 bug 1:
// delivery A and redelivery B of one batch arrive together; B must not be
// answered "duplicate" while A is still being written, since A's write then
// fails (503) and the agent, told B was delivered, would drop the events.
func TestReceiver_inFlightDuplicateWaitsForTheFailedWrite(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	events := []wire.Event{event(7, wire.EventObjectCreated, 1), event(7, wire.EventObjectCreated, 2), event(7, wire.EventReleaseStatus, 3)}
	body := mustJSON(t, batchOf(events...))
	entered, release := blockFirstWrite(h, errors.New("etcdserver: request timed out"))

	respA := postAsync(h, body)
	g.Eventually(entered).WithTimeout(5 * time.Second).Should(BeClosed())
	respB := postAsync(h, body)

	// B either answered already (the bug) or waits for A's write.
	var recB *httptest.ResponseRecorder
	g.Eventually(func() bool {
		select {
		case recB = <-respB:
			return true
		default:
			return h.metric("tugboat_receiver_events_total", map[string]string{"endpoint": "events", "result": "waited"}) == 3
		}
	}).WithTimeout(5 * time.Second).Should(BeTrue())
	close(release)

	var recA *httptest.ResponseRecorder
	g.Eventually(respA).WithTimeout(5 * time.Second).Should(Receive(&recA))
	g.Expect(recA.Code).To(Equal(http.StatusServiceUnavailable), recA.Body.String())
	if recB == nil {
		g.Eventually(respB).WithTimeout(5 * time.Second).Should(Receive(&recB))
	}
	// B took over the events A failed to write: every event is recorded,
	// and B says so.
	g.Expect(accepted(g, recB)).To(Equal(wire.AcceptedResponse{Received: 3, Accepted: 3}))
	g.Expect(h.store.recorded(testSpoke)).To(HaveLen(3))
	// The agent's retry of A is now a duplicate.
	g.Expect(accepted(g, h.do(signed(wire.EventsPath(testSpoke), testKey, body, testNow)))).
		To(Equal(wire.AcceptedResponse{Received: 3, Duplicates: 3}))
}

// TestReceiver_inFlightDuplicateIsADuplicateOnceTheWriteCommits: when A's
// write succeeds, the waiting B is answered with duplicates, and each event
// is recorded once.
func TestReceiver_inFlightDuplicateIsADuplicateOnceTheWriteCommits(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	fresh := event(7, wire.EventObjectCreated, 9)
	body := mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1), event(7, wire.EventObjectCreated, 2)))
	entered, release := blockFirstWrite(h, nil)

	respA := postAsync(h, body)
	g.Eventually(entered).WithTimeout(5 * time.Second).Should(BeClosed())
	// B overlaps A and carries one event of its own, written at once.
	respB := postAsync(h, mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 2), fresh)))
	g.Eventually(func() float64 {
		return h.metric("tugboat_receiver_events_total", map[string]string{"endpoint": "events", "result": "waited"})
	}).WithTimeout(5 * time.Second).Should(Equal(1.0))
	g.Expect(h.store.recorded(testSpoke)).To(Equal([]wire.Event{fresh}))
	close(release)

	var recA, recB *httptest.ResponseRecorder
	g.Eventually(respA).WithTimeout(5 * time.Second).Should(Receive(&recA))
	g.Eventually(respB).WithTimeout(5 * time.Second).Should(Receive(&recB))
	g.Expect(accepted(g, recA)).To(Equal(wire.AcceptedResponse{Received: 2, Accepted: 2}))
	g.Expect(accepted(g, recB)).To(Equal(wire.AcceptedResponse{Received: 2, Accepted: 1, Duplicates: 1}))
	g.Expect(h.store.recorded(testSpoke)).To(HaveLen(3))
}

// TestReceiver_inFlightDuplicateIsToldToRetryWhenTheWriteTakesTooLong: a
// redelivery does not wait forever for another request's write: past
// Options.InFlightWait it gets 503 with Retry-After, never a 202.
func TestReceiver_inFlightDuplicateIsToldToRetryWhenTheWriteTakesTooLong(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, func(o *receiver.Options) { o.InFlightWait = 50 * time.Millisecond })
	body := mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)))
	entered, release := blockFirstWrite(h, nil)
	defer close(release)

	_ = postAsync(h, body)
	g.Eventually(entered).WithTimeout(5 * time.Second).Should(BeClosed())
	var recB *httptest.ResponseRecorder
	g.Eventually(postAsync(h, body)).WithTimeout(5 * time.Second).Should(Receive(&recB))
	g.Expect(recB.Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(recB.Header().Get("Retry-After")).NotTo(BeEmpty())
	g.Expect(errorBody(g, recB.Body.Bytes()).Error).To(ContainSubstring("being recorded by another request"))
}

// TestReceiver_dedupeWindowEvictsTheOldestIDs proves the de-duplication
// window is bounded: past Options.DedupeCacheSize ids the oldest are
// forgotten (a redelivery that late is recorded again, which the store
// tolerates by id), while the newest are still recognized.
func TestReceiver_dedupeWindowEvictsTheOldestIDs(t *testing.T) {
	g := NewWithT(t)
	const size = 4
	h := newHarness(t, func(o *receiver.Options) { o.DedupeCacheSize = size })
	post := func(events ...wire.Event) wire.AcceptedResponse {
		return accepted(g, h.do(signed(wire.EventsPath(testSpoke), testKey, mustJSON(t, batchOf(events...)), testNow)))
	}
	events := make([]wire.Event, size+2)
	for i := range events {
		events[i] = event(7, wire.EventObjectCreated, int64(i))
		g.Expect(post(events[i]).Accepted).To(Equal(1))
	}
	// The newest size ids are remembered...
	for _, e := range events[2:] {
		g.Expect(post(e)).To(Equal(wire.AcceptedResponse{Received: 1, Duplicates: 1}))
	}
	// ...and the two oldest were evicted: they are accepted again.
	g.Expect(post(events[0], events[1])).To(Equal(wire.AcceptedResponse{Received: 2, Accepted: 2}))
	// Re-admitting them evicted the next oldest in turn.
	g.Expect(post(events[2])).To(Equal(wire.AcceptedResponse{Received: 1, Accepted: 1}))
	g.Expect(h.store.recorded(testSpoke)).To(HaveLen(size + 2 + 3))
}
