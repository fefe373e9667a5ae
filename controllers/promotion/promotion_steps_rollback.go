package promotion

// A failed post step of a rollout (issue 25): with onFailure Rollback, the
// rollout stops and every target this Promotion changed returns to the
// revision it ran before, exactly as when its failure budget is spent
// (promotion_rollback.go: an agent action for helm targets, the previous
// chart version for Flux, a revert pull request for pullRequest). The
// Promotion then fails with reason RolloutFailed, its message naming the
// step, and the Pipeline controller holds the environment (reason
// RolloutFailed, its message naming the step too). With onFailure Pause,
// or without a rollout, a failed post step fails the Promotion (reason
// StepFailed) and the targets keep the version.

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/rollout"
)

// postStepFailed is what becomes of pr, a rollout whose last wave
// qualified (plan, obs), or one whose helmTest step with waves Each failed
// between waves, when one of its post steps fails: a rollback with
// onFailure Rollback, else a failure (failStep).
func (r *Reconciler) postStepFailed(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment,
	plan *rollout.Plan, obs []observation, now time.Time) stepFailed {
	return func(st *tugboatv1alpha1.StepStatus) (ctrl.Result, error) {
		if !rollsBack(pr) {
			return r.failStep(pr)(st)
		}
		where := "after its last wave"
		if !plan.Done() {
			where = "before wave " + plan.Waves[plan.Current].Name
		}
		return r.rollBack(ctx, pr, p, env, stepStoppedMessage(pr, st, where), plan, obs, now)
	}
}

// stepStoppedMessage says why a rollout stopped where it did (after its
// last wave, or before a wave for a helmTest step with waves Each): its
// post step st failed. The step's own message is bounded so that what the
// rollback adds (what was rolled back, the hold) fits in the condition.
func stepStoppedMessage(pr *tugboatv1alpha1.Promotion, st *tugboatv1alpha1.StepStatus, where string) string {
	return fmt.Sprintf("rollout of %s into %s stopped %s: %s", pr.Spec.Version, pr.Spec.To, where, clip.String(stepFailure(st), 600))
}
