package reporter

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
)

func seqs(evs []wire.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Sequence
	}
	return out
}

func TestOutbox_growsThenDropsOldest(t *testing.T) {
	g := NewWithT(t)
	o := newOutbox(100)
	now := time.Now()
	for i := range 150 {
		o.push([]wire.Event{{Sequence: int64(i)}}, now, 10)
	}
	g.Expect(o.depth()).To(Equal(100))
	g.Expect(o.dropped).To(Equal(int64(50)))
	g.Expect(o.resyncNeeded()).To(BeTrue())

	evs, start := o.peek(noLimit, 3)
	g.Expect(start).To(Equal(int64(50)))
	g.Expect(seqs(evs)).To(Equal([]int64{50, 51, 52}))
	g.Expect(o.next()).To(Equal(int64(150)))
}

func TestOutbox_removeAfterTheHeadWasDropped(t *testing.T) {
	g := NewWithT(t)
	o := newOutbox(4)
	now := time.Now()
	dropped, depth, wake := o.push([]wire.Event{{Sequence: 0}, {Sequence: 1}, {Sequence: 2}}, now, 2)
	g.Expect([]any{dropped, depth, wake}).To(Equal([]any{0, 3, true}))

	inflight, start := o.peek(noLimit, 2) // events 0 and 1 in flight
	end := start + int64(len(inflight))
	dropped, _, wake = o.push([]wire.Event{{Sequence: 3}, {Sequence: 4}, {Sequence: 5}}, now, 2)
	g.Expect(dropped).To(Equal(2)) // 0 and 1 overwritten meanwhile
	g.Expect(wake).To(BeFalse())

	g.Expect(o.remove(end)).To(Equal(4), "nothing newer than the batch is removed")
	evs, _ := o.peek(noLimit, 10)
	g.Expect(seqs(evs)).To(Equal([]int64{2, 3, 4, 5}))
}

func TestOutbox_peekHonoursLimit(t *testing.T) {
	g := NewWithT(t)
	o := newOutbox(10)
	o.push([]wire.Event{{Sequence: 0}, {Sequence: 1}, {Sequence: 2}}, time.Now(), 10)
	limit := o.next()
	o.push([]wire.Event{{Sequence: 3}}, time.Now(), 10)
	evs, _ := o.peek(limit, 10)
	g.Expect(seqs(evs)).To(Equal([]int64{0, 1, 2}))
	g.Expect(o.delivered(limit)).To(BeFalse())
	o.remove(limit)
	g.Expect(o.delivered(limit)).To(BeTrue())
	evs, _ = o.peek(limit, 10)
	g.Expect(evs).To(BeEmpty())
}

func TestOutbox_ready(t *testing.T) {
	g := NewWithT(t)
	o := newOutbox(10)
	t0 := time.Now()
	ready, deadline := o.ready(t0, 3, time.Second)
	g.Expect(ready).To(BeFalse())
	g.Expect(deadline).To(BeZero())

	o.push([]wire.Event{{}}, t0, 3)
	ready, deadline = o.ready(t0, 3, time.Second)
	g.Expect(ready).To(BeFalse())
	g.Expect(deadline).To(Equal(t0.Add(time.Second)))
	ready, _ = o.ready(t0.Add(time.Second), 3, time.Second)
	g.Expect(ready).To(BeTrue(), "the oldest waited long enough")

	_, _, wake := o.push([]wire.Event{{}, {}}, t0, 3)
	g.Expect(wake).To(BeTrue(), "a batch just filled")
	ready, _ = o.ready(t0, 3, time.Second)
	g.Expect(ready).To(BeTrue())
}

func TestOutbox_resyncGenerations(t *testing.T) {
	g := NewWithT(t)
	o := newOutbox(1)
	g.Expect(o.resyncNeeded()).To(BeFalse())
	o.requestResync()
	gen := o.resyncGeneration()
	o.requestResync() // after the snapshot was taken
	o.ackResync(gen)
	g.Expect(o.resyncNeeded()).To(BeTrue())
	o.ackResync(o.resyncGeneration())
	g.Expect(o.resyncNeeded()).To(BeFalse())
}

func TestOutbox_anUrgentEventIsReadyAtOnce(t *testing.T) {
	g := NewWithT(t)
	o := newOutbox(10)
	t0 := time.Now()
	progress := wire.Event{Kind: wire.EventHealthChanged, State: &wire.ReleaseState{Health: wire.HealthInProgress}}
	_, _, wake := o.push([]wire.Event{progress}, t0, 100)
	g.Expect(wake).To(BeTrue(), "the outbox was empty")
	ready, _ := o.ready(t0, 100, time.Hour)
	g.Expect(ready).To(BeFalse(), "InProgress cannot start a promotion: it waits for its batch")
	_, _, wake = o.push([]wire.Event{{Kind: wire.EventObjectUpdated}}, t0, 100)
	g.Expect(wake).To(BeFalse())

	for name, ev := range map[string]wire.Event{
		"health Current":     {Kind: wire.EventHealthChanged, State: &wire.ReleaseState{Health: wire.HealthCurrent}},
		"health Failed":      {Kind: wire.EventHealthChanged, State: &wire.ReleaseState{Health: wire.HealthFailed}},
		"deployed, Current":  {Kind: wire.EventReleaseStatus, State: &wire.ReleaseState{Status: wire.StatusDeployed, Health: wire.HealthCurrent}},
		"Helm status failed": {Kind: wire.EventReleaseStatus, State: &wire.ReleaseState{Status: wire.StatusFailed, Health: wire.HealthUnknown}},
	} {
		o := newOutbox(10)
		o.push([]wire.Event{progress}, t0, 100)
		_, _, wake := o.push([]wire.Event{ev}, t0, 100)
		g.Expect(wake).To(BeTrue(), name)
		ready, _ := o.ready(t0, 100, time.Hour)
		g.Expect(ready).To(BeTrue(), name)
		evs, start := o.peek(noLimit, 100)
		g.Expect(evs).To(HaveLen(2), "%s: the events queued before it go along", name)
		o.remove(start + int64(len(evs)))
		o.push([]wire.Event{progress}, t0, 100)
		ready, _ = o.ready(t0, 100, time.Hour)
		g.Expect(ready).To(BeFalse(), "%s: once sent, it no longer hurries what follows", name)
	}
	for name, ev := range map[string]wire.Event{
		"an object event":                   {Kind: wire.EventObjectUpdated},
		"pending, no state":                 {Kind: wire.EventReleaseStarted},
		"superseded, Unknown":               {Kind: wire.EventReleaseStatus, State: &wire.ReleaseState{Status: wire.StatusSuperseded, Health: wire.HealthUnknown}},
		"a Kubernetes event, Current state": {Kind: wire.EventKubernetes, State: &wire.ReleaseState{Health: wire.HealthCurrent}},
	} {
		g.Expect(urgent(&ev)).To(BeFalse(), name)
	}
}
