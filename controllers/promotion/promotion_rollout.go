package promotion

// Rollouts in waves (issue 24): a Promotion whose destination environment
// had a rollout when it started (status.rollout.resolved) acts wave by
// wave. The wave planner (controllers/promotion/rollout) says which wave is
// current, which of its targets to act on now, which qualified on the
// revision their action produced, and whether the failure budget is spent;
// this file acts on that, and writes status.rollout from it.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/rollout"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

// hasRollout reports whether pr rolls out in waves: its destination had a
// rollout when it started.
func hasRollout(pr *tugboatv1alpha1.Promotion) bool {
	return pr.Status.Rollout != nil && pr.Status.Rollout.Resolved != nil
}

// resolveRollout copies env's rollout into status.rollout.resolved as pr
// starts, so that later edits of the Pipeline never reshape it. Without a
// rollout, status.rollout stays empty and the Promotion acts on every
// target at once, as it always did.
func resolveRollout(pr *tugboatv1alpha1.Promotion, env *tugboatv1alpha1.Environment) {
	pr.Status.Rollout = nil
	if env.Rollout != nil {
		pr.Status.Rollout = &tugboatv1alpha1.RolloutStatus{
			Phase:    tugboatv1alpha1.RolloutProgressing,
			Resolved: env.Rollout.DeepCopy(),
		}
	}
}

// errPlan marks an error of the planner: the rollout cannot be planned
// over these targets (a canary that selects none of them, every target
// gone). Retrying changes nothing.
var errPlan = errors.New("rollout")

