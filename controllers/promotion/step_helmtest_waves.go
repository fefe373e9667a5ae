package promotion

// helmTest steps with waves Each (issue 25): with a rollout, each wave's
// targets are tested once the wave qualified, before the next wave is
// acted on, so that a version whose tests fail on the canary never reaches
// the next wave. The between-wave runs are the step's current attempt:
// the same action ids (per target) as the run after the last wave, which
// tests the last wave's targets (the earlier waves' outcomes stand). A
// failure is the step's failure, as after the last wave: retried within
// its retries (every target tested again), then the Promotion fails, or
// with onFailure Rollback rolls back what it changed (postStepFailed).

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/rollout"
)

// eachWaveTest returns pr's helmTest post step with waves Each, its status
// and its configuration in env, or nils.
func eachWaveTest(pr *tugboatv1alpha1.Promotion, env *tugboatv1alpha1.Environment) (*tugboatv1alpha1.StepStatus, *tugboatv1alpha1.Step) {
	for i := range pr.Status.Steps {
		st := &pr.Status.Steps[i]
		if st.Stage != tugboatv1alpha1.StepStagePost || st.Type != tugboatv1alpha1.StepHelmTest {
			continue
		}
		if spec := stepSpec(env, st); spec != nil && spec.HelmTest != nil && spec.HelmTest.Waves == tugboatv1alpha1.HelmTestEach {
			return st, spec
		}
	}
	return nil, nil
}

// helmTestBetweenWaves tests, before the current wave of plan is acted on,
// the targets of the waves before it, for a helmTest step with waves
// Each. stop is true when the rollout waits for the tests (or they failed
// and the Promotion failed or rolls back): the current wave is not acted
// on in this reconcile.
func (r *Reconciler) helmTestBetweenWaves(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment,
	plan *rollout.Plan, obs []observation, now time.Time) (ctrl.Result, bool, error) {
	st, spec := eachWaveTest(pr, env)
	if st == nil || plan.Current == 0 || plan.Done() || pr.StrategyType() != tugboatv1alpha1.StrategyHelm {
		return ctrl.Result{}, false, nil
	}
	if st.Phase.Terminal() {
		// A failure is acted on as it is recorded; a step that succeeded
		// was tested after the last wave.
		return ctrl.Result{}, false, nil
	}
	if st.Phase == tugboatv1alpha1.StepPending {
		r.startAttempt(st)
	}
	var tested []*target
	for _, o := range obs {
		if tr := o.status.Rollout; tr != nil && int(tr.Wave) < plan.Current {
			tested = append(tested, o.status)
		}
	}
	next := plan.Waves[plan.Current].Name
	out := r.helmTestOn(pr, spec, st, tested)
	switch {
	case !out.done:
		st.Message = clip.String(out.wait, tugboatv1alpha1.MaxStepMessageLength)
		r.setPhase(pr, tugboatv1alpha1.PromotionRunning, StepsRunningReason, fmt.Sprintf("post step %s (helmTest, attempt %d of %d) tests the waves before wave %s before it is acted on: %s",
			st.Name, st.Attempts, spec.Retries+1, next, out.wait))
		return ctrl.Result{RequeueAfter: out.requeue}, true, nil
	case out.ok:
		st.Message = clip.String(fmt.Sprintf("the waves before wave %s passed: %s; wave %s is tested once it qualifies", next, out.message, next), tugboatv1alpha1.MaxStepMessageLength)
		return ctrl.Result{}, false, nil
	case st.Attempts <= spec.Retries:
		// Another attempt, which tests every target acted on again.
		st.Phase, st.Message = tugboatv1alpha1.StepPending, clip.String(fmt.Sprintf("attempt %d: %s; retrying", st.Attempts, out.message), tugboatv1alpha1.MaxStepMessageLength)
		return ctrl.Result{RequeueAfter: time.Millisecond}, true, nil
	}
	phase := tugboatv1alpha1.StepFailed
	if out.timedOut {
		phase = tugboatv1alpha1.StepTimedOut
	}
	r.endStep(st, phase, out.message)
	res, err := r.postStepFailed(ctx, pr, p, env, plan, obs, now)(st)
	return res, true, err
}
