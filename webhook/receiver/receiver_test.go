package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/webhook/receiver"
)

func TestReceiver_recordsSignedEventsAndState(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	srv := httptest.NewTLSServer(h.server.Handler())
	defer srv.Close()

	batch := batchOf(event(7, wire.EventReleaseStatus, 1), event(7, wire.EventObjectCreated, 2))
	body := mustJSON(t, batch)
	req := signed(srv.URL+wire.EventsPath(testSpoke), testKey, body, testNow)
	req.RequestURI = ""
	resp, err := srv.Client().Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted), string(raw))
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
	g.Expect(string(raw)).To(MatchJSON(`{"received":2,"accepted":2,"duplicates":0}`))
	g.Expect(h.store.recorded(testSpoke)).To(Equal(batch.Events))

	snap := snapshot()
	req = signed(srv.URL+wire.StatePath(testSpoke), testKey, mustJSON(t, snap), testNow)
	req.RequestURI = ""
	resp2, err := srv.Client().Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp2.Body.Close() }()
	raw, _ = io.ReadAll(resp2.Body)
	g.Expect(resp2.StatusCode).To(Equal(http.StatusAccepted), string(raw))
	g.Expect(string(raw)).To(MatchJSON(`{"received":1,"accepted":1,"duplicates":0}`))
	g.Expect(h.store.snapshotsOf(testSpoke)).To(ConsistOf(Equal(snap)))

	g.Expect(h.metric("tugboat_receiver_requests_total", map[string]string{"endpoint": "events", "code": "202"})).To(Equal(1.0))
	g.Expect(h.metric("tugboat_receiver_events_total", map[string]string{"endpoint": "events", "result": "accepted"})).To(Equal(2.0))
	g.Expect(h.metric("tugboat_receiver_request_duration_seconds", map[string]string{"endpoint": "state"})).To(Equal(1.0))
	g.Expect(h.metric("tugboat_receiver_request_body_bytes", map[string]string{"endpoint": "events"})).To(Equal(1.0))
}

func TestReceiver_acceptsThePreviousKeyDuringRotation(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	h.store.setKeys(testSpoke, testKey, oldKey)

	rec := h.do(signed(wire.EventsPath(testSpoke), oldKey, mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1))), testNow))
	g.Expect(accepted(g, rec).Accepted).To(Equal(1))
	rec = h.do(signed(wire.EventsPath(testSpoke), testKey, mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 2))), testNow))
	g.Expect(accepted(g, rec).Accepted).To(Equal(1))

	// The rotation ends: the old key no longer works.
	h.store.setKeys(testSpoke, testKey, nil)
	rec = h.do(signed(wire.EventsPath(testSpoke), oldKey, mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 3))), testNow))
	g.Expect(rec.Code).To(Equal(http.StatusUnauthorized))
	g.Expect(h.store.recorded(testSpoke)).To(HaveLen(2))
}

func TestReceiver_acceptsGzipBodiesSignedAsSent(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	body := gzipped(t, mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1))))
	req := signed(wire.EventsPath(testSpoke), testKey, body, testNow)
	req.Header.Set("Content-Encoding", "gzip")
	g.Expect(accepted(g, h.do(req)).Accepted).To(Equal(1))

	snapBody := gzipped(t, mustJSON(t, snapshot()))
	req = signed(wire.StatePath(testSpoke), testKey, snapBody, testNow)
	req.Header.Set("Content-Encoding", "gzip")
	g.Expect(accepted(g, h.do(req)).Accepted).To(Equal(1))
}

// badCase is a request the receiver must refuse without recording anything.
type badCase struct {
	name string
	// prime, when set, sends requests that are recorded before the case.
	prime func(t *testing.T, h *harness)
	req   func(t *testing.T) *http.Request
	code  int
	// want are substrings of the response body.
	want []string
	// counts, when set, is the 202 body expected.
	counts *wire.AcceptedResponse
}