// rollout is the Running, Verifying and Paused phases of a Promotion with
// a rollout. Each reconcile plans the rollout from what the targets report
// now, then:
//   - a person's request (status.rolloutRequest) pauses or resumes it
//     (promotion_steer.go);
//   - a paused rollout stays paused (its counts kept true), unless the
//     budget is spent while a person paused it;
//   - a spent budget pauses it (onFailure Pause), or stops it and rolls
//     back what it changed (onFailure Rollback: promotion_rollback.go);
//   - the current wave's targets not acted on yet are acted on, in one
//     strategy call, and recorded (wave, time, baseline revision);
//   - every wave qualified: Succeeded. Every target acted on: Verifying.
//
// A wave that qualifies makes the next one current in the same plan, so
// its action goes out in the reconcile that saw the last report. The
// Pipeline's timeout does not bound a rollout: the progress deadlines of
// its waves do. The reconcile is requeued when the plan changes by itself
// (a soak ends, a deadline passes).
func (r *Reconciler) rollout(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (ctrl.Result, error) {
	// Acting is a side effect planned from the targets' rollout records
	// (read live, loadTargets) and status.rollout: never
	// plan from a cached copy that lags behind the last status write (a
	// reconcile queued by a report while the previous one acted would act
	// on the canary again; seen in TestReconciler_pausesARolloutWhoseCanaryFails
	// and TestReconciler_startsTheNextWaveOnceTheCanarySoaked under load).
	if stale, err := r.staleCopy(ctx, pr); err != nil || stale {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, err
	}
	now := r.Now()
	if pr.Status.Phase == tugboatv1alpha1.PromotionRollingBack {
		return r.rollingBack(ctx, pr, p, env, now)
	}
	obs, err := r.observeRollout(ctx, pr, p, env)
	var plan *rollout.Plan
	if err == nil {
		plan, err = r.planRollout(ctx, pr, p, obs, now)
	}
	if errors.Is(err, errPlan) {
		r.finish(pr, tugboatv1alpha1.PromotionFailed, tugboatv1alpha1.InvalidSpecReason, err.Error())
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if steer(pr, plan, obs, now) {
		if plan, err = r.planRollout(ctx, pr, p, obs, now); err != nil {
			return ctrl.Result{}, err
		}
	}
	spent := plan.Budget.Spent()
	switch paused := pr.Status.Phase == tugboatv1alpha1.PromotionPaused; {
	case paused && (!spent || pr.Status.Rollout.PausedBy == ""):
		// Paused by a person, or by the budget: its counts kept true, the
		// targets acted on still verified, nothing more acted on.
		recordPlan(pr, plan, obs, now)
		return ctrl.Result{}, nil
	case spent && rollsBack(pr):
		return r.startRollback(ctx, pr, p, env, plan, obs, now)
	case spent:
		r.pause(pr, plan, obs, now)
		return ctrl.Result{}, nil
	}
	if len(plan.ActNow) > 0 {
		// A helmTest step with waves Each tests the waves before the
		// current one first (step_helmtest_waves.go).
		if res, stop, err := r.helmTestBetweenWaves(ctx, pr, p, env, plan, obs, now); stop || err != nil {
			if pr.Status.Rollout.Phase == tugboatv1alpha1.RolloutProgressing {
				recordPlan(pr, plan, obs, now)
			}
			return res, err
		}
		if res, stop := r.actOnWave(ctx, pr, p, env, plan, obs, now); stop {
			return res, nil
		}
		if plan, err = r.planRollout(ctx, pr, p, obs, now); err != nil {
			return ctrl.Result{}, err
		}
	}
	recordPlan(pr, plan, obs, now)
	if plan.Done() {
		if res, wait, err := r.postSteps(ctx, pr, p, env, r.postStepFailed(ctx, pr, p, env, plan, obs, now)); wait || err != nil {
			return res, err
		}
	}
	return r.advance(pr, plan, now), nil
}

// observeRollout reads what every target of the environment reports now
// (observe; with a rollout, promotionTargets gives them all, joiners
// included). An environment left without targets is an error wrapping
// errPlan.
func (r *Reconciler) observeRollout(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) ([]observation, error) {
	obs, _, _, err := r.observe(ctx, pr, p, env)
	if err != nil {
		return nil, err
	}
	if len(obs) == 0 {
		return nil, fmt.Errorf("%w of %s into %s: the environment has no target left", errPlan, pr.Spec.Version, pr.Spec.To)
	}
	return obs, nil
}

// planRollout asks the planner where the rollout stands. Its own errors
// (a rollout that cannot be planned over these targets) wrap errPlan.
func (r *Reconciler) planRollout(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, obs []observation, now time.Time) (*rollout.Plan, error) {
	labels, err := r.spokeLabels(ctx, p.Namespace)
	if err != nil {
		return nil, err
	}
	st := pr.Status.Rollout
	in := rollout.Input{Rollout: st.Resolved, Version: pr.Spec.Version, CompletedWaves: int(st.CurrentWave), AcceptedFailures: int(st.AcceptedFailures), Now: now}
	for _, o := range obs {
		in.Targets = append(in.Targets, plannerTarget(o, labels[o.status.Spoke], now))
	}
	plan, err := rollout.New(in)
	if err != nil {
		return nil, fmt.Errorf("%w of %s into %s: %w", errPlan, pr.Spec.Version, pr.Spec.To, err)
	}
	return plan, nil
}

// spokeLabels returns the labels of the Spokes in namespace, by name, for
// a canary chosen by spokeSelector.
func (r *Reconciler) spokeLabels(ctx context.Context, namespace string) (map[string]map[string]string, error) {
	var spokes tugboatv1alpha1.SpokeList
	if err := r.Client.List(ctx, &spokes, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := make(map[string]map[string]string, len(spokes.Items))
	for _, sp := range spokes.Items {
		out[sp.Name] = sp.Labels
	}
	return out, nil
}

// plannerTarget is what the planner reads of one observed target: its
// report, and what this Promotion did to it (its rollout record, and
// for the helm strategy the agent's outcome, whose revision is the one the
// action produced).
func plannerTarget(o observation, labels map[string]string, now time.Time) rollout.Target {
	ts := o.status
	t := rollout.Target{Key: targetKey(ts), Labels: labels}
	if c := o.current; c != nil {
		t.Report = &rollout.Report{
			Rev:     rollout.Rev{Installation: c.Installation, Number: c.Revision},
			Version: c.ChartVersion, Status: c.Status, Health: c.Health, Reason: c.HealthReason,
		}
		if ts.Done && ts.LastTransitionTime != nil {
			t.Report.HealthySince = healthySince(ts.LastTransitionTime.Time, now)
		}
	}
	tr := ts.Rollout
	if tr == nil {
		return t
	}
	base := rollout.Rev{Installation: tr.BaselineInstallation, Number: tr.BaselineRevision}
	a := &rollout.Action{Wave: int(tr.Wave), At: tr.ActedAt.Time, Baseline: base}
	if tr.Unchanged {
		a.Produced = &base
	}
	if act := ts.Action; act != nil {
		switch act.Phase {
		case tugboatv1alpha1.ActionPending, tugboatv1alpha1.ActionDelivered:
			a.Awaited = !tr.Unchanged
		case tugboatv1alpha1.ActionSucceeded:
			if act.Revision > 0 {
				a.Produced = &rollout.Rev{Installation: tr.BaselineInstallation, Number: act.Revision}
			}
		case tugboatv1alpha1.ActionFailed:
			a.Failed, a.Message = true, "the agent's action failed: "+orDefault(act.Message, "no reason given")
		case tugboatv1alpha1.ActionRefused:
			a.Failed, a.Message = true, "the agent refused the action: "+orDefault(act.Message, "no reason given")
		}
	}
	t.Action = a
	return t
}

// count32 converts a count for the API, which stores int32.
func count32(n int) int32 { return int32(min(max(n, 0), math.MaxInt32)) }

func targetKey(ts *target) rollout.Key {
	return rollout.Key{Spoke: ts.Spoke, Namespace: ts.Namespace, Release: ts.Release}
}

// healthySince is when a done target turned done, as its PromotionTarget
// recorded it. The API keeps times to the second: rounding up never
// shortens a soak, and never past now, so that no soak delays a wave
// that has none.
func healthySince(t, now time.Time) time.Time {
	if up := t.Truncate(time.Second).Add(time.Second); up.Before(now) {
		return up
	}
	return now
}

// actOnWave calls the strategy for the current wave's targets not acted on
// yet (plan.ActNow), and records each as acted on: its wave, the time and
// the revision it ran (the baseline), and for the helm strategy its
// agent action, queued. stop is true when the reconcile ends here: a
// target's Spoke is suspended (it waits), or the strategy failed (retried
// with backoff, or the Promotion failed).
func (r *Reconciler) actOnWave(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment, plan *rollout.Plan, obs []observation, now time.Time) (res ctrl.Result, stop bool) {
	s, err := r.Registry.Get(pr.StrategyType())
	var req strategy.Request
	if err == nil {
		req, err = r.request(ctx, pr, p, env)
	}
	var result strategy.Result
	if err == nil {
		req.Targets = slices.DeleteFunc(req.Targets, func(t strategy.Target) bool {
			return !slices.Contains(plan.ActNow, rollout.Key{Spoke: t.SpokeName, Namespace: t.Namespace, Release: t.Release})
		})
		if suspended := suspendedSpokes(req.Targets); len(suspended) > 0 {
			r.setPhase(pr, tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.SuspendedReason,
				fmt.Sprintf("waiting to promote %s into %s (wave %s): spoke %s is suspended (spec.suspend); the strategy runs once it is resumed",
					pr.Spec.Version, pr.Spec.To, plan.Waves[plan.Current].Name, strings.Join(suspended, ", ")))
			return ctrl.Result{RequeueAfter: 5 * time.Second}, true
		}
		result, err = s.Promote(ctx, req)
	}
	if err != nil {
		return r.strategyFailed(pr, err), true
	}
	pr.Status.StrategyResult = &tugboatv1alpha1.StrategyResult{URL: publicURL(result.URL), Reference: result.Reference, Message: clip.String(result.Message, 1024)}
	acted := metav1.NewTime(now)
	for _, o := range obs {
		ts := o.status
		if !slices.Contains(plan.ActNow, targetKey(ts)) {
			continue
		}
		tr := &tugboatv1alpha1.TargetRollout{Wave: count32(plan.Current), ActedAt: acted}
		if c := o.current; c != nil {
			tr.BaselineRevision, tr.BaselineInstallation, tr.BaselineVersion = c.Revision, c.Installation, c.ChartVersion
			tr.Unchanged = c.ChartVersion == pr.Spec.Version && c.Status == tugboatv1alpha1.ReleaseStatusDeployed
		}
		ts.Rollout = tr
		if pr.StrategyType() == tugboatv1alpha1.StrategyHelm {
			r.trackAction(pr, ts.Action, ts)
		}
	}
	return ctrl.Result{}, false
}

// recordPlan writes status.rollout from the plan: the current wave, the
// counts per wave (with the times each wave started and qualified, kept
// from the status read), the budget and the first failing targets (with
// the time each was first seen failing). The message of a target that
// waits for its wave says so. Nothing in it changes unless the plan does,
// so a report that changes nothing writes nothing.
func recordPlan(pr *tugboatv1alpha1.Promotion, plan *rollout.Plan, obs []observation, now time.Time) {
	st := pr.Status.Rollout
	at := metav1.NewTime(now)
	waves := plan.WaveStatuses()
	for i := range waves {
		w := &waves[i]
		if i < len(st.Waves) && st.Waves[i].Name == w.Name {
			w.StartedAt, w.CompletedAt = st.Waves[i].StartedAt, st.Waves[i].CompletedAt
		}
		if w.StartedAt == nil && w.Pending < w.Targets {
			w.StartedAt = &at
		}
		if w.CompletedAt == nil && plan.Waves[i].Qualified {
			w.CompletedAt = &at
		}
	}
	since := map[rollout.Key]*metav1.Time{}
	for _, f := range st.FailedTargets {
		since[rollout.Key{Spoke: f.Spoke, Namespace: f.Namespace, Release: f.Release}] = f.Since
	}
	failed := plan.FailedTargets()
	for i := range failed {
		f := &failed[i]
		if f.Since = since[rollout.Key{Spoke: f.Spoke, Namespace: f.Namespace, Release: f.Release}]; f.Since == nil {
			f.Since = &at
		}
	}
	st.Waves, st.FailedTargets = waves, failed
	st.CurrentWave = count32(plan.Current)
	st.MaxFailures, st.Failed = count32(plan.Budget.Allowed), count32(plan.Budget.Used)
	if st.Phase != tugboatv1alpha1.RolloutPaused {
		st.Message = clip.String(waveMessage(plan), 1024)
	}
	waiting := map[rollout.Key]string{}
	for _, w := range plan.Waves {
		for _, tp := range w.Targets {
			if tp.State == rollout.Pending {
				waiting[tp.Key] = w.Name
			}
		}
	}
	for _, o := range obs {
		if wave, ok := waiting[targetKey(o.status)]; ok && !o.status.Done {
			o.status.Message = clip.String(joinMessages("waiting for wave "+wave, o.status.Message), 1024)
		}
	}
}

// waveMessage says where the current wave stands and what it waits for
// (its first target neither qualified nor failed).
func waveMessage(plan *rollout.Plan) string {
	if plan.Done() {
		return fmt.Sprintf("every wave qualified (%d of %d)", len(plan.Waves), len(plan.Waves))
	}
	w := plan.Waves[plan.Current]
	msg := fmt.Sprintf("wave %s (%d of %d): %d of %d targets qualified", w.Name, plan.Current+1, len(plan.Waves), w.Succeeded, len(w.Targets))
	if w.Failed > 0 {
		msg += fmt.Sprintf(", %d failed (budget: %d of %d)", w.Failed, plan.Budget.Used, plan.Budget.Allowed)
	}
	for _, tp := range w.Targets {
		if tp.State == rollout.InProgress {
			return msg + "; waiting for " + tp.String() + ": " + tp.Message
		}
	}
	return msg
}

// advance moves the Promotion on from a plan whose budget is not spent:
// Succeeded once every wave qualified, Verifying once every target was
// acted on, else Running. It requeues when the plan changes by itself.
func (r *Reconciler) advance(pr *tugboatv1alpha1.Promotion, plan *rollout.Plan, now time.Time) ctrl.Result {
	st := pr.Status.Rollout
	if plan.Done() {
		st.Phase = tugboatv1alpha1.RolloutCompleted
		r.finish(pr, tugboatv1alpha1.PromotionSucceeded, tugboatv1alpha1.SucceededReason, completedMessage(pr, plan))
		return ctrl.Result{}
	}
	acted := !slices.ContainsFunc(plan.Waves, func(w rollout.Wave) bool { return w.Pending > 0 })
	if acted {
		r.setPhase(pr, tugboatv1alpha1.PromotionVerifying, tugboatv1alpha1.VerifyingReason,
			fmt.Sprintf("every wave of %s into %s was acted on; %s", pr.Spec.Version, pr.Spec.To, st.Message))
	} else {
		r.setPhase(pr, tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.ProgressingReason,
			fmt.Sprintf("rolling %s out into %s: %s", pr.Spec.Version, pr.Spec.To, st.Message))
	}
	if plan.NextCheck.IsZero() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: max(plan.NextCheck.Sub(now), time.Millisecond)}
}

// completedMessage says that every wave qualified, naming the targets
// whose failure the budget excused: they do not run the version healthy.
func completedMessage(pr *tugboatv1alpha1.Promotion, plan *rollout.Plan) string {
	if len(plan.Failed) == 0 {
		return fmt.Sprintf("every target of %s runs %s, healthy: %d waves qualified", pr.Spec.To, pr.Spec.Version, len(plan.Waves))
	}
	var failing []string
	for _, f := range plan.Failed[:min(len(plan.Failed), 3)] {
		failing = append(failing, fmt.Sprintf("%s (%s: %s)", f.Key, f.Failure, f.Message))
	}
	if more := len(plan.Failed) - len(failing); more > 0 {
		failing = append(failing, fmt.Sprintf("and %d more (status.rollout.failedTargets)", more))
	}
	return fmt.Sprintf("%d waves of %s into %s qualified; %d of %d allowed failures, excused by the budget: %s",
		len(plan.Waves), pr.Spec.Version, pr.Spec.To, plan.Budget.Used, plan.Budget.Allowed, strings.Join(failing, "; "))
}

// pause stops a rollout whose failure budget is spent (onFailure Pause):
// phase Paused, nothing more acted on, and the Ready condition says why
// and how to go on.
func (r *Reconciler) pause(pr *tugboatv1alpha1.Promotion, plan *rollout.Plan, obs []observation, now time.Time) {
	st := pr.Status.Rollout
	if pr.Status.Phase != tugboatv1alpha1.PromotionPaused {
		st.Pauses++ // not when the budget is spent while a person paused it
	}
	st.Phase, st.PausedBy = tugboatv1alpha1.RolloutPaused, ""
	msg := pausedMessage(pr, plan)
	st.Message = clip.String(msg, 1024)
	recordPlan(pr, plan, obs, now)
	pr.Status.Phase = tugboatv1alpha1.PromotionPaused
	apimeta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{
		Type: tugboatv1alpha1.ReadyCondition.String(), Status: metav1.ConditionFalse, Reason: tugboatv1alpha1.RolloutPausedReason.String(),
		Message: clip.String(msg, 1024), ObservedGeneration: pr.Generation,
	})
	apimeta.RemoveStatusCondition(&pr.Status.Conditions, tugboatv1alpha1.ReconcilingCondition.String())
}

// pausedMessage says why the rollout stopped, which targets failed, and
// what a person can do.
func pausedMessage(pr *tugboatv1alpha1.Promotion, plan *rollout.Plan) string {
	b := plan.Budget
	why := fmt.Sprintf("%d of %d allowed failures", b.Used, b.Allowed)
	if b.CanaryFailed {
		why = "a canary target failed, and the canary tolerates none"
	}
	var failing []string
	for _, f := range plan.Failed[:min(len(plan.Failed), 3)] {
		failing = append(failing, fmt.Sprintf("%s (wave %s) %s: %s", f.Key, plan.Waves[f.Wave].Name, f.Failure, f.Message))
	}
	if more := len(plan.Failed) - len(failing); more > 0 {
		failing = append(failing, fmt.Sprintf("and %d more (status.rollout.failedTargets)", more))
	}
	wave := "after its last wave"
	if !plan.Done() {
		wave = "in wave " + plan.Waves[plan.Current].Name
	}
	msg := fmt.Sprintf("rollout of %s into %s paused %s: the failure budget is spent (%s): %s. Nothing more is acted on",
		pr.Spec.Version, pr.Spec.To, wave, why, strings.Join(failing, "; "))
	return msg + fmt.Sprintf(". To go on, resume it (tugboat rollout resume %s -n %s: the failures seen are accepted, the budget is not refilled), "+
		"or abort it (tugboat rollout abort %s -n %s) and promote a fixed version", pr.Name, pr.Namespace, pr.Name, pr.Namespace)
}
