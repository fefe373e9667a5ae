package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/chartversion"
)

// envView is what the reconciler learned about one environment.
type envView struct {
	env *tugboatv1alpha1.Environment
	// converged: every target runs version, deployed (and healthy when the
	// gate requires it).
	converged bool
	version   string
	// healthySince is when the environment was first seen converged.
	healthySince time.Time
	// notReady says why the environment is not converged.
	notReady []string
	// hold is set when a person rolled a target back (its current revision
	// runs an older chart version than the revision before it) or
	// uninstalled it, or when a rollout into the environment was rolled
	// back automatically (rolloutHold).
	hold *tugboatv1alpha1.HeldEnvironment
	// suspended names the environment's Spokes with spec.suspend: nothing
	// is promoted into or out of the environment while there is one.
	suspended []string
	// targets are every target's status (the Pipeline's status lists at
	// most MaxTargetStatuses of them).
	targets []tugboatv1alpha1.TargetStatus
	// unmatched says why the environment's targets are incomplete: a
	// spokeSelector that matches no Spoke. Nothing is promoted into or
	// out of it meanwhile.
	unmatched []string
	active    string
	// stopped says why the version the environment converged on is not
	// promoted out of it: its promotion into the environment failed a
	// post step (stoppedByStep); "" when it is not stopped.
	stopped string
}

type view struct {
	envs []envView
	// problems are targets whose Spoke is unknown or not Ready, or that
	// have not reported.
	problems []string
}

// facts is what observe reads from the API for one reconcile: the Spokes
// and ReleaseHistories the targets name. summarize turns it into status
// without an API server, so the rules are unit-tested directly.
type facts struct {
	// spokes by name: nil when the Spoke is not registered.
	spokes map[string]*tugboatv1alpha1.Spoke
	// spokeErrs by name: a Spoke that could not be read.
	spokeErrs map[string]error
	// histories by ReleaseHistory name; missing when not found.
	histories map[string]*tugboatv1alpha1.ReleaseHistory
}

// observe fills status.environments from the targets' ReleaseHistories and
// returns what the decision needs. spokes are the Spokes of the Pipeline's
// namespace when a target selects them by label (listSpokes), else nil.
func (r *Reconciler) observe(ctx context.Context, p *tugboatv1alpha1.Pipeline, promos []tugboatv1alpha1.Promotion, spokes []*tugboatv1alpha1.Spoke) (*view, error) {
	f := facts{spokes: map[string]*tugboatv1alpha1.Spoke{}, spokeErrs: map[string]error{}, histories: map[string]*tugboatv1alpha1.ReleaseHistory{}}
	for _, sp := range spokes {
		f.spokes[sp.Name] = sp
	}
	for i := range p.Spec.Environments {
		res, err := ExpandTargets(p, &p.Spec.Environments[i], spokes)
		if err != nil {
			return nil, err // validate refused it already
		}
		for j := range res.Targets {
			t := &res.Targets[j].Target
			if _, ok := f.spokes[t.Spoke]; !ok {
				if _, failed := f.spokeErrs[t.Spoke]; !failed {
					sp := &tugboatv1alpha1.Spoke{}
					err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: t.Spoke}, sp)
					switch {
					case apierrors.IsNotFound(err):
						f.spokes[t.Spoke] = nil
					case err != nil:
						f.spokeErrs[t.Spoke] = err
					default:
						f.spokes[t.Spoke] = sp
					}
				}
			}
			name := HistoryName(p, t)
			rh := &tugboatv1alpha1.ReleaseHistory{}
			err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: name}, rh)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return nil, err
			default:
				f.histories[name] = rh
			}
		}
	}
	return summarize(p, f, promos, r.Now()), nil
}

// spokesOf returns the Spokes f holds (the registered ones).
func spokesOf(f facts) []*tugboatv1alpha1.Spoke {
	var out []*tugboatv1alpha1.Spoke
	for _, sp := range f.spokes {
		if sp != nil {
			out = append(out, sp)
		}
	}
	return out
}

