package hub

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
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

// TestOptions_bootstrapAllowedValues parses --bootstrap-allowed-values as
// `tugboat hub` does and validates it: every entry must be a value of the
// agent's chart (or lie under a free-form map of it), and none of the
// values the hub sets itself.
func TestOptions_bootstrapAllowedValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // the allow-list parsed, when valid
		err  string
	}{
		{name: "default", want: []string{"replicas", "resources", "logLevel", "watchNamespaces", "webhook.enabled", "backfill.enabled", "backfill.namespaces", "networkPolicy"}},
		{name: "empty: none allowed", args: []string{"--bootstrap-allowed-values="}, want: []string{}},
		{name: "a map and a leaf", args: []string{"--bootstrap-allowed-values=helmStrategy,image.tag"}, want: []string{"helmStrategy", "image.tag"}},
		{name: "under a free-form map", args: []string{"--bootstrap-allowed-values=podLabels.team"}, want: []string{"podLabels.team"}},
		{name: "repeated flags add up", args: []string{"--bootstrap-allowed-values=replicas", "--bootstrap-allowed-values=logLevel"}, want: []string{"replicas", "logLevel"}},
		{name: "a stray comma", args: []string{"--bootstrap-allowed-values=replicas,,logLevel"}, err: `"": empty entry (a stray comma?)`},
		{name: "not in the chart", args: []string{"--bootstrap-allowed-values=watchNamespace"}, err: `"watchNamespace": the agent's chart has no value watchNamespace`},
		{name: "not in the chart, nested", args: []string{"--bootstrap-allowed-values=backfill.namespace"}, err: `"backfill.namespace": the agent's chart has no value backfill.namespace`},
		{name: "below a single value", args: []string{"--bootstrap-allowed-values=image.tag.x"}, err: `"image.tag.x": image.tag holds a single value, with nothing below it`},
		{name: "the spoke's name", args: []string{"--bootstrap-allowed-values=spoke"}, err: `"spoke": spoke is set by the hub`},
		{name: "the hub's URL", args: []string{"--bootstrap-allowed-values=hub.url"}, err: `"hub.url": hub is set by the hub`},
		{name: "a wildcard", args: []string{"--bootstrap-allowed-values=*"}, err: `"*": not a dotted path of chart values`},
		{name: "an empty segment", args: []string{"--bootstrap-allowed-values=backfill..namespaces"}, err: `"backfill..namespaces": not a dotted path`},
		{name: "a leading dot", args: []string{"--bootstrap-allowed-values=.replicas"}, err: `".replicas": not a dotted path`},
		{name: "spaces", args: []string{"--bootstrap-allowed-values=replicas, logLevel"}, err: `" logLevel": not a dotted path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o := NewOptions()
			fs := pflag.NewFlagSet("hub", pflag.ContinueOnError)
			o.BindFlags(fs)
			g.Expect(fs.Parse(tc.args)).To(Succeed())
			err := o.Validate()
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring("--bootstrap-allowed-values: " + tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(o.BootstrapAllowedValues).To(Equal(tc.want))
		})
	}
}

// TestOptions_heartbeatDigestFlags: the digests' flags parse into the
// options, a negative interval is refused naming the flag, and the
// digests' namespace defaults to the leader election namespace.
func TestOptions_heartbeatDigestFlags(t *testing.T) {
	g := NewWithT(t)
	o := NewOptions()
	fs := pflag.NewFlagSet("hub", pflag.ContinueOnError)
	o.BindFlags(fs)
	g.Expect(fs.Parse([]string{"--heartbeat-digest-interval=2s", "--leader-election-namespace=ops"})).To(Succeed())
	g.Expect(o.Heartbeats.Interval).To(Equal(2 * time.Second))
	g.Expect(o.Validate()).To(Succeed())
	g.Expect(o.Heartbeats.ResolveNamespace(o.LeaderElectionNamespace)).To(Equal("ops"))
	g.Expect(fs.Parse([]string{"--heartbeat-namespace=beats"})).To(Succeed())
	g.Expect(o.Heartbeats.ResolveNamespace(o.LeaderElectionNamespace)).To(Equal("beats"))
	g.Expect(fs.Parse([]string{"--heartbeat-digest-interval=-1s"})).To(Succeed())
	g.Expect(o.Validate()).To(MatchError(ContainSubstring("--heartbeat-digest-interval must not be negative")))
}

// TestOptions_dashboardURL parses --dashboard-url as `tugboat hub` does:
// the public address of the dashboard the hub serves, so it needs
// --dashboard-namespace, and an address Slack can link to.
func TestOptions_dashboardURL(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "off", args: nil},
		{name: "with its namespace", args: []string{"--dashboard-namespace=fleet", "--dashboard-url=https://tugboat.example.com/ui/"}},
		{name: "without a dashboard", args: []string{"--dashboard-url=https://tugboat.example.com/ui/"}, want: "--dashboard-url: needs --dashboard-namespace"},
		{name: "not http", args: []string{"--dashboard-namespace=fleet", "--dashboard-url=javascript:alert(1)"}, want: `--dashboard-url=javascript:alert(1): must be an http:// or https:// address, got scheme "javascript"`},
		{name: "relative", args: []string{"--dashboard-namespace=fleet", "--dashboard-url=/ui/"}, want: "must be an http:// or https:// address"},
		{name: "credentials", args: []string{"--dashboard-namespace=fleet", "--dashboard-url=https://a:b@tugboat.example.com/ui/"}, want: "must not carry credentials"},
		{name: "query", args: []string{"--dashboard-namespace=fleet", "--dashboard-url=https://tugboat.example.com/ui/?x=1"}, want: "must not carry a query or fragment"},
		{name: "too long", args: []string{"--dashboard-namespace=fleet", "--dashboard-url=https://tugboat.example.com/" + strings.Repeat("a", 2048)}, want: "must be at most 2048 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o := NewOptions()
			fs := pflag.NewFlagSet("hub", pflag.ContinueOnError)
			o.BindFlags(fs)
			g.Expect(fs.Parse(tc.args)).To(Succeed())
			err := o.Validate()
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}
