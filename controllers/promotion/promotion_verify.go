package promotion

// The Verifying phase: how far each destination target got, and what the
// agents' actions and the targets' Flux HelmReleases report.

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// verifying succeeds once every target reports the version deployed and
// healthy, and fails at the timeout naming the laggards.
func (r *Reconciler) verifying(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (ctrl.Result, error) {
	if hasRollout(pr) {
		return r.rollout(ctx, pr, p, env)
	}
	laggards, stalled, err := r.progress(ctx, pr, p, env)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(laggards) == 0 {
		if res, wait, err := r.postSteps(ctx, pr, p, env, r.failStep(pr)); wait || err != nil {
			return res, err
		}
		r.finish(pr, tugboatv1alpha1.PromotionSucceeded, tugboatv1alpha1.SucceededReason,
			fmt.Sprintf("every target of %s runs %s, healthy", pr.Spec.To, pr.Spec.Version))
		return ctrl.Result{}, nil
	}
	if msg := failedAction(targetsOf(ctx)); msg != "" {
		r.finish(pr, tugboatv1alpha1.PromotionFailed, tugboatv1alpha1.StrategyFailedReason, msg)
		return ctrl.Result{}, nil
	}
	if len(stalled) > 0 {
		// helm-controller gave up on the version: waiting for the timeout
		// would change nothing.
		r.finish(pr, tugboatv1alpha1.PromotionFailed, tugboatv1alpha1.StrategyFailedReason, strings.Join(stalled, "; "))
		return ctrl.Result{}, nil
	}
	if res, done := r.checkTimeout(ctx, pr, p, env); done {
		return res, nil
	}
	return ctrl.Result{RequeueAfter: r.remaining(pr, p)}, nil
}

// progress fills the Promotion's targets (targetsOf) and returns the targets not done yet, and
// those among them whose Flux HelmRelease stalled on the version
// (helmReleaseProgress).
func (r *Reconciler) progress(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (laggards, stalled []string, err error) {
	_, laggards, stalled, err = r.observe(ctx, pr, p, env)
	return laggards, stalled, err
}

// observation is one destination target as observe saw it.
type observation struct {
	// status is the target in the reconcile's working set (targetsOf).
	status *target
	// current is what its ReleaseHistory reports now; nil when none.
	current *tugboatv1alpha1.RevisionSummary
}

// observe is progress, also returning each target's observation, in the
// order of the working set. With a rollout, only a target whose wave was
// acted on (its rollout record) gets a helm action.
func (r *Reconciler) observe(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (obs []observation, laggards, stalled []string, err error) {
	set := targetsOf(ctx)
	prev := map[string]target{}
	for _, t := range set.items {
		prev[t.key()] = t
	}
	resolved, err := r.promotionTargets(ctx, pr, p, env)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(resolved) == 0 {
		return nil, []string{"every target of " + pr.Spec.To + " this promotion started with left the environment"}, nil, nil
	}
	var targets []target
	var currents []*tugboatv1alpha1.RevisionSummary
	for _, rt := range resolved {
		t := rt.Target
		rel := pipeline.ReleaseOf(p, &t)
		id := t.Spoke + "/" + t.Namespace + "/" + rel
		ts := target{Spoke: t.Spoke, Namespace: t.Namespace, Release: rel}
		rh := &tugboatv1alpha1.ReleaseHistory{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: pipeline.HistoryName(p, &t)}, rh)
		switch {
		case apierrors.IsNotFound(err):
			ts.Message = "no release reported"
		case err != nil:
			return nil, nil, nil, err
		case rh.Status.Current != nil:
			c := rh.Status.Current
			ts.Version, ts.Revision, ts.Health = c.ChartVersion, c.Revision, c.Health
			ts.Done = c.ChartVersion == pr.Spec.Version && c.Status == tugboatv1alpha1.ReleaseStatusDeployed && c.Health == tugboatv1alpha1.HealthCurrent
			if !ts.Done {
				ts.Message = fmt.Sprintf("at %s (%s, %s)", c.ChartVersion, c.Status, orUnknown(string(c.Health)))
				if c.HealthReason != "" && c.ChartVersion == pr.Spec.Version {
					ts.Message += ": " + clip.String(c.HealthReason, 200)
				}
				if msg, failed := helmReleaseProgress(rh, pr.Spec.Version); failed {
					ts.Message = msg
					stalled = append(stalled, id+": "+msg)
				} else if msg != "" {
					ts.Message = clip.String(joinMessages(ts.Message, msg), 1024)
				}
			}
		}
		// A done target that reports another revision is done anew: its
		// soak starts again.
		if old, ok := prev[id]; ok && old.Done == ts.Done && (!ts.Done || old.Revision == ts.Revision) && old.LastTransitionTime != nil {
			ts.LastTransitionTime = old.LastTransitionTime
		} else {
			now := metav1.NewTime(r.Now())
			ts.LastTransitionTime = &now
		}
		ts.Rollout = prev[id].Rollout
		ts.HelmTest = prev[id].HelmTest
		if pr.StrategyType() == tugboatv1alpha1.StrategyHelm && (!hasRollout(pr) || ts.Rollout != nil) {
			r.trackAction(pr, prev[id].Action, &ts)
		}
		if !ts.Done {
			laggards = append(laggards, id+" "+orDefault(ts.Message, "not reporting"))
		}
		targets = append(targets, ts)
		currents = append(currents, rh.Status.Current)
	}
	set.items = targets
	for i := range targets {
		obs = append(obs, observation{status: &set.items[i], current: currents[i]})
	}
	return obs, laggards, stalled, nil
}

// helmReleaseProgress says what the Flux HelmRelease managing a target
// that does not run the version healthy yet reports (the ReleaseHistory's
// status.helmRelease, from the spoke's agent): failed is true when
// helm-controller stalled (e.g. RetriesExceeded) on the version itself
// (status.lastAttemptedRevision), and msg then gives its own reason and
// message. Otherwise msg tells why the version may not arrive (a
// suspended HelmRelease, a failed attempt helm-controller will retry), or
// is empty.
func helmReleaseProgress(rh *tugboatv1alpha1.ReleaseHistory, version string) (msg string, failed bool) {
	hr := rh.Status.HelmRelease
	if hr == nil {
		return "", false
	}
	name := "HelmRelease"
	if ref := rh.Spec.HelmRelease; ref != nil {
		name += " " + cmp.Or(ref.Namespace, rh.Spec.Namespace) + "/" + ref.Name
	}
	words := orDefault(hr.Reason, "no reason given") + suffix(hr.Message)
	switch {
	case hr.Stalled && hr.LastAttemptedRevision == version:
		return clip.String(fmt.Sprintf("%s stalled on %s: %s", name, version, words), 1024), true
	case hr.Suspended:
		return name + " is suspended: helm-controller applies nothing until it is resumed", false
	case hr.Stalled:
		return clip.String(fmt.Sprintf("%s is stalled (last attempted %s): %s", name, orUnknown(hr.LastAttemptedRevision), words), 512), false
	case hr.Ready == metav1.ConditionFalse:
		return clip.String(fmt.Sprintf("%s is not ready: %s", name, words), 512), false
	}
	return "", false
}

// trackAction keeps the target's agent action of the helm strategy (prev,
// when it is this Promotion's), or queues it Pending, and says in the
// target's message what an unfinished target waits for. The receiver
// (controllers/promotion/actions) moves the action on when the spoke's
// agent fetches it and reports its outcome.
func (r *Reconciler) trackAction(pr *tugboatv1alpha1.Promotion, prev *tugboatv1alpha1.TargetAction, ts *target) {
	id := wire.NewActionID(string(pr.UID), ts.Spoke, ts.Namespace, ts.Release)
	if prev != nil && prev.ID == id {
		ts.Action = prev.DeepCopy()
	} else {
		now := metav1.NewTime(r.Now())
		ts.Action = &tugboatv1alpha1.TargetAction{ID: id, Phase: tugboatv1alpha1.ActionPending, LastUpdateTime: &now}
	}
	if ts.Done {
		return
	}
	switch ts.Action.Phase {
	case tugboatv1alpha1.ActionPending:
		ts.Message = clip.String(joinMessages("action not fetched by the agent (is it running?)", ts.Message), 1024)
	case tugboatv1alpha1.ActionDelivered:
		ts.Message = clip.String(joinMessages("action delivered to the agent, waiting for its outcome", ts.Message), 1024)
	}
}

// failedAction returns why the Promotion failed when the agent of a target
// that is not done refused or failed its action, else "".
func failedAction(set *targetSet) string {
	for _, t := range set.items {
		if t.Done || t.Action == nil {
			continue
		}
		target, reason := t.Spoke+"/"+t.Namespace+"/"+t.Release, orDefault(t.Action.Message, "no reason given")
		switch t.Action.Phase {
		case tugboatv1alpha1.ActionRefused:
			return target + " refused the action: " + reason
		case tugboatv1alpha1.ActionFailed:
			return "the action failed on " + target + ": " + reason
		}
	}
	return ""
}
