package admission

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics counts the webhooks' decisions and measures their latency:
//
//	tugboat_agent_admission_duration_seconds{webhook}          histogram
//	tugboat_agent_admission_decisions_total{webhook,result}    counter
//
// webhook is the path without its slash (mutate-ownership, ...), result a
// Result. A nil *Metrics records nothing.
type Metrics struct {
	latency   *prometheus.HistogramVec
	decisions *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them with reg (none when
// nil). Collectors already registered there by an earlier call are reused,
// so several servers in one process share them.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tugboat_agent_admission_duration_seconds",
		Help:    "Time to answer an admission review, from request to response written.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 4, 9), // 50µs … 3.3s
	}, []string{"webhook"})
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tugboat_agent_admission_decisions_total",
		Help: "Admission reviews answered, by webhook and result (labeled, skipped, observed, error, invalid).",
	}, []string{"webhook", "result"})
	if reg != nil {
		var err error
		if latency, err = register(reg, latency); err != nil {
			return nil, err
		}
		if decisions, err = register(reg, decisions); err != nil {
			return nil, err
		}
	}
	return &Metrics{latency: latency, decisions: decisions}, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

func (m *Metrics) observe(webhook string, r Result, d time.Duration) {
	if m == nil {
		return
	}
	m.latency.WithLabelValues(webhook).Observe(d.Seconds())
	m.decisions.WithLabelValues(webhook, string(r)).Inc()
}

// Decisions returns how many decisions with result the webhook (a path
// without its slash) counted.
func (m *Metrics) Decisions(webhook string, r Result) float64 {
	if m == nil {
		return 0
	}
	c, err := m.decisions.GetMetricWithLabelValues(webhook, string(r))
	if err != nil {
		return 0
	}
	return counterValue(c)
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil || m.Counter == nil {
		return 0
	}
	return m.Counter.GetValue()
}
