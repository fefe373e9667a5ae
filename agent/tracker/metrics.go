package tracker

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var decodeErrors = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "tugboat_agent_release_decode_errors_total",
	Help: "Helm release records (Secrets or ConfigMaps) that could not be decoded and were skipped.",
})

func init() {
	registerMetric(decodeErrors)
}

// registerMetric registers c with controller-runtime's registry (served on
// the agent's /metrics).
func registerMetric(c prometheus.Collector) {
	ctrlmetrics.Registry.MustRegister(c)
}