func TestReceiver_rejectsBadInput(t *testing.T) {
	validBody := func(t *testing.T) []byte { return mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1))) }
	eventsPath := wire.EventsPath(testSpoke)
	cases := []badCase{
		{
			name: "wrong key",
			req:  func(t *testing.T) *http.Request { return signed(eventsPath, wrongKey, validBody(t), testNow) },
			code: http.StatusUnauthorized, want: []string{`"request not authenticated"`},
		},
		{
			name: "signature for another path",
			req: func(t *testing.T) *http.Request {
				body := validBody(t)
				req := httptest.NewRequest(http.MethodPost, eventsPath, bytes.NewReader(body))
				req.Header.Set(wire.HeaderTimestamp, strconv.FormatInt(testNow.Unix(), 10))
				req.Header.Set(wire.HeaderSignature, wire.Sign(testKey, testNow, http.MethodPost, wire.StatePath(testSpoke), body))
				return req
			},
			code: http.StatusUnauthorized,
		},
		{
			name: "stale timestamp",
			req: func(t *testing.T) *http.Request {
				return signed(eventsPath, testKey, validBody(t), testNow.Add(-wire.DefaultWindow-time.Second))
			},
			code: http.StatusUnauthorized,
		},
		{
			name: "future timestamp",
			req: func(t *testing.T) *http.Request {
				return signed(eventsPath, testKey, validBody(t), testNow.Add(wire.DefaultWindow+time.Second))
			},
			code: http.StatusUnauthorized,
		},
		{
			name: "unknown spoke",
			req: func(t *testing.T) *http.Request {
				b := batchOf(event(7, wire.EventObjectCreated, 1))
				b.Spoke, b.Events[0].Spoke = "nobody", "nobody"
				b.Events[0].ID = b.Events[0].ComputeID()
				return signed(wire.EventsPath("nobody"), testKey, mustJSON(t, b), testNow)
			},
			code: http.StatusUnauthorized,
		},
		{
			name: "spoke name that cannot be one",
			req: func(t *testing.T) *http.Request {
				return signed("/v1/spokes/Staging_1/events", testKey, validBody(t), testNow)
			},
			code: http.StatusUnauthorized,
		},
		{
			name: "missing headers",
			req: func(t *testing.T) *http.Request {
				return httptest.NewRequest(http.MethodPost, eventsPath, bytes.NewReader(validBody(t)))
			},
			code: http.StatusUnauthorized,
		},
		{
			name: "malformed signature header",
			req: func(t *testing.T) *http.Request {
				req := signed(eventsPath, testKey, validBody(t), testNow)
				req.Header.Set(wire.HeaderSignature, "sha256=abc")
				return req
			},
			code: http.StatusUnauthorized,
		},
		{
			name: "malformed JSON",
			req: func(t *testing.T) *http.Request {
				return signed(eventsPath, testKey, []byte(`{"spoke": "staging-1",`), testNow)
			},
			code: http.StatusBadRequest, want: []string{"malformed JSON"},
		},
		{
			name: "unknown field",
			req: func(t *testing.T) *http.Request {
				return signed(eventsPath, testKey, mutateJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)), func(m map[string]any) {
					m["events"].([]any)[0].(map[string]any)["flavor"] = "blue"
				}), testNow)
			},
			code: http.StatusBadRequest, want: []string{`"field":"events[0].flavor"`, "unknown field"},
		},
		{
			name: "invalid enum value",
			req: func(t *testing.T) *http.Request {
				return signed(eventsPath, testKey, mutateJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)), func(m map[string]any) {
					m["events"].([]any)[0].(map[string]any)["type"] = "Critical"
				}), testNow)
			},
			code: http.StatusBadRequest, want: []string{`events[0].type: unsupported value \"Critical\"`},
		},
		{
			name: "missing release",
			req: func(t *testing.T) *http.Request {
				return signed(eventsPath, testKey, mutateJSON(t, batchOf(event(7, wire.EventObjectCreated, 1), event(7, wire.EventObjectCreated, 2)), func(m map[string]any) {
					delete(m["events"].([]any)[1].(map[string]any), "release")
				}), testNow)
			},
			code: http.StatusBadRequest, want: []string{"events[1].release: required"},
		},
		{
			name: "oversized body",
			req: func(t *testing.T) *http.Request {
				body := append(validBody(t), bytes.Repeat([]byte(" "), int(receiver.DefaultBodyLimit))...)
				return signed(eventsPath, testKey, body, testNow)
			},
			code: http.StatusRequestEntityTooLarge, want: []string{"body exceeds 1048576 bytes"},
		},
		{
			name: "oversized body without a length",
			req: func(t *testing.T) *http.Request {
				body := append(validBody(t), bytes.Repeat([]byte(" "), int(receiver.DefaultBodyLimit))...)
				req := signed(eventsPath, testKey, body, testNow)
				req.ContentLength = -1
				req.Body = io.NopCloser(bytes.NewReader(body))
				return req
			},
			code: http.StatusRequestEntityTooLarge, want: []string{"body exceeds 1048576 bytes"},
		},
		{
			name: "gzip bomb",
			req: func(t *testing.T) *http.Request {
				// 9 MiB of spaces after a valid object compress to a few KiB.
				body := gzipped(t, append(validBody(t), bytes.Repeat([]byte(" "), 9<<20)...))
				req := signed(eventsPath, testKey, body, testNow)
				req.Header.Set("Content-Encoding", "gzip")
				return req
			},
			code: http.StatusRequestEntityTooLarge, want: []string{"decompressed body exceeds 8388608 bytes"},
		},
		{
			name: "corrupt gzip",
			req: func(t *testing.T) *http.Request {
				req := signed(eventsPath, testKey, validBody(t), testNow)
				req.Header.Set("Content-Encoding", "gzip")
				return req
			},
			code: http.StatusBadRequest, want: []string{"invalid gzip data"},
		},
		{
			name: "unsupported encoding",
			req: func(t *testing.T) *http.Request {
				req := signed(eventsPath, testKey, validBody(t), testNow)
				req.Header.Set("Content-Encoding", "br")
				return req
			},
			code: http.StatusUnsupportedMediaType, want: []string{`unsupported Content-Encoding \"br\"`},
		},
		{
			name: "duplicate batch",
			prime: func(t *testing.T, h *harness) {
				NewWithT(t).Expect(h.do(signed(eventsPath, testKey, validBody(t), testNow)).Code).To(Equal(http.StatusAccepted))
			},
			req: func(t *testing.T) *http.Request {
				return signed(eventsPath, testKey, validBody(t), testNow.Add(time.Second))
			},
			code:   http.StatusAccepted,
			counts: &wire.AcceptedResponse{Received: 1, Duplicates: 1},
		},
		{
			name: "spoke in body differs from the path",
			prime: func(t *testing.T, h *harness) {
				h.store.setKeys("prod-1", testKey, nil)
			},
			req: func(t *testing.T) *http.Request {
				return signed(wire.EventsPath("prod-1"), testKey, validBody(t), testNow)
			},
			code: http.StatusBadRequest, want: []string{`"field":"spoke"`, `must equal the spoke in the path \"prod-1\"`},
		},
		{
			name: "state for another spoke",
			prime: func(t *testing.T, h *harness) {
				h.store.setKeys("prod-1", testKey, nil)
			},
			req: func(t *testing.T) *http.Request {
				return signed(wire.StatePath("prod-1"), testKey, mustJSON(t, snapshot()), testNow)
			},
			code: http.StatusBadRequest, want: []string{`"field":"spoke"`},
		},
		{
			name: "wrong method",
			req: func(t *testing.T) *http.Request {
				return httptest.NewRequest(http.MethodGet, eventsPath, nil)
			},
			code: http.StatusMethodNotAllowed, want: []string{"method GET not allowed"},
		},
		{
			name: "unknown path",
			req: func(t *testing.T) *http.Request {
				return signed("/v1/spokes/"+testSpoke+"/events/extra", testKey, validBody(t), testNow)
			},
			code: http.StatusNotFound, want: []string{"no such endpoint"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t)
			if tc.prime != nil {
				tc.prime(t, h)
			}
			before := h.store.total()
			rec := h.do(tc.req(t))
			g.Expect(rec.Code).To(Equal(tc.code), rec.Body.String())
			g.Expect(h.store.total()).To(Equal(before), "the store must record nothing")
			g.Expect(rec.Header().Get("Content-Type")).To(Equal("application/json"))
			for _, w := range tc.want {
				g.Expect(rec.Body.String()).To(ContainSubstring(w))
			}
			if tc.counts != nil {
				g.Expect(accepted(g, rec)).To(Equal(*tc.counts))
			}
			if tc.code == http.StatusUnauthorized {
				g.Expect(errorBody(g, rec.Body.Bytes())).To(Equal(wire.ErrorResponse{Error: "request not authenticated"}))
			}
			if tc.code == http.StatusMethodNotAllowed {
				g.Expect(rec.Header().Get("Allow")).To(Equal(http.MethodPost))
			}
		})
	}
}

