package pipelineapi

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests     *prometheus.CounterVec
	authFailures *prometheus.CounterVec
	rateLimited  prometheus.Counter
}

// newMetrics registers the API's metrics with reg, reusing collectors a
// previous handler registered there (the hub may be assembled more than
// once in one process).
func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tugboat_pipelineapi_requests_total",
			Help: "Requests to the hub's pipeline API, by endpoint (promotions, approvals, steps, other) and HTTP status code.",
		}, []string{"endpoint", "code"})),
		authFailures: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tugboat_pipelineapi_auth_failures_total",
			Help: "Requests to the hub's pipeline API refused as not authenticated, by reason.",
		}, []string{"reason"})),
		rateLimited: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tugboat_pipelineapi_rate_limited_total",
			Help: "Requests to the hub's pipeline API answered 429: their client exceeded its rate limit.",
		}, nil)).WithLabelValues(),
	}
}

func register(reg prometheus.Registerer, c *prometheus.CounterVec) *prometheus.CounterVec {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing
			}
		}
	}
	return c
}