// summarize fills status.environments and status.heldEnvironments from f
// and returns what the decision needs. It reads nothing but its arguments.
func summarize(p *tugboatv1alpha1.Pipeline, f facts, promos []tugboatv1alpha1.Promotion, now time.Time) *view {
	prev := map[string]tugboatv1alpha1.EnvironmentStatus{}
	for _, es := range p.Status.Environments {
		prev[es.Name] = es
	}
	v := &view{}
	var statuses []tugboatv1alpha1.EnvironmentStatus
	spokeSeen := map[string]string{} // spoke → problem ("" when Ready)
	for i := range p.Spec.Environments {
		env := &p.Spec.Environments[i]
		ev := envView{env: env}
		es := tugboatv1alpha1.EnvironmentStatus{Name: env.Name}
		versions := map[string]bool{}
		requireHealthy := env.Gates.RequireHealthy == nil || *env.Gates.RequireHealthy
		converged := true
		res, err := ExpandTargets(p, env, spokesOf(f))
		if err != nil {
			converged = false
			ev.unmatched = append(ev.unmatched, err.Error())
			v.problems = append(v.problems, err.Error())
		}
		for _, sel := range res.Unmatched {
			// Never silently: the environment waits, and says for what.
			msg := fmt.Sprintf("environment %s: spokeSelector %s matches no spoke in namespace %s", env.Name, sel, p.Namespace)
			converged = false
			ev.unmatched = append(ev.unmatched, msg)
			ev.notReady = append(ev.notReady, "spokeSelector "+sel+" matches no spoke")
			v.problems = append(v.problems, msg)
		}
		for j := range res.Targets {
			t := &res.Targets[j].Target
			ts := tugboatv1alpha1.TargetStatus{Spoke: t.Spoke, Selector: res.Targets[j].Selector, Namespace: t.Namespace, Release: ReleaseOf(p, t)}
			id := fmt.Sprintf("%s/%s/%s", t.Spoke, t.Namespace, ts.Release)
			spokeMsg, seen := spokeSeen[t.Spoke]
			if !seen {
				spokeMsg = spokeProblem(p.Namespace, t.Spoke, f.spokes[t.Spoke], f.spokeErrs[t.Spoke])
				spokeSeen[t.Spoke] = spokeMsg
				if spokeMsg != "" {
					v.problems = append(v.problems, spokeMsg)
				}
			}
			if sp := f.spokes[t.Spoke]; sp != nil && sp.Spec.Suspend && !containsString(ev.suspended, t.Spoke) {
				ev.suspended = append(ev.suspended, t.Spoke)
			}
			rh, found := f.histories[HistoryName(p, t)]
			switch {
			case !found:
				converged = false
				if spokeMsg == "" {
					// The Spoke is Ready, so its snapshot is recorded: the
					// release is not installed there.
					ts.Absent = true
					ev.notReady = append(ev.notReady, id+" is not installed")
				} else {
					ev.notReady = append(ev.notReady, id+" has not reported")
					v.problems = append(v.problems, fmt.Sprintf("target %s has not reported a release", id))
				}
			case rh.Status.Current == nil:
				converged = false
				ev.notReady = append(ev.notReady, id+" has not reported a revision")
			case rh.Status.Current.Status == tugboatv1alpha1.ReleaseStatusUninstalled:
				// Recorded as uninstalled: absent, like a release never
				// installed, and the environment is held (uninstallOf).
				converged = false
				ts.Absent = true
				ev.notReady = append(ev.notReady, id+" was uninstalled")
				if hold := uninstallOf(rh, now); hold != nil && ev.hold == nil {
					hold.Name = env.Name
					hold.Message = id + ": " + hold.Message
					ev.hold = hold
				}
			default:
				c := rh.Status.Current
				ts.Revision, ts.Version, ts.Health, ts.LastDeployed = c.Revision, c.ChartVersion, c.Health, c.LastDeployed
				versions[c.ChartVersion] = true
				if c.Status != tugboatv1alpha1.ReleaseStatusDeployed {
					converged = false
					ev.notReady = append(ev.notReady, fmt.Sprintf("%s is %s", id, c.Status))
				} else if requireHealthy && c.Health != tugboatv1alpha1.HealthCurrent {
					converged = false
					ev.notReady = append(ev.notReady, fmt.Sprintf("%s is %s", id, orUnknown(string(c.Health))))
				}
				if hold := rollbackOf(rh, now); hold != nil && ev.hold == nil {
					hold.Name = env.Name
					hold.Message = id + ": " + hold.Message
					ev.hold = hold
				}
			}
			es.Targets = append(es.Targets, ts)
		}
		for ver := range versions {
			es.Versions = append(es.Versions, ver)
		}
		sortVersions(es.Versions)
		ev.targets = es.Targets
		es.Targets, es.TargetCount, es.HealthyTargets = boundTargets(es.Targets)
		if len(es.Versions) != 1 {
			if len(es.Versions) > 1 {
				ev.notReady = append(ev.notReady, "targets run "+strings.Join(es.Versions, ", "))
			}
			converged = false
		}
		if converged {
			ev.converged, ev.version = true, es.Versions[0]
			ps, ok := prev[env.Name]
			if ok && ps.HealthySince != nil && len(ps.Versions) == 1 && ps.Versions[0] == ev.version {
				es.HealthySince = ps.HealthySince
			} else {
				es.HealthySince = &metav1.Time{Time: now}
			}
			ev.healthySince = es.HealthySince.Time
			if i+1 < len(p.Spec.Environments) {
				ev.stopped = stoppedByStep(promos, env.Name, ev.version)
			}
		}
		for k := range promos {
			pr := &promos[k]
			if pr.Spec.To == env.Name && !pr.Status.Phase.Terminal() {
				es.ActivePromotion, ev.active = pr.Name, pr.Name
			}
		}
		if hold := rolloutHold(promos, env.Name); hold != nil {
			ev.hold = hold
		}
		es.Versions = es.Versions[:min(len(es.Versions), tugboatv1alpha1.MaxTargetStatuses)]
		statuses = append(statuses, es)
		v.envs = append(v.envs, ev)
	}
	p.Status.Environments = statuses
	updateHolds(p, v)
	return v
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// spokeProblem describes a Spoke that is unknown, unreadable or not Ready,
// or "". sp is nil when the Spoke is not registered.
func spokeProblem(ns, name string, sp *tugboatv1alpha1.Spoke, err error) string {
	switch {
	case err != nil:
		return fmt.Sprintf("spoke %s: %v", name, err)
	case sp == nil:
		return fmt.Sprintf("spoke %s is not registered in namespace %s", name, ns)
	case sp.Spec.Suspend:
		return "" // its heartbeats are refused; the Pipeline reports it as suspended instead
	}
	if c := apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c == nil || c.Status != metav1.ConditionTrue {
		msg := "no heartbeat yet"
		if c != nil {
			msg = c.Message
		}
		return fmt.Sprintf("spoke %s is not Ready: %s", name, msg)
	}
	return ""
}

// rollbackOf reports a rollback: the current revision runs an older chart
// version than the revision before it. tugboat never promotes a downgrade,
// so such a revision was made by a person (or Flux remediation). The hold's
// since is when the rollback revision was deployed, a fact of the history
// (so a resume dated after it keeps releasing the same rollback).
func rollbackOf(rh *tugboatv1alpha1.ReleaseHistory, now time.Time) *tugboatv1alpha1.HeldEnvironment {
	revs := rh.Status.Revisions
	if len(revs) < 2 || rh.Status.Current == nil || !revs[0].Same(rh.Status.Current) {
		return nil
	}
	cur, before := revs[0], revs[1]
	if before.Life() != cur.Life() {
		return nil // a reinstall (of an older version, maybe) is no rollback
	}
	if cur.Status != tugboatv1alpha1.ReleaseStatusDeployed || chartversion.Compare(cur.ChartVersion, before.ChartVersion) >= 0 {
		return nil
	}
	since := metav1.Time{Time: now}
	switch {
	case cur.LastDeployed != nil:
		since = *cur.LastDeployed
	case cur.FirstDeployed != nil:
		since = *cur.FirstDeployed
	case rh.Status.LastEventTime != nil:
		since = *rh.Status.LastEventTime
	}
	return &tugboatv1alpha1.HeldEnvironment{
		Since:   since,
		Reason:  tugboatv1alpha1.HoldRollback,
		Version: cur.ChartVersion,
		Message: fmt.Sprintf("rolled back from %s (revision %d) to %s (revision %d)", before.ChartVersion, before.Revision, cur.ChartVersion, cur.Revision),
	}
}

// uninstallOf reports the uninstall of a release whose ReleaseHistory
// records it (current revision uninstalled). A person removed it: the
// environment is held, like after a rollback, so automation does not
// install it again behind their back. since is when the history turned
// Uninstalled (its Ready condition), a fact of the history.
func uninstallOf(rh *tugboatv1alpha1.ReleaseHistory, now time.Time) *tugboatv1alpha1.HeldEnvironment {
	c := rh.Status.Current
	if c == nil || c.Status != tugboatv1alpha1.ReleaseStatusUninstalled {
		return nil
	}
	since := metav1.Time{Time: now}
	if cond := apimeta.FindStatusCondition(rh.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); cond != nil && !cond.LastTransitionTime.IsZero() {
		since = cond.LastTransitionTime
	} else if c.LastDeployed != nil {
		since = *c.LastDeployed
	}
	return &tugboatv1alpha1.HeldEnvironment{
		Since:   since,
		Reason:  tugboatv1alpha1.HoldUninstall,
		Version: c.ChartVersion,
		Message: fmt.Sprintf("uninstalled (was %s, revision %d)", c.ChartVersion, c.Revision),
	}
}

// updateHolds records holds. The rule (docs/pipelines.md): a rollback or an
// uninstall seen in an environment holds automatic promotion into and out
// of that environment until the Pipeline carries a resume annotation for it
// dated at or after the hold's since. A hold stays when the environment
// moves on (a later upgrade, a reinstall): only a resume lifts it. A
// rollback or uninstall already resumed does not hold again; a newer one
// (since after the resume) does.
func updateHolds(p *tugboatv1alpha1.Pipeline, v *view) {
	prev := map[string]tugboatv1alpha1.HeldEnvironment{}
	for _, h := range p.Status.HeldEnvironments {
		prev[h.Name] = h
	}
	var holds []tugboatv1alpha1.HeldEnvironment
	for _, ev := range v.envs {
		h, had := prev[ev.env.Name]
		if ev.hold != nil && (!had || h.Version != ev.hold.Version || h.Reason != ev.hold.Reason) {
			h, had = *ev.hold, true
		}
		if !had || resumed(p, h.Name, h.Since.Time) {
			continue
		}
		holds = append(holds, h)
	}
	p.Status.HeldEnvironments = holds
}

func resumed(p *tugboatv1alpha1.Pipeline, env string, since time.Time) bool {
	v, ok := p.Annotations[ResumeAnnotationPrefix+env]
	if !ok {
		return false
	}
	t, err := time.Parse(time.RFC3339, v)
	return err == nil && !t.Before(since.Truncate(time.Second))
}

func held(p *tugboatv1alpha1.Pipeline, env string) *tugboatv1alpha1.HeldEnvironment {
	for i := range p.Status.HeldEnvironments {
		if p.Status.HeldEnvironments[i].Name == env {
			return &p.Status.HeldEnvironments[i]
		}
	}
	return nil
}

func sortVersions(vs []string) {
	sort.Slice(vs, func(i, j int) bool { return chartversion.Compare(vs[i], vs[j]) > 0 })
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}

// boundTargets returns at most MaxTargetStatuses of targets (those not
// running a release deployed and Current first, each group in spec order),
// how many there are, and how many report health Current.
func boundTargets(targets []tugboatv1alpha1.TargetStatus) (shown []tugboatv1alpha1.TargetStatus, count, healthy int32) {
	for _, t := range targets {
		if t.Health == tugboatv1alpha1.HealthCurrent {
			healthy++
		}
	}
	count = int32(min(len(targets), math.MaxInt32))
	if len(targets) <= tugboatv1alpha1.MaxTargetStatuses {
		return targets, count, healthy
	}
	shown = slices.Clone(targets)
	slices.SortStableFunc(shown, func(a, b tugboatv1alpha1.TargetStatus) int {
		return cmp.Compare(targetOK(a), targetOK(b))
	})
	return shown[:tugboatv1alpha1.MaxTargetStatuses], count, healthy
}

// targetOK is 1 for a target that runs a release, Current, else 0.
func targetOK(t tugboatv1alpha1.TargetStatus) int {
	if !t.Absent && t.Version != "" && t.Health == tugboatv1alpha1.HealthCurrent {
		return 1
	}
	return 0
}