func TestReceiver_401sLookAlikeWhateverFailed(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	body := mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)))
	unknown := h.do(signed(wire.EventsPath("nobody"), testKey, body, testNow))
	badSig := h.do(signed(wire.EventsPath(testSpoke), wrongKey, body, testNow))
	stale := h.do(signed(wire.EventsPath(testSpoke), testKey, body, testNow.Add(-time.Hour)))
	for _, rec := range []*httptest.ResponseRecorder{unknown, badSig, stale} {
		g.Expect(rec.Code).To(Equal(http.StatusUnauthorized))
		g.Expect(rec.Body.String()).To(Equal(unknown.Body.String()))
	}
	// The reasons are in the metrics only.
	g.Expect(h.metric("tugboat_receiver_rejected_total", map[string]string{"reason": "unknown_spoke"})).To(Equal(1.0))
	g.Expect(h.metric("tugboat_receiver_rejected_total", map[string]string{"reason": "bad_signature"})).To(Equal(1.0))
	g.Expect(h.metric("tugboat_receiver_rejected_total", map[string]string{"reason": "stale_timestamp"})).To(Equal(1.0))
}

func TestReceiver_countsDuplicatesAndRecordsEachEventOnce(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	e1, e2, e3 := event(7, wire.EventObjectCreated, 1), event(7, wire.EventObjectCreated, 2), event(7, wire.EventObjectCreated, 3)

	g.Expect(accepted(g, h.do(signed(wire.EventsPath(testSpoke), testKey, mustJSON(t, batchOf(e1, e2)), testNow)))).
		To(Equal(wire.AcceptedResponse{Received: 2, Accepted: 2}))
	// A redelivery overlapping the first batch, with a repeat inside it.
	g.Expect(accepted(g, h.do(signed(wire.EventsPath(testSpoke), testKey, mustJSON(t, batchOf(e2, e3, e3)), testNow)))).
		To(Equal(wire.AcceptedResponse{Received: 3, Accepted: 1, Duplicates: 2}))
	g.Expect(h.store.recorded(testSpoke)).To(Equal([]wire.Event{e1, e2, e3}))
	g.Expect(h.metric("tugboat_receiver_events_total", map[string]string{"endpoint": "events", "result": "duplicate"})).To(Equal(2.0))
}

