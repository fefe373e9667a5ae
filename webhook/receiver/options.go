package receiver

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
)

// Defaults of the receiver's options.
const (
	// DefaultBindAddress is where the receiver listens.
	DefaultBindAddress = ":9443"
	// DefaultBodyLimit is the largest request body accepted on the events and
	// Flux endpoints, in bytes, as sent (compressed or not).
	DefaultBodyLimit int64 = 1 << 20
	// DefaultStateBodyLimit is the largest request body accepted on the state
	// endpoint, in bytes, as sent. A snapshot lists every release of a spoke,
	// so it may be larger than an event batch.
	DefaultStateBodyLimit int64 = wire.DefaultStateSnapshotLimit
	// DefaultDecompressedLimit is the largest a gzip-encoded body may grow to
	// once decompressed, in bytes.
	DefaultDecompressedLimit int64 = 8 << 20
	// DefaultPreAuthBodyLimit is how much of a body the receiver buffers
	// before it authenticated the request without taking a large-body slot.
	DefaultPreAuthBodyLimit int64 = 64 << 10
	// DefaultPreAuthLargeBodies is how many requests not yet authenticated
	// may buffer more than PreAuthBodyLimit at once.
	DefaultPreAuthLargeBodies = 8
	// DefaultPreAuthMemoryLimit bounds the memory of every body not yet
	// authenticated, together.
	DefaultPreAuthMemoryLimit int64 = 64 << 20
	// DefaultRateLimit is each spoke's sustained request rate, per second.
	DefaultRateLimit = 50.0
	// DefaultRateBurst is how many requests a spoke may send at once.
	DefaultRateBurst = 100
	// DefaultReplayWindow is how far a request's signed timestamp (or a Flux
	// event's timestamp) may be from the hub's clock.
	DefaultReplayWindow = wire.DefaultWindow
	// DefaultDedupeCacheSize is how many event ids the receiver remembers.
	DefaultDedupeCacheSize = 100_000
	// DefaultInFlightWait is how long a request waits for another request's
	// write of the same event ids before it is told to retry.
	DefaultInFlightWait = 10 * time.Second
	// DefaultShutdownTimeout bounds the graceful shutdown.
	DefaultShutdownTimeout = 30 * time.Second
)

