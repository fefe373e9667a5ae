package dora

import (
	"encoding/json"
	"math"
	"sort"
	"time"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// DefaultWindow is the period the figures cover unless told otherwise.
const DefaultWindow = 30 * 24 * time.Hour

// Input is what the figures of one Pipeline are computed from.
type Input struct {
	// Pipeline is the Pipeline; its status gives the targets its
	// spokeSelectors matched.
	Pipeline *tugboatv1alpha1.Pipeline
	// Histories are ReleaseHistories of the Pipeline's namespace (others
	// are ignored); a target without one has no recorded revision.
	Histories []tugboatv1alpha1.ReleaseHistory
	// Promotions are Promotions of the namespace; those of other Pipelines
	// are ignored.
	Promotions []tugboatv1alpha1.Promotion
	// Now is the end of the window.
	Now time.Time
	// Window is how far back from Now the figures look (DefaultWindow when
	// zero or negative).
	Window time.Duration
}

// Figures are the DORA figures of one Pipeline over one window. A figure
// without a sample (no deployment, no failure) is nil: it is unknown, not
// zero.
type Figures struct {
	// Namespace and Pipeline name the Pipeline.
	Namespace string `json:"namespace"`
	Pipeline  string `json:"pipeline"`
	// From and To bound the window: (From, To].
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// FirstEnvironment is where lead time starts, Environment (the last
	// environment, e.g. production) where deployments are counted.
	FirstEnvironment string `json:"firstEnvironment"`
	Environment      string `json:"environment"`

	// Deployments counts the versions that reached Environment (every
	// target running the version, healthy) within the window.
	Deployments int `json:"deployments"`
	// DeploymentFrequency is Deployments per day of the window.
	DeploymentFrequency float64 `json:"deploymentFrequencyPerDay"`

	// LeadTime summarizes, over those deployments, the time from the
	// version's first deploy in FirstEnvironment to its deployment in
	// Environment.
	LeadTime *Summary `json:"leadTime,omitempty"`
	// LeadTimeUnknown counts deployments whose first deploy in
	// FirstEnvironment is no longer recorded.
	LeadTimeUnknown int `json:"leadTimeUnknown,omitempty"`

	// Changes counts the versions whose deployment into Environment started
	// within the window and has an outcome (deployed, or failed).
	Changes int `json:"changes"`
	// ChangeFailures counts those that failed.
	ChangeFailures int `json:"changeFailures"`
	// ChangeFailureRate is ChangeFailures / Changes.
	ChangeFailureRate *float64 `json:"changeFailureRate,omitempty"`

	// TimeToRestore summarizes, over the failures within the window, the
	// time from the failure to Environment running healthy again.
	TimeToRestore *Summary `json:"timeToRestore,omitempty"`
	// Unrestored counts failures within the window after which Environment
	// has not run healthy yet.
	Unrestored int `json:"unrestored,omitempty"`
}

// Summary is the median and 90th percentile (nearest rank) of durations.
// In JSON the durations are seconds: {"count", "medianSeconds",
// "p90Seconds"}.
type Summary struct {
	Count  int
	Median time.Duration
	P90    time.Duration
}

// MarshalJSON writes the durations in seconds.
func (s Summary) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Count         int     `json:"count"`
		MedianSeconds float64 `json:"medianSeconds"`
		P90Seconds    float64 `json:"p90Seconds"`
	}{s.Count, s.Median.Seconds(), s.P90.Seconds()})
}

// summarize returns the Summary of ds, nil when empty. The p-quantile is
// the nearest rank: the ceil(p*n)-th smallest value.
func summarize(ds []time.Duration) *Summary {
	if len(ds) == 0 {
		return nil
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return ds[max(i, 0)]
	}
	return &Summary{Count: len(ds), Median: rank(0.5), P90: rank(0.9)}
}

// environment is one environment's targets.
type environment struct {
	name    string
	targets []target
}

