package reporter

import (
	"math"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestBackoff_isCappedExponential(t *testing.T) {
	g := NewWithT(t)
	top := func(n int64) int64 { return n - 1 } // the largest draw: the ceiling itself
	initial, maxDelay := 250*time.Millisecond, 30*time.Second
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		g.Expect(backoff(i+1, initial, maxDelay, top)).To(Equal(w), "attempt %d", i+1)
	}
	g.Expect(backoff(0, initial, maxDelay, top)).To(Equal(initial))
	g.Expect(backoff(1000, initial, maxDelay, top)).To(Equal(maxDelay))
	g.Expect(backoff(math.MaxInt, time.Second, math.MaxInt64, top)).To(Equal(time.Duration(math.MaxInt64)), "no overflow")
	g.Expect(backoff(5, initial, maxDelay, func(int64) int64 { return 0 })).To(BeZero(), "full jitter reaches 0")
}

func TestBackoff_isJittered(t *testing.T) {
	g := NewWithT(t)
	initial, maxDelay := 250*time.Millisecond, 30*time.Second
	seen := map[time.Duration]bool{}
	var low, high int
	for range 1000 {
		d := backoff(20, initial, maxDelay, rand.Int64N)
		g.Expect(d).To(And(BeNumerically(">=", 0), BeNumerically("<=", maxDelay)))
		seen[d] = true
		if d < maxDelay/2 {
			low++
		} else {
			high++
		}
	}
	g.Expect(len(seen)).To(BeNumerically(">", 900), "delays are spread, not synchronized")
	g.Expect(low).To(BeNumerically(">", 300), "uniform over [0, cap]")
	g.Expect(high).To(BeNumerically(">", 300), "uniform over [0, cap]")
}

func TestParseRetryAfter(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1", time.Second, true},
		{" 0 ", 0, true},
		{"120", 2 * time.Minute, true},
		{"999999999999", maxRetryAfter, true},
		{now.Add(3 * time.Second).Format(http.TimeFormat), 3 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	}
	for _, c := range cases {
		d, ok := parseRetryAfter(c.in, now)
		g.Expect(ok).To(Equal(c.ok), "%q", c.in)
		g.Expect(d).To(Equal(c.want), "%q", c.in)
	}
}

func TestErrorDetail(t *testing.T) {
	g := NewWithT(t)
	msg, fields := errorDetail([]byte(`{"error":"invalid body: events[0].release: required","fields":[{"field":"events[0].release","detail":"required"}]}`))
	g.Expect(msg).To(ContainSubstring("events[0].release"))
	g.Expect(fields).To(HaveLen(1))
	msg, fields = errorDetail([]byte("  plain text  \n"))
	g.Expect(msg).To(Equal("plain text"))
	g.Expect(fields).To(BeNil())
}