// Options configure a Server. Create them with NewOptions, let BindFlags
// override them from the command line, and check them with Validate (New
// does that too).
type Options struct {
	// BindAddress is the host:port the server listens on.
	BindAddress string
	// TLSCertFile and TLSKeyFile are a PEM certificate and key to serve HTTPS
	// with; the files are watched and reloaded when they change. Leave both
	// empty to serve plain HTTP (behind an ingress that terminates TLS).
	TLSCertFile string
	// TLSKeyFile is the key matching TLSCertFile.
	TLSKeyFile string

	// BodyLimit is the largest body, as sent, of an event batch or a Flux
	// event, in bytes. Larger bodies are answered 413.
	BodyLimit int64
	// StateBodyLimit is the largest body, as sent, of a state snapshot, in
	// bytes.
	StateBodyLimit int64
	// DecompressedLimit is the largest a Content-Encoding: gzip body may grow
	// to, in bytes (413 past it).
	DecompressedLimit int64

	// PreAuthBodyLimit is how many bytes of a body, not yet authenticated,
	// the receiver buffers before the request needs one of the
	// PreAuthLargeBodies slots.
	PreAuthBodyLimit int64
	// PreAuthLargeBodies is how many requests, not yet authenticated, may
	// buffer more than PreAuthBodyLimit at once; others get 503 with
	// Retry-After.
	PreAuthLargeBodies int
	// PreAuthMemoryLimit bounds the buffers of all the bodies not yet
	// authenticated, together, in bytes; past it requests get 503 with
	// Retry-After. It must hold the largest body (StateBodyLimit).
	PreAuthMemoryLimit int64

	// RateLimit is each spoke's sustained rate of authenticated requests per
	// second; past it (and the burst) the receiver answers 429 with
	// Retry-After.
	RateLimit float64
	// RateBurst is how many requests a spoke may send at once.
	RateBurst int

	// ReplayWindow is how far a signed timestamp may be from the hub's clock,
	// either way.
	ReplayWindow time.Duration
	// DedupeCacheSize is how many event ids the receiver remembers to drop
	// redeliveries (memory is about 100 bytes per id).
	DedupeCacheSize int
	// InFlightWait is how long a redelivery waits for a concurrent request
	// that is writing the same events: once that write commits they are
	// duplicates, and when it fails the redelivery writes them itself. Past
	// InFlightWait the redelivery is answered 503 with Retry-After. Not a
	// flag.
	InFlightWait time.Duration
	// ShutdownTimeout bounds how long Start waits for requests in flight once
	// its context ends.
	ShutdownTimeout time.Duration
	// ActionPollTimeout is how long a poll for agent actions is held when
	// the spoke has none (at most 50s).
	ActionPollTimeout time.Duration

	// ReadyCheck, when set, decides /readyz: 200 while it returns nil, 503
	// otherwise. Not a flag.
	ReadyCheck healthz.Checker
	// Logger is the receiver's logger. Not a flag; defaults to
	// controller-runtime's logger named "webhook-receiver".
	Logger logr.Logger
	// Registerer is where the receiver's metrics go. Not a flag; defaults to
	// controller-runtime's metrics.Registry, which the manager serves on
	// /metrics.
	Registerer prometheus.Registerer
	// Clock returns the current time. Not a flag; defaults to time.Now.
	// Tests set it.
	Clock func() time.Time
	// Mounts serves other APIs on the receiver's listener: a request whose
	// escaped path starts with a key (e.g. "/v1/pipelines/") goes to that
	// handler, before the receiver's own routes; the longest matching
	// prefix wins. Keys start and end with "/". The handler authenticates,
	// limits and answers on its own; the receiver only counts its requests
	// (endpoint label "mount"). Not a flag.
	Mounts map[string]http.Handler
	// Spokes finds the Spokes a request names, with their keys, Flux keys,
	// suspension and the time of their last recorded snapshot. When nil,
	// Store.SpokeKeys is used: one spoke per name, no Flux keys (the Flux
	// endpoint then refuses every request), never suspended. Not a flag.
	Spokes SpokeDirectory
	// Actions hands spoke agents their actions (GET /v1/spokes/{spoke}/actions)
	// and records their outcomes (POST /v1/spokes/{spoke}/actions/{id});
	// when nil, those endpoints answer 404. Not a flag.
	Actions ingest.ActionStore
}

// NewOptions returns Options with every default set.
func NewOptions() Options {
	return Options{
		BindAddress:        DefaultBindAddress,
		BodyLimit:          DefaultBodyLimit,
		StateBodyLimit:     DefaultStateBodyLimit,
		DecompressedLimit:  DefaultDecompressedLimit,
		PreAuthBodyLimit:   DefaultPreAuthBodyLimit,
		PreAuthLargeBodies: DefaultPreAuthLargeBodies,
		PreAuthMemoryLimit: DefaultPreAuthMemoryLimit,
		RateLimit:          DefaultRateLimit,
		RateBurst:          DefaultRateBurst,
		ReplayWindow:       DefaultReplayWindow,
		DedupeCacheSize:    DefaultDedupeCacheSize,
		InFlightWait:       DefaultInFlightWait,
		ShutdownTimeout:    DefaultShutdownTimeout,
		ActionPollTimeout:  DefaultActionPollTimeout,
	}
}