// deployment is one version's rollout into one environment: every
// revision of the version that is not a rollback, on any target.
type deployment struct {
	version string
	// startedAt is the earliest deploy of the version on any target.
	startedAt time.Time
	// deployedAt is when the last target first ran the version healthy
	// (zero while some target has not).
	deployedAt time.Time
	// failedAt is the first failure: a revision of the version failing
	// (Helm or health), a rollback away from it, or its Promotion into the
	// environment failing (zero: none).
	failedAt time.Time
}

// deployments returns the environment's deployments, by version.
func (e *environment) deployments() map[string]*deployment {
	out := map[string]*deployment{}
	// firstHealthy[version][target] is when the target first ran the
	// version healthy.
	firstHealthy := map[string]map[int]time.Time{}
	for ti := range e.targets {
		revs := e.targets[ti].revisions
		for ri := range revs {
			r := &revs[ri]
			if r.rollbackFrom != "" {
				if d := out[r.rollbackFrom]; d != nil {
					d.fail(r.deployedAt)
				} else {
					out[r.rollbackFrom] = &deployment{version: r.rollbackFrom, failedAt: r.deployedAt}
				}
				continue
			}
			d := out[r.version]
			if d == nil {
				d = &deployment{version: r.version}
				out[r.version] = d
			}
			if d.startedAt.IsZero() || r.deployedAt.Before(d.startedAt) {
				d.startedAt = r.deployedAt
			}
			d.fail(r.failedAt)
			if !r.healthyAt.IsZero() {
				h := firstHealthy[r.version]
				if h == nil {
					h = map[int]time.Time{}
					firstHealthy[r.version] = h
				}
				if t, ok := h[ti]; !ok || r.healthyAt.Before(t) {
					h[ti] = r.healthyAt
				}
			}
		}
	}
	for v, d := range out {
		if d.startedAt.IsZero() {
			// A rollback away from a version whose deploy is no longer
			// recorded: nothing to count.
			delete(out, v)
			continue
		}
		h := firstHealthy[v]
		if len(h) < len(e.targets) {
			continue
		}
		for _, t := range h {
			if t.After(d.deployedAt) {
				d.deployedAt = t
			}
		}
	}
	return out
}

// fail records a failure at t, keeping the earliest.
func (d *deployment) fail(t time.Time) {
	if !t.IsZero() && (d.failedAt.IsZero() || t.Before(d.failedAt)) {
		d.failedAt = t
	}
}

// healthyAt reports whether every target of the environment ran healthy
// at t (an environment without targets never does).
func (e *environment) healthyAt(t time.Time) bool {
	if len(e.targets) == 0 {
		return false
	}
	for i := range e.targets {
		if !e.targets[i].healthyAt(t) {
			return false
		}
	}
	return true
}

// restoredAt returns the first time at or after t when every target ran
// healthy, and false when that has not happened.
func (e *environment) restoredAt(t time.Time) (time.Time, bool) {
	candidates := []time.Time{t}
	for i := range e.targets {
		candidates = e.targets[i].healthyAfter(t, candidates)
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].Before(candidates[j]) })
	for _, c := range candidates {
		if e.healthyAt(c) {
			return c, true
		}
	}
	return time.Time{}, false
}

