package hub

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestOptions_validateLeaseTimings refuses Lease timings the leader
// elector would refuse only once the manager starts, naming the flag.
func TestOptions_validateLeaseTimings(t *testing.T) {
	for _, tc := range []struct {
		name                string
		lease, renew, retry time.Duration
		disabled            bool
		want                string
	}{
		{name: "defaults"},
		{name: "short and ordered", lease: 6 * time.Second, renew: 4 * time.Second, retry: time.Second},
		{name: "zero retry period", retry: -1, want: "--leader-election-retry-period=0s: must be positive"},
		{name: "renew deadline not above the retry period", renew: 2 * time.Second, want: "--leader-election-renew-deadline=2s: must be longer than 1.2 × --leader-election-retry-period (2s)"},
		{name: "renew deadline within the retry period's jitter", renew: 2200 * time.Millisecond, want: "--leader-election-renew-deadline=2.2s: must be longer than 1.2 × --leader-election-retry-period (2s)"},
		{name: "lease not above the renew deadline", lease: 10 * time.Second, want: "--leader-election-lease-duration=10s: must be longer than --leader-election-renew-deadline (10s)"},
		{name: "unchecked without leader election", lease: time.Second, renew: time.Minute, disabled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o := NewOptions()
			if tc.lease != 0 {
				o.LeaseDuration = tc.lease
			}
			if tc.renew != 0 {
				o.RenewDeadline = tc.renew
			}
			switch {
			case tc.retry < 0:
				o.RetryPeriod = 0
			case tc.retry != 0:
				o.RetryPeriod = tc.retry
			}
			o.LeaderElection = !tc.disabled
			err := o.Validate()
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

// TestOptions_validatePipelineAPI refuses a rate limit the API could not
// serve with, naming the flag.
func TestOptions_validatePipelineAPI(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit float64
		burst int
		want  string
	}{
		{name: "defaults", limit: -1, burst: -1},
		{name: "a higher limit behind an ingress", limit: 50, burst: 200},
		{name: "zero rate", limit: 0, burst: -1, want: "--pipeline-api-rate-limit=0: must be a positive number of requests per second"},
		{name: "negative rate", limit: -2, burst: -1, want: "--pipeline-api-rate-limit=-2: must be a positive"},
		{name: "zero burst", limit: -1, burst: 0, want: "--pipeline-api-rate-burst=0: must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o := NewOptions()
			if tc.limit != -1 {
				o.PipelineAPI.RateLimit = tc.limit
			}
			if tc.burst != -1 {
				o.PipelineAPI.RateBurst = tc.burst
			}
			err := o.Validate()
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}
