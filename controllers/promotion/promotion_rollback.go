package promotion

// Automatic rollback (issue 24): a rollout whose failure budget is spent
// with onFailure Rollback stops, and returns every target this Promotion
// changed to the revision it ran before (the baseline its PromotionTarget's
// status.rollout recorded). The helm strategy queues an agent action per target
// (wire.ActionRollback: a Helm rollback, or the previous chart version in
// the target's Flux HelmRelease), and waits for the agents' outcomes,
// bounded by the rollout's progress deadline; the kubernetes strategy sets
// the previous chart version on the targets' HelmReleases itself, and the
// pullRequest strategy opens a revert pull request. Then the
// Promotion fails, reason RolloutFailed, status.rollout.phase RolledBack,
// and the Pipeline controller holds the environment (HoldRolloutFailed).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/promotion/rollout"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

// defaultProgressDeadline bounds a rollback whose rollout sets no
// progressDeadline (the API defaults it to the same).
const defaultProgressDeadline = 10 * time.Minute

// rollsBack reports whether pr's rollout rolls back when its budget is
// spent.
func rollsBack(pr *tugboatv1alpha1.Promotion) bool {
	return hasRollout(pr) && pr.Status.Rollout.Resolved.OnFailure == tugboatv1alpha1.RolloutRollback
}

// canRollBack reports whether strategy t can return targets to the
// revision they ran (the Pipeline's CEL rules refuse onFailure Rollback
// with any other).
func canRollBack(t tugboatv1alpha1.StrategyType) bool {
	return t == tugboatv1alpha1.StrategyHelm || t == tugboatv1alpha1.StrategyKubernetes || t == tugboatv1alpha1.StrategyPullRequest
}

// startRollback stops a rollout whose budget is spent (onFailure
// Rollback): status.rollout records the plan as it stopped, and every
// target this Promotion changed gets a rollback (rollbackFor). With
// nothing to roll back, the Promotion fails at once.
func (r *Reconciler) startRollback(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment, plan *rollout.Plan, obs []observation, now time.Time) (ctrl.Result, error) {
	return r.rollBack(ctx, pr, p, env, stoppedMessage(pr, plan), plan, obs, now)
}

// rollBack stops the rollout for the reason why (a spent budget, or a
// failed post step: promotion_steps_rollback.go) and rolls back every
// target this Promotion changed.
func (r *Reconciler) rollBack(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment, why string, plan *rollout.Plan, obs []observation, now time.Time) (ctrl.Result, error) {
	st := pr.Status.Rollout
	st.Phase = tugboatv1alpha1.RolloutRollingBack
	recordPlan(pr, plan, obs, now)
	at := metav1.NewTime(now)
	st.RollbackStartedAt = &at
	if !canRollBack(pr.StrategyType()) {
		// A Pipeline stored before the CEL rule existed.
		return r.rolledBack(pr, targetsOf(ctx), why, fmt.Sprintf("the %s strategy cannot roll back: nothing was rolled back", pr.StrategyType())), nil
	}
	var skipped []string
	for _, o := range obs {
		ts := o.status
		if ts.Rollout == nil {
			continue
		}
		if reason := noRollback(ts); reason != "" {
			skipped = append(skipped, fmt.Sprintf("%s (%s)", targetKey(ts), reason))
			continue
		}
		ts.Rollout.Rollback = &tugboatv1alpha1.TargetAction{
			ID:    wire.NewRollbackActionID(string(pr.UID), ts.Spoke, ts.Namespace, ts.Release),
			Phase: tugboatv1alpha1.ActionPending, LastUpdateTime: &at,
		}
	}
	if len(skipped) > 0 {
		why += "; not rolled back: " + listOf(skipped, 3)
	}
	st.Message = clip.String(why+"; rolling back", 1024)
	return r.rollingBack(ctx, pr, p, env, now)
}

// noRollback says why target ts, acted on by this rollout, needs no
// rollback, or "" when it does: it already ran the version (nothing
// changed), the agent refused the upgrade (nothing changed), it ran no
// release before (a rollback has nothing to return to: it is left as it
// is), or the revision it ran was not recorded.
func noRollback(ts *target) string {
	tr := ts.Rollout
	switch {
	case tr.Unchanged:
		return "it ran the version already"
	case ts.Action != nil && ts.Action.Phase == tugboatv1alpha1.ActionRefused:
		return "its agent refused the upgrade: nothing changed"
	case tr.BaselineRevision == 0:
		return "it ran no release before this promotion installed it"
	case tr.BaselineVersion == "":
		return "the version it ran before was not recorded"
	}
	return ""
}

