package actions

import (
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Stages of an upgrade action, in order: where the time between an action's
// arrival and the new revision goes (issue 28: the destination's upgrade
// should start within 0.3 s of the source turning healthy).
const (
	// stageConfig: the Helm configuration (the view of the spoke's APIs,
	// and the release's storage driver found by reading its history).
	stageConfig = "config"
	// stageSettle: the release read, and any pending operation waited out.
	stageSettle = "settle"
	// stageChart: the credentials and the chart (index, package or cache).
	stageChart = "chart"
	// stageRender: Helm's upgrade until it writes the pending revision
	// (the current release read again, the render, the manifest validated
	// against the API server's OpenAPI documents).
	stageRender = "render"
	// stageApply: from the pending revision to the end of the upgrade (the
	// resources applied, the revisions recorded).
	stageApply = "apply"
)

// actionStages is how long each stage of an upgrade action took.
var actionStages = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name: "tugboat_agent_action_stage_seconds",
	Help: "Time each stage of a Helm upgrade action took: config (the Helm configuration), settle (the release read, pending operations waited out), chart (credentials and chart), render (Helm until the pending revision is written: render and validation) and apply (from the pending revision to the upgrade's end).",
	// 1 ms to about 65 s.
	Buckets: prometheus.ExponentialBuckets(0.001, 2, 17),
}, []string{"stage"})

func init() {
	ctrlmetrics.Registry.MustRegister(actionStages)
}

// stageClock times the stages of one action: each mark ends the stage
// named and starts the next. It records the stages in actionStages and
// logs them (at V(1)) when done.
type stageClock struct {
	now   func() time.Time
	last  time.Time
	spent []any // name, duration pairs, for the log
}

func newStageClock(now func() time.Time) *stageClock {
	return &stageClock{now: now, last: now()}
}

// mark ends stage.
func (c *stageClock) mark(stage string) {
	t := c.now()
	d := t.Sub(c.last)
	c.last = t
	actionStages.WithLabelValues(stage).Observe(d.Seconds())
	c.spent = append(c.spent, stage, d.Round(time.Millisecond).String())
}

// log writes the stages marked.
func (c *stageClock) log(log logr.Logger) {
	if len(c.spent) > 0 {
		log.V(1).Info("Action stages", c.spent...)
	}
}

// createClock is a Helm storage driver that calls onCreate when Helm
// writes a new revision (the pending one, for an upgrade), before it is
// written: where the render stage ends.
type createClock struct {
	driver.Driver
	onCreate func()
}

// Create notes the time and writes rls.
func (d *createClock) Create(key string, rls *release.Release) error {
	if d.onCreate != nil {
		d.onCreate()
		d.onCreate = nil
	}
	return d.Driver.Create(key, rls)
}
