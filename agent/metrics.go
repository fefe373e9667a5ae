package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"tugboat.dev/tugboat/agent/ownership"
)

// backfillCounters count the backfill passes and what they labeled.
type backfillCounters struct {
	passes   *prometheus.CounterVec
	labeled  prometheus.Counter
	failed   prometheus.Counter
	duration prometheus.Histogram
}

var backfillMetrics = backfillCounters{
	passes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tugboat_agent_backfill_passes_total",
		Help: "Backfill passes, by result (ok, or error when a list or a patch failed).",
	}, []string{"result"}),
	labeled: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tugboat_agent_backfill_labeled_total",
		Help: "Objects of a release the backfill labeled: written before the agent ran, or while its webhooks were unreachable or timed out.",
	}),
	failed: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tugboat_agent_backfill_patch_failures_total",
		Help: "Backfill label patches that failed (the next pass retries them).",
	}),
	duration: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tugboat_agent_backfill_pass_duration_seconds",
		Help:    "Duration of a backfill pass (listing metadata page by page, patching at --backfill-rate).",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
	}),
}

func init() {
	ctrlmetrics.Registry.MustRegister(backfillMetrics.passes, backfillMetrics.labeled,
		backfillMetrics.failed, backfillMetrics.duration)
}

// observe records a finished pass.
func (m backfillCounters) observe(res ownership.BackfillResult, err error, d time.Duration) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.passes.WithLabelValues(result).Inc()
	m.labeled.Add(float64(res.Labeled))
	m.failed.Add(float64(res.Failed))
	m.duration.Observe(d.Seconds())
}
