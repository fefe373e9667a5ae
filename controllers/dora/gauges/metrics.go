package gauges

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"tugboat.dev/tugboat/controllers/dora"
)

// Gauge names, as docs/hub.md lists them.
const (
	DeploymentsName         = "tugboat_dora_deployments"
	DeploymentFrequencyName = "tugboat_dora_deployment_frequency_per_day"
	LeadTimeName            = "tugboat_dora_lead_time_seconds"
	ChangeFailureRatioName  = "tugboat_dora_change_failure_ratio"
	TimeToRestoreName       = "tugboat_dora_time_to_restore_seconds"
	WindowName              = "tugboat_dora_window_seconds"
)

var (
	labels         = []string{"namespace", "pipeline"}
	quantileLabels = []string{"namespace", "pipeline", "quantile"}

	deployments = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: DeploymentsName,
		Help: "Versions that reached the Pipeline's last environment (every target running them, healthy) within the window.",
	}, labels)
	frequency = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: DeploymentFrequencyName,
		Help: "DORA deployment frequency: deployments into the Pipeline's last environment per day of the window.",
	}, labels)
	leadTime = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: LeadTimeName,
		Help: "DORA lead time: from a version's first deploy in the first environment to its deployment in the last, over the window's deployments (quantile 0.5 and 0.9; absent without a deployment).",
	}, quantileLabels)
	failureRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: ChangeFailureRatioName,
		Help: "DORA change-failure rate: share of the window's deployments into the last environment that failed health, failed their Promotion or were rolled back (absent without a deployment).",
	}, labels)
	timeToRestore = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: TimeToRestoreName,
		Help: "DORA time to restore: from a failure in the last environment to every target running healthy again, over the window's failures (quantile 0.5 and 0.9; absent without a restored failure).",
	}, quantileLabels)
	window = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: WindowName,
		Help: "The period the DORA figures cover, in seconds.",
	}, labels)
)

func init() {
	ctrlmetrics.Registry.MustRegister(deployments, frequency, leadTime, failureRatio, timeToRestore, window)
}

// set exports f; a figure without a sample is removed rather than set to
// zero, which would read as a perfect score.
func set(f *dora.Figures) {
	l := prometheus.Labels{"namespace": f.Namespace, "pipeline": f.Pipeline}
	deployments.With(l).Set(float64(f.Deployments))
	frequency.With(l).Set(f.DeploymentFrequency)
	window.With(l).Set(f.To.Sub(f.From).Seconds())
	if f.ChangeFailureRate != nil {
		failureRatio.With(l).Set(*f.ChangeFailureRate)
	} else {
		failureRatio.Delete(l)
	}
	setSummary(leadTime, l, f.LeadTime)
	setSummary(timeToRestore, l, f.TimeToRestore)
}

func setSummary(g *prometheus.GaugeVec, l prometheus.Labels, s *dora.Summary) {
	if s == nil {
		g.DeletePartialMatch(l)
		return
	}
	g.WithLabelValues(l["namespace"], l["pipeline"], "0.5").Set(s.Median.Seconds())
	g.WithLabelValues(l["namespace"], l["pipeline"], "0.9").Set(s.P90.Seconds())
}

// remove deletes every gauge of a Pipeline.
func remove(namespace, pipeline string) {
	l := prometheus.Labels{"namespace": namespace, "pipeline": pipeline}
	for _, g := range []*prometheus.GaugeVec{deployments, frequency, leadTime, failureRatio, timeToRestore, window} {
		g.DeletePartialMatch(l)
	}
}