// TestReceiver_recordsStaleReleaseStateForTheStoreToOrder checks that news
// about a revision older than the newest one is counted as stale but still
// handed to the store: it is the older revision's own truth (Helm marking it
// superseded), and the store never moves a release's current revision back
// (controllers/releasehistory tests that half).
func TestReceiver_recordsStaleReleaseStateForTheStoreToOrder(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	post := func(events ...wire.Event) wire.AcceptedResponse {
		return accepted(g, h.do(signed(wire.EventsPath(testSpoke), testKey, mustJSON(t, batchOf(events...)), testNow)))
	}
	g.Expect(post(event(8, wire.EventReleaseStatus, 1)).Accepted).To(Equal(1))

	late := event(7, wire.EventReleaseStatus, 2)
	obj := event(7, wire.EventObjectDeleted, 3)
	g.Expect(post(late, obj)).To(Equal(wire.AcceptedResponse{Received: 2, Accepted: 2}))
	// Within one batch, too: 9 then 8.
	nine, eight := event(9, wire.EventReleaseStatus, 4), event(8, wire.EventHealthChanged, 5)
	g.Expect(post(nine, eight)).To(Equal(wire.AcceptedResponse{Received: 2, Accepted: 2}))

	recorded := h.store.recorded(testSpoke)
	g.Expect(recorded).To(HaveLen(5))
	g.Expect(recorded[1]).To(Equal(late))
	g.Expect(recorded[3]).To(Equal(nine))
	g.Expect(h.metric("tugboat_receiver_events_total", map[string]string{"endpoint": "events", "result": "stale"})).To(Equal(2.0))

	// Recorded once: a redelivery is a duplicate.
	g.Expect(post(late)).To(Equal(wire.AcceptedResponse{Received: 1, Duplicates: 1}))
}

