package receiver_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/webhook/receiver"
)

// BenchmarkReceiver_events measures in-process throughput of the events
// endpoint: signature check, strict decoding and validation, de-duplication
// and ordering, with batches of 100 events that are all new.
func BenchmarkReceiver_events(b *testing.B) {
	const perBatch, batches = 100, 64
	h := newHarness(b, func(o *receiver.Options) {
		o.RateLimit, o.RateBurst = 1e9, 1e9
		o.DedupeCacheSize = perBatch * batches / 2 // every event has left the cache when it comes again
	})
	path := wire.EventsPath(testSpoke)
	bodies := make([][]byte, batches)
	for i := range bodies {
		events := make([]wire.Event, perBatch)
		for j := range events {
			seq := int64(i*perBatch + j)
			kind := wire.EventObjectCreated
			if j%10 == 0 {
				kind = wire.EventReleaseStatus
			}
			events[j] = event(7, kind, seq)
		}
		bodies[i] = mustJSON(b, batchOf(events...))
	}
	sigs := make([]string, batches)
	for i, body := range bodies {
		sigs[i] = wire.Sign(testKey, testNow, http.MethodPost, path, body)
	}
	ts := testNow.Unix()
	tsHeader := []string{itoa(int(ts))}
	handler := h.server.Handler()

	b.ReportAllocs()
	b.ResetTimer()
	events := 0
	for i := 0; b.Loop(); i++ {
		n := i % batches
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(bodies[n]))
		req.Header[wire.HeaderTimestamp] = tsHeader
		req.Header[wire.HeaderSignature] = []string{sigs[n]}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
		events += perBatch
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(len(bodies[0])), "bytes/batch")
}
