package reporter

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

const metricsSubsystem = "tugboat_agent_reporter"

// metricVecs are the reporter's collectors, labeled by spoke so that
// several Reporters (as in tests) share them.
type metricVecs struct {
	eventsQueued  *prometheus.CounterVec
	eventsSent    *prometheus.CounterVec
	eventsFailed  *prometheus.CounterVec
	eventsDropped *prometheus.CounterVec
	queueDepth    *prometheus.GaugeVec
	batches       *prometheus.CounterVec
	statePosts    *prometheus.CounterVec
	lastContact   *prometheus.GaugeVec
}

var (
	vecsOnce sync.Once
	vecs     *metricVecs
)

// sharedVecs creates the collectors and registers them in controller-runtime's
// registry, once per process.
func sharedVecs() *metricVecs {
	vecsOnce.Do(func() {
		spoke := []string{"spoke"}
		v := &metricVecs{
			eventsQueued: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: metricsSubsystem + "_events_queued_total",
				Help: "Events queued for delivery to the hub.",
			}, spoke),
			eventsSent: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: metricsSubsystem + "_events_sent_total",
				Help: "Events the hub accepted (2xx), duplicates included.",
			}, spoke),
			eventsFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: metricsSubsystem + "_events_failed_total",
				Help: "Events given up on: rejected by the hub (400, 413) or invalid before sending. A state resync covers them.",
			}, spoke),
			eventsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: metricsSubsystem + "_events_dropped_total",
				Help: "Oldest events dropped because the outbox was full. A state resync covers them.",
			}, spoke),
			queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Name: metricsSubsystem + "_queue_depth",
				Help: "Events in the outbox, waiting for delivery.",
			}, spoke),
			batches: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: metricsSubsystem + "_batches_total",
				Help: "Event batch requests by result: the HTTP status code, or \"error\" when no response arrived.",
			}, []string{"spoke", "code"}),
			statePosts: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: metricsSubsystem + "_state_posts_total",
				Help: "State snapshot (heartbeat) requests by result: the HTTP status code, or \"error\".",
			}, []string{"spoke", "code"}),
			lastContact: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Name: metricsSubsystem + "_last_contact_timestamp_seconds",
				Help: "Unix time of the last request the hub accepted (2xx).",
			}, spoke),
		}
		v.eventsQueued = register(v.eventsQueued)
		v.eventsSent = register(v.eventsSent)
		v.eventsFailed = register(v.eventsFailed)
		v.eventsDropped = register(v.eventsDropped)
		v.queueDepth = register(v.queueDepth)
		v.batches = register(v.batches)
		v.statePosts = register(v.statePosts)
		v.lastContact = register(v.lastContact)
		vecs = v
	})
	return vecs
}

// register registers c in controller-runtime's registry, or returns the
// equal collector already registered there. Any other registration error
// leaves c working but unexported (a library does not panic over metrics).
func register[C prometheus.Collector](c C) C {
	err := ctrlmetrics.Registry.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	return c
}

// reporterMetrics are one Reporter's children of the shared vectors.
type reporterMetrics struct {
	eventsQueued  prometheus.Counter
	eventsSent    prometheus.Counter
	eventsFailed  prometheus.Counter
	eventsDropped prometheus.Counter
	queueDepth    prometheus.Gauge
	lastContact   prometheus.Gauge
	batches       *prometheus.CounterVec
	statePosts    *prometheus.CounterVec
	spoke         string
}

func newReporterMetrics(spoke string) *reporterMetrics {
	v := sharedVecs()
	return &reporterMetrics{
		eventsQueued:  v.eventsQueued.WithLabelValues(spoke),
		eventsSent:    v.eventsSent.WithLabelValues(spoke),
		eventsFailed:  v.eventsFailed.WithLabelValues(spoke),
		eventsDropped: v.eventsDropped.WithLabelValues(spoke),
		queueDepth:    v.queueDepth.WithLabelValues(spoke),
		lastContact:   v.lastContact.WithLabelValues(spoke),
		batches:       v.batches,
		statePosts:    v.statePosts,
		spoke:         spoke,
	}
}