func TestReceiver_startsOverAfterUninstallOrReinstall(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	post := func(events ...wire.Event) wire.AcceptedResponse {
		return accepted(g, h.do(signed(wire.EventsPath(testSpoke), testKey, mustJSON(t, batchOf(events...)), testNow)))
	}
	gone := event(5, wire.EventReleaseStatus, 1)
	gone.State.Status = wire.StatusUninstalled
	gone.ID = gone.ComputeID()
	g.Expect(post(gone).Accepted).To(Equal(1))
	// Helm starts again at revision 1.
	g.Expect(post(event(1, wire.EventReleaseStatus, 2)).Accepted).To(Equal(1))

	// A fresh install the hub did not see the uninstall of.
	g.Expect(post(event(4, wire.EventReleaseStatus, 3)).Accepted).To(Equal(1))
	started := event(1, wire.EventReleaseStarted, 4)
	started.State.Status = wire.StatusPendingInstall
	started.ID = started.ComputeID()
	g.Expect(post(started).Accepted).To(Equal(1))
	g.Expect(post(event(1, wire.EventReleaseStatus, 5)).Accepted).To(Equal(1))
}

func TestReceiver_snapshotTakenLaterResetsTheNewestRevision(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	g.Expect(accepted(g, h.do(signed(wire.EventsPath(testSpoke), testKey, mustJSON(t, batchOf(event(9, wire.EventReleaseStatus, 1))), testNow))).Accepted).To(Equal(1))
	snap := snapshot() // revision 7, taken after the event
	snap.TakenAt = testNow.Add(time.Minute)
	g.Expect(accepted(g, h.do(signed(wire.StatePath(testSpoke), testKey, mustJSON(t, snap), testNow))).Accepted).To(Equal(1))
	next := event(8, wire.EventReleaseStatus, 2)
	next.Time = testNow.Add(2 * time.Minute)
	next.ID = next.ComputeID()
	g.Expect(accepted(g, h.do(signed(wire.EventsPath(testSpoke), testKey, mustJSON(t, batchOf(next)), testNow))).Accepted).To(Equal(1))
}

func TestReceiver_rateLimitsEachSpoke(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, func(o *receiver.Options) { o.RateLimit, o.RateBurst = 0.5, 2 })
	h.store.setKeys("prod-1", testKey, nil)
	for i := range 2 {
		rec := h.do(signed(wire.StatePath(testSpoke), testKey, mustJSON(t, snapshotAt(time.Duration(i)*time.Second)), testNow))
		g.Expect(rec.Code).To(Equal(http.StatusAccepted), "request %d", i)
	}
	rec := h.do(signed(wire.StatePath(testSpoke), testKey, mustJSON(t, snapshotAt(time.Minute)), testNow))
	g.Expect(rec.Code).To(Equal(http.StatusTooManyRequests))
	g.Expect(rec.Header().Get("Retry-After")).To(Equal("2"))
	g.Expect(errorBody(g, rec.Body.Bytes()).Error).To(ContainSubstring("rate limit"))
	g.Expect(h.store.snapshotsOf(testSpoke)).To(HaveLen(2))

	// Another spoke has its own bucket.
	other := snapshot()
	other.Spoke = "prod-1"
	g.Expect(h.do(signed(wire.StatePath("prod-1"), testKey, mustJSON(t, other), testNow)).Code).To(Equal(http.StatusAccepted))
	// Unauthenticated requests do not drain a spoke's bucket.
	h2 := newHarness(t, func(o *receiver.Options) { o.RateLimit, o.RateBurst = 0.5, 1 })
	for range 5 {
		g.Expect(h2.do(signed(wire.StatePath(testSpoke), wrongKey, mustJSON(t, snapshot()), testNow)).Code).To(Equal(http.StatusUnauthorized))
	}
	g.Expect(h2.do(signed(wire.StatePath(testSpoke), testKey, mustJSON(t, snapshot()), testNow)).Code).To(Equal(http.StatusAccepted))
}

