package dora

import (
	"sort"
	"time"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/chartversion"
)

// Event reasons the agent records when a revision's health changes.
const (
	reasonRolloutComplete = "RolloutComplete"
	reasonRolloutFailed   = "RolloutFailed"
	reasonProgressing     = "Progressing"
	reasonHealthUnknown   = "HealthUnknown"
)

// transition is a change of a target's health: from at on, the target is
// healthy (every workload Current) or not.
type transition struct {
	at      time.Time
	healthy bool
}

// revision is what one Helm revision of one target tells.
type revision struct {
	number  int32
	version string
	// deployedAt is when Helm deployed the revision (lastDeployed).
	deployedAt time.Time
	// rollbackFrom is the version of the previous revision when this one
	// runs an older chart version (a rollback), else empty.
	rollbackFrom string
	// healthyAt is when the revision first ran healthy (zero: never).
	healthyAt time.Time
	// failedAt is when the revision first failed (zero: never).
	failedAt time.Time
	// transitions are the revision's health changes, oldest first; the
	// first is "not healthy" at deployedAt.
	transitions []transition
}

// target is one target's recorded revisions, oldest first.
type target struct {
	name      string
	revisions []revision
}

// newTarget reads a ReleaseHistory (nil: none recorded yet).
func newTarget(name string, rh *tugboatv1alpha1.ReleaseHistory) target {
	t := target{name: name}
	if rh == nil {
		return t
	}
	revs := append([]tugboatv1alpha1.Revision(nil), rh.Status.Revisions...)
	// Oldest first: by installation (a reinstall after an uninstall numbers
	// revisions from 1 again), then by revision.
	sort.Slice(revs, func(i, j int) bool {
		if revs[i].Life() != revs[j].Life() {
			return revs[i].Life() < revs[j].Life()
		}
		return revs[i].Revision < revs[j].Revision
	})
	prev, life := "", int32(0)
	for i := range revs {
		r, ok := readRevision(&revs[i])
		if !ok {
			continue
		}
		if revs[i].Life() != life {
			// A reinstall, of whatever version, is no rollback.
			prev, life = "", revs[i].Life()
		}
		if prev != "" && chartversion.Compare(prev, r.version) > 0 {
			r.rollbackFrom = prev
		}
		prev = r.version
		t.revisions = append(t.revisions, r)
	}
	return t
}

// readRevision derives a revision's deploy time and health transitions. A
// revision with no deploy time (neither lastDeployed nor, for the first
// revision, firstDeployed, nor any event) cannot be placed and is skipped.
func readRevision(in *tugboatv1alpha1.Revision) (revision, bool) {
	r := revision{number: in.Revision, version: in.ChartVersion}
	events := append([]tugboatv1alpha1.ReleaseEvent(nil), in.Events...)
	sort.SliceStable(events, func(i, j int) bool { return events[i].Time.Before(&events[j].Time) })
	switch {
	case in.LastDeployed != nil:
		r.deployedAt = in.LastDeployed.Time
	case in.Revision == 1 && in.FirstDeployed != nil:
		r.deployedAt = in.FirstDeployed.Time
	case len(events) > 0:
		r.deployedAt = events[0].Time.Time
	default:
		return r, false
	}
	r.transitions = []transition{{at: r.deployedAt, healthy: false}}
	at := func(t time.Time) time.Time {
		if t.Before(r.deployedAt) {
			return r.deployedAt
		}
		return t
	}
	sawHealth := false
	for _, e := range events {
		switch e.Reason {
		case reasonRolloutComplete:
			r.transitions = append(r.transitions, transition{at: at(e.Time.Time), healthy: true})
			if r.healthyAt.IsZero() {
				r.healthyAt = at(e.Time.Time)
			}
		case reasonRolloutFailed:
			r.transitions = append(r.transitions, transition{at: at(e.Time.Time), healthy: false})
			if r.failedAt.IsZero() {
				r.failedAt = at(e.Time.Time)
			}
		case reasonProgressing, reasonHealthUnknown:
			r.transitions = append(r.transitions, transition{at: at(e.Time.Time), healthy: false})
		default:
			continue
		}
		sawHealth = true
	}
	last := r.deployedAt
	if len(events) > 0 {
		last = at(events[len(events)-1].Time.Time)
	}
	// Without health events (dropped, or a source that sends none) the
	// revision's last known health stands from its deploy time on.
	if !sawHealth {
		switch in.Health {
		case tugboatv1alpha1.HealthCurrent:
			r.transitions = append(r.transitions, transition{at: r.deployedAt, healthy: true})
			r.healthyAt = r.deployedAt
		case tugboatv1alpha1.HealthFailed:
			r.failedAt = last
		}
	}
	switch in.Status {
	case tugboatv1alpha1.ReleaseStatusFailed:
		// Helm's upgrade itself failed.
		if r.failedAt.IsZero() || r.deployedAt.Before(r.failedAt) {
			r.failedAt = r.deployedAt
		}
	case tugboatv1alpha1.ReleaseStatusUninstalled, tugboatv1alpha1.ReleaseStatusUninstalling:
		r.transitions = append(r.transitions, transition{at: last, healthy: false})
	}
	return r, true
}

// healthyAt reports whether the target ran healthy at t: the newest
// revision deployed at or before t, and its newest transition at or before
// t, say. Before its first recorded revision a target is not healthy.
func (t *target) healthyAt(at time.Time) bool {
	healthy := false
	for i := range t.revisions {
		r := &t.revisions[i]
		if r.deployedAt.After(at) {
			break
		}
		for _, tr := range r.transitions {
			if tr.at.After(at) {
				break
			}
			healthy = tr.healthy
		}
	}
	return healthy
}

// healthyAfter appends the times after t at which the target turned
// healthy: the only times at which its environment can turn healthy.
func (t *target) healthyAfter(at time.Time, out []time.Time) []time.Time {
	for i := range t.revisions {
		for _, tr := range t.revisions[i].transitions {
			if tr.healthy && tr.at.After(at) {
				out = append(out, tr.at)
			}
		}
	}
	return out
}
