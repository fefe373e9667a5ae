package receiver

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Endpoint labels of the receiver's metrics.
const (
	endpointEvents  = "events"
	endpointState   = "state"
	endpointFlux    = "flux"
	endpointHealthz = "healthz"
	endpointReadyz  = "readyz"
	endpointOther   = "other"
	endpointMount   = "mount"
)

// Reasons a request is rejected, for the rejected_total metric and the logs;
// never for responses.
const (
	reasonUnknownSpoke        = "unknown_spoke"
	reasonBadSignature        = "bad_signature"
	reasonRateLimited         = "rate_limited"
	reasonBodyTooLarge        = "body_too_large"
	reasonUnsupportedEncoding = "unsupported_encoding"
	reasonInvalidBody         = "invalid_body"
	reasonSpokeMismatch       = "spoke_mismatch"
	reasonStoreUnavailable    = "store_unavailable"
	reasonNotFound            = "not_found"
	reasonMethodNotAllowed    = "method_not_allowed"
	reasonInFlight            = "in_flight"
	reasonPreAuthBusy         = "preauth_busy"
	reasonInvalidKey          = "invalid_key"
	reasonAmbiguousSpoke      = "ambiguous_spoke"
	reasonSuspended           = "suspended"
	reasonStaleSnapshot       = "stale_snapshot"
)

// metrics are the receiver's Prometheus collectors.
type metrics struct {
	requests  *prometheus.CounterVec   // endpoint, code
	events    *prometheus.CounterVec   // endpoint, result
	rejected  *prometheus.CounterVec   // endpoint, reason
	latency   *prometheus.HistogramVec // endpoint
	bodyBytes *prometheus.HistogramVec // endpoint
	// verifications counts the keys requests were verified with, by
	// endpoint: the same per request whether the spoke exists or not.
	verifications *prometheus.CounterVec // endpoint
}

// Results of the events_total metric.
const (
	resultReceived  = "received"
	resultAccepted  = "accepted"
	resultDuplicate = "duplicate"
	resultStale     = "stale"
	resultIgnored   = "ignored"
	// resultWaited counts events whose request waited for another request
	// writing the same ids (a concurrent redelivery).
	resultWaited = "waited"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tugboat", Subsystem: "receiver", Name: "requests_total",
			Help: "Requests the hub's webhook receiver answered, by endpoint and HTTP status code.",
		}, []string{"endpoint", "code"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tugboat", Subsystem: "receiver", Name: "events_total",
			Help: "Events the receiver handled, by endpoint and result (received, accepted, duplicate, stale, ignored, waited).",
		}, []string{"endpoint", "result"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tugboat", Subsystem: "receiver", Name: "rejected_total",
			Help: "Requests the receiver rejected, by endpoint and reason (e.g. bad_signature, stale_timestamp, unknown_spoke).",
		}, []string{"endpoint", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "tugboat", Subsystem: "receiver", Name: "request_duration_seconds",
			Help:    "Time to answer a request, by endpoint.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"endpoint"}),
		bodyBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "tugboat", Subsystem: "receiver", Name: "request_body_bytes",
			Help:    "Size of request bodies as sent, by endpoint.",
			Buckets: prometheus.ExponentialBuckets(256, 4, 9), // 256 B .. 16 MiB
		}, []string{"endpoint"}),
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tugboat", Subsystem: "receiver", Name: "signature_verifications_total",
			Help: "Keys requests were verified with (HMACs computed per signature), by endpoint; an unknown spoke costs the same as a known one.",
		}, []string{"endpoint"}),
	}
	var err error
	m.requests = register(reg, m.requests, &err)
	m.events = register(reg, m.events, &err)
	m.rejected = register(reg, m.rejected, &err)
	m.latency = register(reg, m.latency, &err)
	m.bodyBytes = register(reg, m.bodyBytes, &err)
	m.verifications = register(reg, m.verifications, &err)
	return m, err
}

// register registers c with reg; when an identical collector is already
// registered (a second Server in one process) it returns that one, so both
// count into the series the manager serves.
func register[C prometheus.Collector](reg prometheus.Registerer, c C, errp *error) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		if *errp == nil {
			*errp = err
		}
	}
	return c
}
