package slack

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/controllers/notify"
)

func TestLimiter_spacesMessagesPerChannel(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC)
	l := newLimiter(time.Second, func() time.Time { return now })

	for i, want := range []time.Duration{0, time.Second, 2 * time.Second} {
		d, ok := l.reserve("C1", 5*time.Second)
		g.Expect(ok).To(BeTrue())
		g.Expect(d).To(Equal(want), "message %d", i)
	}
	d, ok := l.reserve("C2", 5*time.Second)
	g.Expect(ok).To(BeTrue())
	g.Expect(d).To(BeZero(), "another channel has its own turn")

	now = now.Add(10 * time.Second)
	d, _ = l.reserve("C1", 5*time.Second)
	g.Expect(d).To(BeZero(), "an idle channel posts at once")

	l.block("C1", 30*time.Second)
	d, ok = l.reserve("C1", 5*time.Second)
	g.Expect(ok).To(BeFalse())
	g.Expect(d).To(Equal(30 * time.Second))
	_, ok = l.reserve("C1", 5*time.Second)
	g.Expect(ok).To(BeFalse(), "a refused reservation books nothing")

	err := l.wait(context.Background(), "C1")
	after, isRetry := notify.RetryAfter(err)
	g.Expect(isRetry).To(BeTrue())
	g.Expect(after).To(Equal(30 * time.Second))
}