func TestReceiver_answers503WhileTheStoreIsNotReady(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	body := mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)))

	h.store.fail(ingest.ErrNotReady, nil)
	rec := h.do(signed(wire.EventsPath(testSpoke), testKey, body, testNow))
	g.Expect(rec.Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(rec.Header().Get("Retry-After")).To(Equal("5"))

	h.store.fail(nil, ingest.ErrNotReady)
	rec = h.do(signed(wire.EventsPath(testSpoke), testKey, body, testNow))
	g.Expect(rec.Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(rec.Header().Get("Retry-After")).NotTo(BeEmpty())
	g.Expect(h.do(signed(wire.StatePath(testSpoke), testKey, mustJSON(t, snapshot()), testNow)).Code).To(Equal(http.StatusServiceUnavailable))

	h.store.fail(nil, errors.New("etcd is on fire"))
	g.Expect(h.do(signed(wire.EventsPath(testSpoke), testKey, body, testNow)).Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(h.store.total()).To(BeZero())

	// The retry is recorded, not taken for a duplicate.
	h.store.fail(nil, nil)
	g.Expect(accepted(g, h.do(signed(wire.EventsPath(testSpoke), testKey, body, testNow)))).
		To(Equal(wire.AcceptedResponse{Received: 1, Accepted: 1}))
}

func TestReceiver_healthAndReadiness(t *testing.T) {
	g := NewWithT(t)
	notReady := errors.New("caches not synced")
	h := newHarness(t, func(o *receiver.Options) {
		o.ReadyCheck = func(*http.Request) error { return notReady }
	})
	g.Expect(h.do(httptest.NewRequest(http.MethodGet, "/healthz", nil)).Code).To(Equal(http.StatusOK))
	g.Expect(h.do(httptest.NewRequest(http.MethodGet, "/readyz", nil)).Code).To(Equal(http.StatusServiceUnavailable))
	notReady = nil
	g.Expect(h.do(httptest.NewRequest(http.MethodGet, "/readyz", nil)).Code).To(Equal(http.StatusOK))
	g.Expect(h.do(httptest.NewRequest(http.MethodPost, "/healthz", nil)).Code).To(Equal(http.StatusMethodNotAllowed))
}

func TestReceiver_neverLogsKeysSignaturesOrBodies(t *testing.T) {
	g := NewWithT(t)
	var logs strings.Builder
	h := newHarness(t, func(o *receiver.Options) { o.Logger = funcLogger(&logs) })
	body := mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)))
	h.do(signed(wire.EventsPath(testSpoke), wrongKey, body, testNow))
	h.do(signed(wire.EventsPath(testSpoke), testKey, []byte(`{"spoke":"staging-1","secret":"s3cr3t-body"}`), testNow))
	h.store.fail(nil, errors.New("boom"))
	h.do(signed(wire.EventsPath(testSpoke), testKey, body, testNow))
	g.Expect(logs.String()).To(ContainSubstring("bad_signature"))
	sig := wire.Sign(testKey, testNow, http.MethodPost, wire.EventsPath(testSpoke), body)
	for _, secret := range []string{string(testKey), string(wrongKey), strings.TrimPrefix(sig, "v1="), "s3cr3t-body", "something happened"} {
		g.Expect(logs.String()).NotTo(ContainSubstring(secret))
	}
}

func TestServer_startServesTLSAndStopsGracefully(t *testing.T) {
	g := NewWithT(t)
	certFile, keyFile := writeSelfSignedCert(t)
	h := newHarness(t, func(o *receiver.Options) {
		o.BindAddress = "127.0.0.1:0"
		o.TLSCertFile, o.TLSKeyFile = certFile, keyFile
	})
	g.Expect(h.server.NeedLeaderElection()).To(BeFalse())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.server.Start(ctx) }()
	g.Eventually(h.server.Addr).WithTimeout(5 * time.Second).ShouldNot(BeNil())

	client := insecureClient()
	url := fmt.Sprintf("https://%s/healthz", h.server.Addr())
	g.Eventually(func() (int, error) {
		resp, err := client.Get(url)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}).WithTimeout(5 * time.Second).Should(Equal(http.StatusOK))

	body := mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)))
	req := signed(fmt.Sprintf("https://%s%s", h.server.Addr(), wire.EventsPath(testSpoke)), testKey, body, testNow)
	req.RequestURI = ""
	resp, err := client.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))

	cancel()
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
}

