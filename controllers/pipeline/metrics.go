package pipeline

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// promotionsTotal counts Promotion phase transitions (shared with the
	// Promotion reconciler through PromotionPhaseTransitions).
	promotionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tugboat_promotions_total",
		Help: "Promotions entering each phase.",
	}, []string{"phase"})
	mapErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tugboat_pipeline_map_errors_total",
		Help: "Failed lookups of the Pipelines a ReleaseHistory or Spoke change concerns (each is retried).",
	})
	decisionLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tugboat_promotion_decision_seconds",
		Help:    "Time from the source environment first seen converged and healthy (after the soak time) to the Promotion's creation.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800},
	})
)

// PromotionPhaseTransitions is the counter of Promotions entering each
// phase, for the Promotion reconciler.
func PromotionPhaseTransitions() *prometheus.CounterVec { return promotionsTotal }

func init() {
	ctrlmetrics.Registry.MustRegister(promotionsTotal, decisionLatency, mapErrors)
}
