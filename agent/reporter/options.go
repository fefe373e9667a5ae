package reporter

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"tugboat.dev/tugboat/api/wire"
)

// Defaults of NewOptions.
const (
	// DefaultBatchMaxEvents is how many events one batch carries at most.
	DefaultBatchMaxEvents = 100
	// DefaultBatchMaxWait is how long an event waits for companions before
	// its batch is sent anyway. A health transition that can start or end a
	// promotion never waits for it (see urgent).
	DefaultBatchMaxWait = 200 * time.Millisecond
	// DefaultOutboxCapacity is how many events the outbox holds before it
	// drops the oldest.
	DefaultOutboxCapacity = 10000
	// DefaultBackoffInitial is the ceiling of the first retry delay.
	DefaultBackoffInitial = 250 * time.Millisecond
	// DefaultBackoffMax caps the retry delay.
	DefaultBackoffMax = 30 * time.Second
	// DefaultStateInterval is how often the full state is posted as the
	// heartbeat.
	DefaultStateInterval = 30 * time.Second
	// DefaultRequestTimeout bounds one request to the hub.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultAgentVersion is reported when no version is set.
	DefaultAgentVersion = "dev"
)

// Options configure a Reporter: where the hub is, who the spoke is, how it
// authenticates, and how it batches and retries.
type Options struct {
	// HubURL is the hub's base URL, e.g. https://hub.example.com:9443. It
	// must be https unless HubInsecureHTTP is set, and carry no path, query
	// or fragment (signatures cover the path the hub sees).
	HubURL string
	// HubInsecureHTTP allows an http:// HubURL, for local development only.
	HubInsecureHTTP bool
	// Spoke is this spoke's name, as registered on the hub (a DNS label).
	Spoke string
	// KeyFile is the path of the file holding the spoke's HMAC key, used
	// without surrounding white space (as the hub reads the Secret), at
	// least wire.MinKeySize bytes. It is read at start and re-read whenever
	// it changes (a key rotation).
	KeyFile string
	// CAFile is a PEM bundle of CAs trusted to sign the hub's TLS
	// certificate; empty means the system roots.
	CAFile string
	// BatchMaxEvents is the most events per batch, 1 to
	// wire.MaxEventsPerBatch. A full batch is sent at once.
	BatchMaxEvents int
	// BatchMaxWait is how long the oldest queued event waits for a batch
	// to fill before it is sent anyway; 0 sends at once. An event that can
	// start or end a promotion (health Current or Failed, Helm status
	// failed) is sent at once whatever the setting, with the events queued
	// before it.
	BatchMaxWait time.Duration
	// OutboxCapacity is how many events are kept while the hub cannot be
	// reached. Past it the oldest are dropped and a full state resync is
	// scheduled.
	OutboxCapacity int
	// BackoffInitial is the ceiling of the first retry delay; the ceiling
	// doubles per consecutive failure up to BackoffMax, and each delay is
	// drawn uniformly below it (full jitter).
	BackoffInitial time.Duration
	// BackoffMax caps the retry delay ceiling.
	BackoffMax time.Duration
	// StateInterval is how often the full state snapshot is posted; it is
	// the spoke's heartbeat.
	StateInterval time.Duration
	// RequestTimeout bounds each request to the hub, and each call of the
	// snapshot function.
	RequestTimeout time.Duration
	// AgentVersion is reported in every body. It is not a flag: main sets
	// it from the build.
	AgentVersion string
}

// NewOptions returns Options with the defaults set.
func NewOptions() Options {
	return Options{
		BatchMaxEvents: DefaultBatchMaxEvents,
		BatchMaxWait:   DefaultBatchMaxWait,
		OutboxCapacity: DefaultOutboxCapacity,
		BackoffInitial: DefaultBackoffInitial,
		BackoffMax:     DefaultBackoffMax,
		StateInterval:  DefaultStateInterval,
		RequestTimeout: DefaultRequestTimeout,
		AgentVersion:   DefaultAgentVersion,
	}
}

