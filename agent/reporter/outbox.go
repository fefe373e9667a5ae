package reporter

import (
	"sync"
	"time"

	"tugboat.dev/tugboat/api/wire"
)

// outbox is a bounded FIFO of events awaiting delivery: a ring buffer that
// grows on demand up to its capacity and then overwrites the oldest entry.
//
// Every event gets a sequence number when it is queued; sequence numbers are
// contiguous from the head, so a batch is named by the sequence number after
// its last event, and removing "everything before n" stays correct when the
// head was dropped (overwritten) while the batch was in flight.
type outbox struct {
	mu       sync.Mutex
	buf      []entry // ring; len(buf) grows up to capacity
	capacity int
	head     int   // index of the oldest entry in buf
	n        int   // entries held
	headSeq  int64 // sequence number of buf[head]

	dropped int64 // events ever dropped because the outbox was full

	// urgentEnd is the sequence number after the last urgent event queued
	// (see urgent): while it is above headSeq, an urgent event waits, and
	// a batch is ready at once.
	urgentEnd int64

	// resyncGen counts reasons for a full state resync (events dropped,
	// rejected or invalid); resyncAck is the generation the last posted
	// snapshot covered.
	resyncGen, resyncAck uint64
}

type entry struct {
	ev wire.Event
	at time.Time // when it was queued
}

const initialOutboxSize = 64

func newOutbox(capacity int) *outbox {
	return &outbox{capacity: capacity, buf: make([]entry, min(capacity, initialOutboxSize))}
}

// push queues evs (oldest first) at time at. It returns how many old events
// were dropped to make room, the depth after, and whether the consumer
// should be woken: the outbox was empty before, a batch of batchMax just
// filled, or an urgent event arrived.
func (o *outbox) push(evs []wire.Event, at time.Time, batchMax int) (dropped, depth int, wake bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	before := o.n
	urgentPushed := false
	for i := range evs {
		if o.n == len(o.buf) && len(o.buf) < o.capacity {
			o.grow()
		}
		if o.n == o.capacity {
			// Full: overwrite the oldest.
			o.buf[o.head] = entry{}
			o.head = (o.head + 1) % len(o.buf)
			o.headSeq++
			o.n--
			dropped++
		}
		o.buf[(o.head+o.n)%len(o.buf)] = entry{ev: evs[i], at: at}
		o.n++
		if urgent(&evs[i]) {
			o.urgentEnd = o.headSeq + int64(o.n)
			urgentPushed = true
		}
	}
	if dropped > 0 {
		o.dropped += int64(dropped)
		o.resyncGen++
	}
	return dropped, o.n, before == 0 || urgentPushed || (before < batchMax && o.n >= batchMax)
}

// grow doubles the ring (up to capacity), moving the entries to the front.
func (o *outbox) grow() {
	size := min(max(2*len(o.buf), 1), o.capacity)
	nb := make([]entry, size)
	for i := 0; i < o.n; i++ {
		nb[i] = o.buf[(o.head+i)%len(o.buf)]
	}
	o.buf, o.head = nb, 0
}

// peek copies up to maxEvents events from the head whose sequence numbers
// are below limit. It returns them and the sequence number of the first.
func (o *outbox) peek(limit int64, maxEvents int) ([]wire.Event, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := int64(min(o.n, maxEvents))
	k = max(min(k, limit-o.headSeq), 0)
	if k == 0 {
		return nil, o.headSeq
	}
	out := make([]wire.Event, k)
	for i := range out {
		out[i] = o.buf[(o.head+i)%len(o.buf)].ev
	}
	return out, o.headSeq
}

// remove forgets every event whose sequence number is below end (those that
// were dropped meanwhile are already gone) and returns the depth after.
func (o *outbox) remove(end int64) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.n > 0 && o.headSeq < end {
		o.buf[o.head] = entry{}
		o.head = (o.head + 1) % len(o.buf)
		o.headSeq++
		o.n--
	}
	return o.n
}

// next returns the sequence number the next queued event will get: every
// event queued so far has a lower one.
func (o *outbox) next() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.headSeq + int64(o.n)
}

// delivered reports whether every event below seq has left the outbox.
func (o *outbox) delivered(seq int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n == 0 || o.headSeq >= seq
}

// ready reports whether a batch should be sent now: batchMax events are
// queued, an urgent event is queued, or the oldest has waited maxWait. When
// not, deadline is when the oldest will have waited long enough (zero when
// the outbox is empty).
func (o *outbox) ready(now time.Time, batchMax int, maxWait time.Duration) (ready bool, deadline time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == 0 {
		return false, time.Time{}
	}
	deadline = o.buf[o.head].at.Add(maxWait)
	return o.n >= batchMax || o.urgentEnd > o.headSeq || !now.Before(deadline), deadline
}

// depth returns how many events are queued.
func (o *outbox) depth() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// requestResync records that the hub may have missed something, so the next
// state post must happen soon.
func (o *outbox) requestResync() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.resyncGen++
}

// resyncGeneration returns the current resync generation; pass it to
// ackResync once a snapshot taken after this call was accepted.
func (o *outbox) resyncGeneration() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.resyncGen
}

// ackResync records that a snapshot covering generation gen was posted.
func (o *outbox) ackResync(gen uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.resyncAck = max(o.resyncAck, gen)
}

// resyncNeeded reports whether something happened that no posted snapshot
// covers yet.
func (o *outbox) resyncNeeded() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.resyncGen != o.resyncAck
}

// urgent reports whether ev may start or end a promotion on the hub
// (wire.Event.Decisive: health Current or Failed, or Helm status failed).
// The Pipeline decides on exactly these, so such an event is sent at once
// instead of waiting BatchMaxWait for companions; the events queued before
// it go in the same batch, in order.
func urgent(ev *wire.Event) bool { return ev.Decisive() }
