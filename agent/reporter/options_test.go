package reporter

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
)

func validOptions() Options {
	o := NewOptions()
	o.HubURL = "https://hub.example.com:9443"
	o.Spoke = "staging-1"
	o.KeyFile = "/etc/tugboat/key"
	return o
}

func TestOptions_defaults(t *testing.T) {
	g := NewWithT(t)
	o := NewOptions()
	g.Expect(o.BatchMaxEvents).To(Equal(100))
	g.Expect(o.BatchMaxWait).To(Equal(200 * time.Millisecond))
	g.Expect(o.OutboxCapacity).To(Equal(10000))
	g.Expect(o.BackoffInitial).To(Equal(250 * time.Millisecond))
	g.Expect(o.BackoffMax).To(Equal(30 * time.Second))
	g.Expect(o.StateInterval).To(Equal(30 * time.Second))
	g.Expect(o.RequestTimeout).To(Equal(10 * time.Second))
	g.Expect(o.Validate()).To(MatchError(And(
		ContainSubstring("--hub-url is required"),
		ContainSubstring("--spoke is required"),
		ContainSubstring("--hub-key-file is required"),
	)))
	v := validOptions()
	g.Expect(v.Validate()).To(Succeed())
}

func TestOptions_Validate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*Options)
		want   string
	}{
		"plain http":           {func(o *Options) { o.HubURL = "http://hub:8080" }, "must be https"},
		"other scheme":         {func(o *Options) { o.HubURL = "ftp://hub" }, "unsupported scheme"},
		"path":                 {func(o *Options) { o.HubURL = "https://hub/prefix" }, "without path"},
		"no host":              {func(o *Options) { o.HubURL = "https://" }, "must name a host"},
		"bad spoke":            {func(o *Options) { o.Spoke = "Staging_1" }, "--spoke"},
		"batch too big":        {func(o *Options) { o.BatchMaxEvents = 501 }, "between 1 and 500"},
		"batch zero":           {func(o *Options) { o.BatchMaxEvents = 0 }, "between 1 and 500"},
		"negative wait":        {func(o *Options) { o.BatchMaxWait = -time.Second }, "must not be negative"},
		"no outbox":            {func(o *Options) { o.OutboxCapacity = 0 }, "--hub-outbox-capacity"},
		"backoff max < init":   {func(o *Options) { o.BackoffMax = time.Millisecond }, "--hub-backoff-max"},
		"no backoff":           {func(o *Options) { o.BackoffInitial = 0 }, "--hub-backoff-initial"},
		"no state interval":    {func(o *Options) { o.StateInterval = 0 }, "--hub-state-interval"},
		"no request timeout":   {func(o *Options) { o.RequestTimeout = 0 }, "--hub-request-timeout"},
		"no agent version":     {func(o *Options) { o.AgentVersion = "" }, "agent version"},
		"agent version length": {func(o *Options) { o.AgentVersion = string(make([]byte, 65)) }, "at most 64"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			o := validOptions()
			c.mutate(&o)
			g.Expect(o.Validate()).To(MatchError(ContainSubstring(c.want)))
		})
	}
	g := NewWithT(t)
	o := validOptions()
	o.HubURL, o.HubInsecureHTTP = "http://127.0.0.1:8080/", true
	g.Expect(o.Validate()).To(Succeed(), "plain http is allowed when asked for")
}

func TestOptions_BindFlags(t *testing.T) {
	g := NewWithT(t)
	o := NewOptions()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	o.BindFlags(fs)
	g.Expect(fs.Parse([]string{
		"--hub-url=https://hub:9443", "--spoke=prod-2", "--hub-key-file=/k", "--hub-ca-file=/ca.pem",
		"--hub-batch-max-events=50", "--hub-batch-max-wait=50ms", "--hub-outbox-capacity=20",
		"--hub-backoff-initial=1s", "--hub-backoff-max=1m", "--hub-state-interval=10s",
		"--hub-request-timeout=3s", "--hub-insecure-http",
	})).To(Succeed())
	g.Expect(o).To(Equal(Options{
		HubURL: "https://hub:9443", HubInsecureHTTP: true, Spoke: "prod-2", KeyFile: "/k", CAFile: "/ca.pem",
		BatchMaxEvents: 50, BatchMaxWait: 50 * time.Millisecond, OutboxCapacity: 20,
		BackoffInitial: time.Second, BackoffMax: time.Minute, StateInterval: 10 * time.Second,
		RequestTimeout: 3 * time.Second, AgentVersion: DefaultAgentVersion,
	}))
	g.Expect(o.Validate()).To(Succeed())
}