// Compute returns the figures of in.Pipeline.
func Compute(in Input) Figures {
	window := in.Window
	if window <= 0 {
		window = DefaultWindow
	}
	p := in.Pipeline
	f := Figures{Namespace: p.Namespace, Pipeline: p.Name, From: in.Now.Add(-window), To: in.Now}
	envs := environments(p, in.Histories)
	if len(envs) == 0 {
		return f
	}
	first, last := &envs[0], &envs[len(envs)-1]
	f.FirstEnvironment, f.Environment = first.name, last.name
	inWindow := func(t time.Time) bool { return !t.IsZero() && t.After(f.From) && !t.After(f.To) }

	prod := last.deployments()
	failPromotions(prod, in.Promotions, p, last.name)
	dev := first.deployments()

	var leads, restores []time.Duration
	for _, v := range sortedVersions(prod) {
		d := prod[v]
		if inWindow(d.deployedAt) {
			f.Deployments++
			if s := dev[v]; s != nil && !s.startedAt.After(d.deployedAt) {
				leads = append(leads, d.deployedAt.Sub(s.startedAt))
			} else {
				f.LeadTimeUnknown++
			}
		}
		if inWindow(d.startedAt) && (!d.deployedAt.IsZero() || !d.failedAt.IsZero()) {
			f.Changes++
			if !d.failedAt.IsZero() {
				f.ChangeFailures++
			}
		}
		if inWindow(d.failedAt) {
			if at, ok := last.restoredAt(d.failedAt); ok {
				restores = append(restores, at.Sub(d.failedAt))
			} else {
				f.Unrestored++
			}
		}
	}
	f.DeploymentFrequency = float64(f.Deployments) / (float64(window) / float64(24*time.Hour))
	f.LeadTime = summarize(leads)
	f.TimeToRestore = summarize(restores)
	if f.Changes > 0 {
		r := float64(f.ChangeFailures) / float64(f.Changes)
		f.ChangeFailureRate = &r
	}
	return f
}

// failPromotions records the failure of every Failed Promotion of p into
// env whose version started deploying there: a Promotion that failed
// before anything was deployed (rejected, the strategy failed) changed
// nothing in the environment.
func failPromotions(ds map[string]*deployment, promotions []tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env string) {
	for i := range promotions {
		pr := &promotions[i]
		if pr.Namespace != p.Namespace || pr.Spec.Pipeline != p.Name || pr.Spec.To != env ||
			pr.Status.Phase != tugboatv1alpha1.PromotionFailed || pr.Status.CompletedAt == nil {
			continue
		}
		if d := ds[pr.Spec.Version]; d != nil && !d.startedAt.After(pr.Status.CompletedAt.Time) {
			d.fail(pr.Status.CompletedAt.Time)
		}
	}
}

func sortedVersions(ds map[string]*deployment) []string {
	vs := make([]string, 0, len(ds))
	for v := range ds {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	return vs
}

// environments resolves the Pipeline's environments to their targets'
// histories. The targets are those the Pipeline's status lists (which
// include the Spokes a spokeSelector matched); an environment the status
// does not list yet uses the targets its spec names.
func environments(p *tugboatv1alpha1.Pipeline, histories []tugboatv1alpha1.ReleaseHistory) []environment {
	byName := map[string]*tugboatv1alpha1.ReleaseHistory{}
	for i := range histories {
		if histories[i].Namespace == p.Namespace {
			byName[histories[i].Name] = &histories[i]
		}
	}
	status := map[string]*tugboatv1alpha1.EnvironmentStatus{}
	for i := range p.Status.Environments {
		status[p.Status.Environments[i].Name] = &p.Status.Environments[i]
	}
	out := make([]environment, 0, len(p.Spec.Environments))
	for _, env := range p.Spec.Environments {
		e := environment{name: env.Name}
		var names []string
		if es := status[env.Name]; es != nil && len(es.Targets) > 0 {
			for _, t := range es.Targets {
				names = append(names, tugboatv1alpha1.ReleaseHistoryName(t.Spoke, t.Namespace, t.Release))
			}
		} else {
			for _, t := range env.Targets {
				if t.Spoke == "" {
					continue // a spokeSelector the controller has not expanded yet
				}
				release := t.Release
				if release == "" {
					release = p.Spec.Release
				}
				names = append(names, tugboatv1alpha1.ReleaseHistoryName(t.Spoke, t.Namespace, release))
			}
		}
		for _, n := range names {
			e.targets = append(e.targets, newTarget(n, byName[n]))
		}
		out = append(out, e)
	}
	return out
}