// BindFlags binds the options that make sense on a command line to fs,
// prefixed "receiver-".
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.BindAddress, "receiver-bind-address", o.BindAddress,
		"Address the hub's webhook receiver listens on.")
	fs.StringVar(&o.TLSCertFile, "receiver-tls-cert-file", o.TLSCertFile,
		"PEM certificate for the receiver's HTTPS; empty serves plain HTTP (TLS terminated by an ingress).")
	fs.StringVar(&o.TLSKeyFile, "receiver-tls-key-file", o.TLSKeyFile,
		"PEM key matching --receiver-tls-cert-file.")
	fs.Int64Var(&o.BodyLimit, "receiver-body-limit", o.BodyLimit,
		"Largest event batch or Flux event body accepted, in bytes, as sent.")
	fs.Int64Var(&o.StateBodyLimit, "receiver-state-body-limit", o.StateBodyLimit,
		"Largest state snapshot body accepted, in bytes, as sent.")
	fs.Int64Var(&o.DecompressedLimit, "receiver-decompressed-limit", o.DecompressedLimit,
		"Largest size a gzip-encoded body may decompress to, in bytes.")
	fs.Int64Var(&o.PreAuthBodyLimit, "receiver-preauth-body-limit", o.PreAuthBodyLimit,
		"Bytes of a body buffered before its signature is checked without taking a large-body slot.")
	fs.IntVar(&o.PreAuthLargeBodies, "receiver-preauth-large-bodies", o.PreAuthLargeBodies,
		"Requests not yet authenticated that may buffer more than --receiver-preauth-body-limit at once.")
	fs.Int64Var(&o.PreAuthMemoryLimit, "receiver-preauth-memory-limit", o.PreAuthMemoryLimit,
		"Bytes all bodies not yet authenticated may hold together; past it requests get 503 with Retry-After.")
	fs.Float64Var(&o.RateLimit, "receiver-rate-limit", o.RateLimit,
		"Authenticated requests per second allowed per spoke.")
	fs.IntVar(&o.RateBurst, "receiver-rate-burst", o.RateBurst,
		"Requests a spoke may send at once above --receiver-rate-limit.")
	fs.DurationVar(&o.ReplayWindow, "receiver-replay-window", o.ReplayWindow,
		"How far a request's signed timestamp may be from the hub's clock.")
	fs.IntVar(&o.DedupeCacheSize, "receiver-dedupe-cache-size", o.DedupeCacheSize,
		"How many event ids the receiver remembers to drop redeliveries.")
	fs.DurationVar(&o.ShutdownTimeout, "receiver-shutdown-timeout", o.ShutdownTimeout,
		"How long the receiver waits for requests in flight when stopping.")
	fs.DurationVar(&o.ActionPollTimeout, "receiver-action-poll-timeout", o.ActionPollTimeout,
		"How long a spoke agent's poll for actions is held when there are none (at most 50s).")
}

// Validate reports every option out of range, joined.
func (o *Options) Validate() error {
	var errs []error
	if o.BindAddress == "" {
		errs = append(errs, errors.New("receiver bind address: required"))
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		errs = append(errs, errors.New("receiver TLS: set both the certificate and the key file, or neither"))
	}
	positive := func(name string, v int64) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("receiver %s: must be positive, got %d", name, v))
		}
	}
	positive("body limit", o.BodyLimit)
	positive("state body limit", o.StateBodyLimit)
	positive("decompressed limit", o.DecompressedLimit)
	positive("rate burst", int64(o.RateBurst))
	positive("pre-auth body limit", o.PreAuthBodyLimit)
	positive("pre-auth large bodies", int64(o.PreAuthLargeBodies))
	if largest := max(o.BodyLimit, o.StateBodyLimit); o.PreAuthMemoryLimit <= largest {
		errs = append(errs, fmt.Errorf("receiver pre-auth memory limit (%d) must be more than the largest body limit (%d)", o.PreAuthMemoryLimit, largest))
	}
	positive("dedupe cache size", int64(o.DedupeCacheSize))
	if o.DecompressedLimit > 0 && o.DecompressedLimit < o.BodyLimit {
		errs = append(errs, fmt.Errorf("receiver decompressed limit (%d) must be at least the body limit (%d)", o.DecompressedLimit, o.BodyLimit))
	}
	if !(o.RateLimit > 0) {
		errs = append(errs, fmt.Errorf("receiver rate limit: must be positive, got %v", o.RateLimit))
	}
	if o.ReplayWindow < time.Second {
		errs = append(errs, fmt.Errorf("receiver replay window: must be at least 1s, got %s", o.ReplayWindow))
	}
	for prefix, h := range o.Mounts {
		if !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") || h == nil {
			errs = append(errs, fmt.Errorf("receiver mount %q: the prefix must start and end with / and the handler must be set", prefix))
		}
	}
	if o.ActionPollTimeout <= 0 || o.ActionPollTimeout > maxActionPollTimeout {
		errs = append(errs, fmt.Errorf("receiver action poll timeout: must be positive and at most %s, got %s", maxActionPollTimeout, o.ActionPollTimeout))
	}
	if o.InFlightWait <= 0 {
		errs = append(errs, fmt.Errorf("receiver in-flight wait: must be positive, got %s", o.InFlightWait))
	}
	if o.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("receiver shutdown timeout: must not be negative, got %s", o.ShutdownTimeout))
	}
	return errors.Join(errs...)
}
