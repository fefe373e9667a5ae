package pipeline

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
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
	// rollback is set when a target's current revision runs an older chart
	// version than the revision before it (a person rolled it back).
	rollback *tugboatv1alpha1.HeldEnvironment
	active   string
}

type view struct {
	envs []envView
	// problems are targets whose Spoke is unknown or not Ready, or that
	// have not reported.
	problems []string
}

// observe fills status.environments from the targets' ReleaseHistories and
// returns what the decision needs.
func (r *Reconciler) observe(ctx context.Context, p *tugboatv1alpha1.Pipeline, promos []tugboatv1alpha1.Promotion) (*view, error) {
	now := r.Now()
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
		for j := range env.Targets {
			t := &env.Targets[j]
			ts := tugboatv1alpha1.TargetStatus{Spoke: t.Spoke, Namespace: t.Namespace, Release: ReleaseOf(p, t)}
			id := fmt.Sprintf("%s/%s/%s", t.Spoke, t.Namespace, ts.Release)
			spokeMsg, seen := spokeSeen[t.Spoke]
			if !seen {
				spokeMsg = r.spokeProblem(ctx, p.Namespace, t.Spoke)
				spokeSeen[t.Spoke] = spokeMsg
				if spokeMsg != "" {
					v.problems = append(v.problems, spokeMsg)
				}
			}
			rh := &tugboatv1alpha1.ReleaseHistory{}
			err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: HistoryName(p, t)}, rh)
			switch {
			case apierrors.IsNotFound(err):
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
			case err != nil:
				return nil, err
			case rh.Status.Current == nil || rh.Status.Current.Status == tugboatv1alpha1.ReleaseStatusUninstalled:
				converged = false
				ev.notReady = append(ev.notReady, id+" is not installed")
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
				if hold := rollbackOf(rh); hold != nil && ev.rollback == nil {
					hold.Name = env.Name
					hold.Message = id + ": " + hold.Message
					ev.rollback = hold
				}
			}
			es.Targets = append(es.Targets, ts)
		}
		for ver := range versions {
			es.Versions = append(es.Versions, ver)
		}
		sortVersions(es.Versions)
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
		}
		for k := range promos {
			pr := &promos[k]
			if pr.Spec.To == env.Name && !pr.Status.Phase.Terminal() {
				es.ActivePromotion, ev.active = pr.Name, pr.Name
			}
		}
		statuses = append(statuses, es)
		v.envs = append(v.envs, ev)
	}
	p.Status.Environments = statuses
	r.updateHolds(p, v)
	return v, nil
}

// spokeProblem describes a Spoke that is unknown or not Ready, or "".
func (r *Reconciler) spokeProblem(ctx context.Context, ns, name string) string {
	sp := &tugboatv1alpha1.Spoke{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, sp); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("spoke %s is not registered in namespace %s", name, ns)
		}
		return fmt.Sprintf("spoke %s: %v", name, err)
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
// so such a revision was made by a person (or Flux remediation).
func rollbackOf(rh *tugboatv1alpha1.ReleaseHistory) *tugboatv1alpha1.HeldEnvironment {
	revs := rh.Status.Revisions
	if len(revs) < 2 || rh.Status.Current == nil || revs[0].Revision != rh.Status.Current.Revision {
		return nil
	}
	cur, before := revs[0], revs[1]
	if cur.Status != tugboatv1alpha1.ReleaseStatusDeployed || compareVersions(cur.ChartVersion, before.ChartVersion) >= 0 {
		return nil
	}
	since := metav1.Now()
	if cur.LastDeployed != nil {
		since = *cur.LastDeployed
	}
	return &tugboatv1alpha1.HeldEnvironment{
		Since:   since,
		Version: cur.ChartVersion,
		Message: fmt.Sprintf("rolled back from %s (revision %d) to %s (revision %d)", before.ChartVersion, before.Revision, cur.ChartVersion, cur.Revision),
	}
}

// updateHolds records rollback holds; a hold ends when the Pipeline carries
// a resume annotation for the environment dated after the rollback.
func (r *Reconciler) updateHolds(p *tugboatv1alpha1.Pipeline, v *view) {
	prev := map[string]tugboatv1alpha1.HeldEnvironment{}
	for _, h := range p.Status.HeldEnvironments {
		prev[h.Name] = h
	}
	var holds []tugboatv1alpha1.HeldEnvironment
	for _, ev := range v.envs {
		if ev.rollback == nil {
			continue
		}
		h := *ev.rollback
		if old, ok := prev[h.Name]; ok && old.Version == h.Version {
			h.Since = old.Since
		}
		if resumed(p, h.Name, h.Since.Time) {
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

// compareVersions compares chart versions as semver (falling back to
// string order for versions that are not semver).
func compareVersions(a, b string) int {
	va, errA := semver.NewVersion(a)
	vb, errB := semver.NewVersion(b)
	if errA != nil || errB != nil {
		return strings.Compare(a, b)
	}
	return va.Compare(vb)
}

func sortVersions(vs []string) {
	sort.Slice(vs, func(i, j int) bool { return compareVersions(vs[i], vs[j]) > 0 })
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}