// rollBackThroughStrategy is the rollback of the strategies the hub
// carries out itself: the strategy is called again for the targets whose
// rollback is pending, with the version they ran before
// (Request.RollbackFrom set), and the outcome is recorded. The kubernetes
// strategy sets each target's HelmRelease back (one call per version);
// the pullRequest strategy opens one revert pull request (its markers are
// per environment, so the targets return to the version most of them ran;
// the rollback is done once it is open, the targets return when it is
// merged). An error the strategy may retry leaves the rollbacks pending
// and is returned (the workqueue backs off, within the deadline).
func (r *Reconciler) rollBackThroughStrategy(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) error {
	s, err := r.Registry.Get(pr.StrategyType())
	if err != nil {
		return err
	}
	req, err := r.request(ctx, pr, p, env)
	if err != nil {
		return err
	}
	byVersion := map[string][]*target{}
	set := targetsOf(ctx)
	for i := range set.items {
		ts := &set.items[i]
		if rb := rollbackOf(ts); rb != nil && rb.Phase == tugboatv1alpha1.ActionPending {
			byVersion[ts.Rollout.BaselineVersion] = append(byVersion[ts.Rollout.BaselineVersion], ts)
		}
	}
	if len(byVersion) == 0 {
		return nil
	}
	versions := make([]string, 0, len(byVersion))
	for v := range byVersion {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	if pr.StrategyType() == tugboatv1alpha1.StrategyPullRequest {
		// One pull request: the version most targets ran.
		most := versions[0]
		for _, v := range versions[1:] {
			if len(byVersion[v]) > len(byVersion[most]) {
				most = v
			}
		}
		for _, v := range versions {
			if v != most {
				byVersion[most] = append(byVersion[most], byVersion[v]...)
			}
		}
		versions = []string{most}
	}
	now := metav1.NewTime(r.Now())
	for _, v := range versions {
		targets := byVersion[v]
		back := req
		back.Version, back.RollbackFrom = v, pr.Spec.Version
		back.Targets = slices.DeleteFunc(slices.Clone(req.Targets), func(t strategy.Target) bool {
			return !slices.ContainsFunc(targets, func(ts *target) bool {
				return ts.Spoke == t.SpokeName && ts.Namespace == t.Namespace && ts.Release == t.Release
			})
		})
		res, err := s.Promote(ctx, back)
		if err != nil && !strategy.IsTerminal(err) {
			return fmt.Errorf("setting the HelmReleases of %d target(s) back to %s: %w", len(targets), v, err)
		}
		what := "HelmRelease set back to " + v
		if pr.StrategyType() == tugboatv1alpha1.StrategyPullRequest {
			what = "revert pull request to " + v + " (the target returns once it is merged)"
		}
		for _, ts := range targets {
			rb := ts.Rollout.Rollback
			rb.Phase, rb.Message, rb.LastUpdateTime = tugboatv1alpha1.ActionSucceeded, clip.String(what+": "+res.Message, 1024), &now
			if err != nil {
				rb.Phase, rb.Message = tugboatv1alpha1.ActionFailed, clip.String(what+" failed: "+err.Error(), 1024)
			}
		}
	}
	return nil
}

// rollingBack waits for the outcome of every rollback (the agents report
// them through the actions store; the other strategies' are set here),
// bounded by the rollout's progress deadline from when the rollback
// started; then the Promotion fails, reason RolloutFailed, naming what was
// and was not rolled back.
func (r *Reconciler) rollingBack(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment, now time.Time) (ctrl.Result, error) {
	st := pr.Status.Rollout
	var retry error
	if pr.StrategyType() != tugboatv1alpha1.StrategyHelm {
		retry = r.rollBackThroughStrategy(ctx, pr, p, env)
	}
	why, _, _ := strings.Cut(st.Message, "; rolling back")
	var waiting []string
	set := targetsOf(ctx)
	for _, ts := range set.items {
		if rb := rollbackOf(&ts); rb != nil && open(rb.Phase) {
			waiting = append(waiting, targetKey(&ts).String())
		}
	}
	if len(waiting) == 0 {
		return r.rolledBack(pr, set, why, ""), nil
	}
	start := now
	if st.RollbackStartedAt != nil {
		start = st.RollbackStartedAt.Time
	}
	deadline := start.Add(progressDeadline(st.Resolved))
	if !now.Before(deadline) {
		return r.rolledBack(pr, set, why, fmt.Sprintf("no outcome within the progress deadline (%s) from %s", progressDeadline(st.Resolved), listOf(waiting, 3))), nil
	}
	msg := why + "; rolling back " + rollbackCounts(set) + "; waiting for " + listOf(waiting, 3)
	if retry != nil {
		msg += ": " + retry.Error()
	}
	st.Message = clip.String(msg, 1024)
	r.setPhase(pr, tugboatv1alpha1.PromotionRollingBack, tugboatv1alpha1.RollingBackReason, st.Message)
	if retry != nil {
		return ctrl.Result{}, retry
	}
	return ctrl.Result{RequeueAfter: max(deadline.Sub(now), time.Millisecond)}, nil
}

// rolledBack ends the rollback: status.rollout.phase RolledBack, and the
// Promotion Failed with reason RolloutFailed. why says why the rollout
// stopped; more, when set, why the rollback ended early.
func (r *Reconciler) rolledBack(pr *tugboatv1alpha1.Promotion, set *targetSet, why, more string) ctrl.Result {
	st := pr.Status.Rollout
	st.Phase = tugboatv1alpha1.RolloutRolledBack
	var back, failed []string
	for _, ts := range set.items {
		rb := rollbackOf(&ts)
		switch {
		case rb == nil:
		case rb.Phase == tugboatv1alpha1.ActionSucceeded:
			back = append(back, targetKey(&ts).String())
		case !open(rb.Phase):
			failed = append(failed, fmt.Sprintf("%s (%s: %s)", targetKey(&ts), rb.Phase, orDefault(rb.Message, "no reason given")))
		}
	}
	msg := why + "; " + fmt.Sprintf("rolled back %d target(s) to the revision they ran before", len(back))
	if len(back) > 0 {
		msg += ": " + listOf(back, 5)
	}
	if len(failed) > 0 {
		msg += fmt.Sprintf("; %d not: %s", len(failed), listOf(failed, 3))
	}
	if more != "" {
		msg += "; " + more
	}
	msg += fmt.Sprintf(". %s is held until someone resumes it (tugboat promote --resume)", pr.Spec.To)
	st.Message = clip.String(msg, 1024)
	r.finish(pr, tugboatv1alpha1.PromotionFailed, tugboatv1alpha1.RolloutFailedReason, msg)
	return ctrl.Result{}
}

// rollbackOf returns the rollback of target ts, or nil.
func rollbackOf(ts *target) *tugboatv1alpha1.TargetAction {
	if ts.Rollout == nil {
		return nil
	}
	return ts.Rollout.Rollback
}

// rollbackCounts says how many rollbacks are done, of how many.
func rollbackCounts(set *targetSet) string {
	total, done := 0, 0
	for i := range set.items {
		if rb := rollbackOf(&set.items[i]); rb != nil {
			total++
			if !open(rb.Phase) {
				done++
			}
		}
	}
	return fmt.Sprintf("%d of %d changed target(s) done", done, total)
}

// open reports whether an action still waits for its outcome.
func open(p tugboatv1alpha1.ActionPhase) bool {
	return p == tugboatv1alpha1.ActionPending || p == tugboatv1alpha1.ActionDelivered
}

// progressDeadline is the rollout's progress deadline, or the default.
func progressDeadline(ro *tugboatv1alpha1.Rollout) time.Duration {
	if ro != nil && ro.ProgressDeadline != nil && ro.ProgressDeadline.Duration > 0 {
		return ro.ProgressDeadline.Duration
	}
	return defaultProgressDeadline
}

// listOf joins the first n items, counting the rest.
func listOf(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(" and %d more", len(items)-n)
}

// stoppedMessage says why the rollout stopped: where, and which targets
// failed.
func stoppedMessage(pr *tugboatv1alpha1.Promotion, plan *rollout.Plan) string {
	b := plan.Budget
	why := fmt.Sprintf("%d of %d allowed failures", b.Used, b.Allowed)
	if b.CanaryFailed {
		why = "a canary target failed, and the canary tolerates none"
	}
	var failing []string
	for _, f := range plan.Failed {
		failing = append(failing, fmt.Sprintf("%s (wave %s) %s: %s", f.Key, plan.Waves[f.Wave].Name, f.Failure, clip.String(f.Message, 200)))
	}
	wave := "after its last wave"
	if !plan.Done() {
		wave = "in wave " + plan.Waves[plan.Current].Name
	}
	return fmt.Sprintf("rollout of %s into %s stopped %s: the failure budget is spent (%s): %s",
		pr.Spec.Version, pr.Spec.To, wave, why, listOf(failing, 2))
}