// BindFlags registers the options' flags on fs, with the current values as
// defaults.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.HubURL, "hub-url", o.HubURL, "Base URL of the hub (https://host:port).")
	fs.BoolVar(&o.HubInsecureHTTP, "hub-insecure-http", o.HubInsecureHTTP, "Allow a plain http:// hub URL. Local development only.")
	fs.StringVar(&o.Spoke, "spoke", o.Spoke, "Name of this spoke, as registered on the hub.")
	fs.StringVar(&o.KeyFile, "hub-key-file", o.KeyFile, "File holding the spoke's HMAC key (re-read when it changes).")
	fs.StringVar(&o.CAFile, "hub-ca-file", o.CAFile, "PEM file of CAs trusted for the hub's certificate (default: system roots).")
	fs.IntVar(&o.BatchMaxEvents, "hub-batch-max-events", o.BatchMaxEvents, fmt.Sprintf("Most events per batch (1 to %d).", wire.MaxEventsPerBatch))
	fs.DurationVar(&o.BatchMaxWait, "hub-batch-max-wait", o.BatchMaxWait, "Longest an event waits for its batch to fill before it is sent (a health transition to Current or Failed is sent at once).")
	fs.IntVar(&o.OutboxCapacity, "hub-outbox-capacity", o.OutboxCapacity, "Events kept while the hub is unreachable; past it the oldest are dropped and the full state is resent.")
	fs.DurationVar(&o.BackoffInitial, "hub-backoff-initial", o.BackoffInitial, "First retry delay ceiling (doubles per failure, full jitter).")
	fs.DurationVar(&o.BackoffMax, "hub-backoff-max", o.BackoffMax, "Largest retry delay ceiling.")
	fs.DurationVar(&o.StateInterval, "hub-state-interval", o.StateInterval, "How often the full state is posted (the heartbeat).")
	fs.DurationVar(&o.RequestTimeout, "hub-request-timeout", o.RequestTimeout, "Timeout of one request to the hub.")
}

// Validate reports every problem with the options, joined. It does not read
// files; New does.
func (o *Options) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if o.HubURL == "" {
		add("--hub-url is required")
	} else if u, err := url.Parse(o.HubURL); err != nil {
		add("--hub-url: %w", err)
	} else {
		switch {
		case u.Scheme == "https":
		case u.Scheme == "http" && o.HubInsecureHTTP:
		case u.Scheme == "http":
			add("--hub-url must be https (set --hub-insecure-http for local development)")
		default:
			add("--hub-url: unsupported scheme %q: must be https", u.Scheme)
		}
		if u.Host == "" {
			add("--hub-url must name a host")
		}
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			add("--hub-url must be a bare scheme://host[:port], without path, query, fragment or credentials")
		}
	}
	if o.Spoke == "" {
		add("--spoke is required")
	} else if msgs := validation.IsDNS1123Label(o.Spoke); len(msgs) > 0 {
		add("--spoke %q: %s", o.Spoke, strings.Join(msgs, "; "))
	}
	if o.KeyFile == "" {
		add("--hub-key-file is required")
	}
	if o.BatchMaxEvents < 1 || o.BatchMaxEvents > wire.MaxEventsPerBatch {
		add("--hub-batch-max-events must be between 1 and %d, got %d", wire.MaxEventsPerBatch, o.BatchMaxEvents)
	}
	if o.BatchMaxWait < 0 {
		add("--hub-batch-max-wait must not be negative, got %s", o.BatchMaxWait)
	}
	if o.OutboxCapacity < 1 {
		add("--hub-outbox-capacity must be at least 1, got %d", o.OutboxCapacity)
	}
	if o.BackoffInitial <= 0 {
		add("--hub-backoff-initial must be positive, got %s", o.BackoffInitial)
	}
	if o.BackoffMax < o.BackoffInitial {
		add("--hub-backoff-max (%s) must be at least --hub-backoff-initial (%s)", o.BackoffMax, o.BackoffInitial)
	}
	if o.StateInterval <= 0 {
		add("--hub-state-interval must be positive, got %s", o.StateInterval)
	}
	if o.RequestTimeout <= 0 {
		add("--hub-request-timeout must be positive, got %s", o.RequestTimeout)
	}
	switch {
	case o.AgentVersion == "":
		add("agent version is required")
	case len(o.AgentVersion) > wire.MaxVersionLength:
		add("agent version must be at most %d characters, got %d", wire.MaxVersionLength, len(o.AgentVersion))
	}
	return errors.Join(errs...)
}
