package reporter

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"tugboat.dev/tugboat/api/wire"
)

// BenchmarkReporter_enqueue measures Enqueue: defaulting, id, validation
// and the outbox push (the outbox overflows past its capacity, which is
// part of the cost under load).
func BenchmarkReporter_enqueue(b *testing.B) {
	opts := NewOptions()
	opts.HubURL = "https://127.0.0.1:1"
	opts.Spoke = "spoke-bench-enqueue"
	opts.KeyFile = writeKey(b, "", testKey)
	r, err := New(opts, (&fakeState{rev: 1}).snapshot, logr.Discard())
	if err != nil {
		b.Fatal(err)
	}
	evs := make([]wire.Event, 1024)
	for i := range evs {
		evs[i] = testEvent(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r.Enqueue(evs[i%len(evs)])
	}
}

// BenchmarkReporter_deliver measures end-to-end throughput: Enqueue, batch,
// sign, TLS POST, verify, decode and de-duplicate in the test receiver.
func BenchmarkReporter_deliver(b *testing.B) {
	rc := newReceiver(b, "spoke-bench-deliver", testKey)
	opts := testOptions(b, rc, testKey)
	opts.BatchMaxWait = 5 * time.Millisecond
	opts.OutboxCapacity = 1 << 20
	r, err := New(opts, (&fakeState{rev: 1}).snapshot, logr.Discard())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	defer func() { cancel(); <-done }()

	const chunk = 100
	buf := make([]wire.Event, 0, chunk)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		buf = append(buf, testEvent(i))
		if len(buf) == chunk {
			r.Enqueue(buf...)
			buf = buf[:0]
		}
	}
	r.Enqueue(buf...)
	fctx, fcancel := context.WithTimeout(context.Background(), time.Minute)
	defer fcancel()
	if err := r.Flush(fctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if got := rc.eventCount(); got != b.N {
		b.Fatalf("receiver has %d events, want %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}