func TestServer_startFailsWhenItCannotListen(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, func(o *receiver.Options) { o.BindAddress = "256.0.0.1:1" })
	g.Expect(h.server.Start(context.Background())).To(MatchError(ContainSubstring("listening on 256.0.0.1:1")))
}

func TestOptions_validate(t *testing.T) {
	g := NewWithT(t)
	o := receiver.NewOptions()
	g.Expect(o.Validate()).To(Succeed())
	o.TLSCertFile = "tls.crt"
	o.BodyLimit = 0
	o.RateLimit = -1
	o.ReplayWindow = 0
	err := o.Validate()
	g.Expect(err).To(MatchError(ContainSubstring("set both the certificate and the key file")))
	g.Expect(err).To(MatchError(ContainSubstring("body limit: must be positive")))
	g.Expect(err).To(MatchError(ContainSubstring("rate limit: must be positive")))
	g.Expect(err).To(MatchError(ContainSubstring("replay window")))
	_, err = receiver.New(newMemStore(), o)
	g.Expect(err).To(HaveOccurred())
	_, err = receiver.New(nil, receiver.NewOptions())
	g.Expect(err).To(MatchError(ContainSubstring("a store is required")))
}

func TestNew_sharesMetricsBetweenServersOfOneRegistry(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	opts := receiver.NewOptions()
	opts.Registerer = reg
	opts.Clock = func() time.Time { return testNow }
	store := newMemStore()
	store.setKeys(testSpoke, testKey, nil)
	first, err := receiver.New(store, opts)
	g.Expect(err).NotTo(HaveOccurred())
	second, err := receiver.New(store, opts)
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range []*receiver.Server{first, second} {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		g.Expect(rec.Code).To(Equal(http.StatusOK))
	}
	h := &harness{t: t, reg: reg}
	g.Expect(h.metric("tugboat_receiver_requests_total", map[string]string{"endpoint": "healthz", "code": "200"})).To(Equal(2.0))
}

func TestOptions_bindFlags(t *testing.T) {
	g := NewWithT(t)
	o := receiver.NewOptions()
	fs := newFlagSet()
	o.BindFlags(fs)
	g.Expect(fs.Parse([]string{
		"--receiver-bind-address=:8443", "--receiver-body-limit=2048", "--receiver-rate-limit=5",
		"--receiver-rate-burst=7", "--receiver-replay-window=1m", "--receiver-dedupe-cache-size=10",
	})).To(Succeed())
	g.Expect(o.BindAddress).To(Equal(":8443"))
	g.Expect(o.BodyLimit).To(BeEquivalentTo(2048))
	g.Expect(o.RateLimit).To(Equal(5.0))
	g.Expect(o.RateBurst).To(Equal(7))
	g.Expect(o.ReplayWindow).To(Equal(time.Minute))
	g.Expect(o.DedupeCacheSize).To(Equal(10))
	g.Expect(o.Validate()).To(Succeed())
}

func TestReceiver_recordsEachEventOnceUnderConcurrentRedelivery(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	events := make([]wire.Event, 50)
	for i := range events {
		events[i] = event(7, wire.EventObjectCreated, int64(i))
	}
	body := mustJSON(t, batchOf(events...))
	results := make(chan wire.AcceptedResponse, 8)
	for range 8 {
		go func() {
			rec := h.do(signed(wire.EventsPath(testSpoke), testKey, body, testNow))
			var resp wire.AcceptedResponse
			_ = json.Unmarshal(rec.Body.Bytes(), &resp)
			results <- resp
		}()
	}
	total := 0
	for range 8 {
		r := <-results
		g.Expect(r.Received).To(Equal(50))
		g.Expect(r.Accepted + r.Duplicates).To(Equal(50))
		total += r.Accepted
	}
	g.Expect(total).To(Equal(50))
	g.Expect(h.store.recorded(testSpoke)).To(HaveLen(50))
}
