package promotion

// helmTest steps (issue 25): the agent of each tested target runs the
// release's Helm test hooks (wire.ActionHelmTest), on the revision this
// Promotion produced, and reports pass or fail. Each attempt queues one
// action per tested target in its PromotionTarget's status.helmTest, with a
// deterministic id (wire.NewHelmTestActionID: the Promotion's UID, the
// step, the attempt and the target), so a hub that restarts mid-step finds
// the same actions and their outcomes, and never asks an agent twice for
// the same attempt. The receiver (controllers/promotion/actions) offers
// them to the agents and records their outcomes; this file reads them.

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// helmTestPoll bounds how long a running helmTest step waits before
// looking again when no outcome woke it.
const helmTestPoll = 10 * time.Second

// helmTestTargets returns the targets of pr that a helmTest step with
// configuration spec tests: with waves Canary (the default) and a rollout,
// those of its first wave; else (All, Each) every target acted on. With
// Each, the targets of the waves before the last were tested between the
// waves (helmTestBetweenWaves), under the same attempt's action ids: their
// outcomes stand.
func helmTestTargets(pr *tugboatv1alpha1.Promotion, set *targetSet, spec *tugboatv1alpha1.Step) []*target {
	canary := spec.HelmTest == nil || spec.HelmTest.Waves == "" || spec.HelmTest.Waves == tugboatv1alpha1.HelmTestCanary
	var out []*target
	for i := range set.items {
		ts := &set.items[i]
		if !kept(pr, ts) {
			continue // a target no wave acted on
		}
		if canary && hasRollout(pr) && (ts.Rollout == nil || ts.Rollout.Wave != 0) {
			continue
		}
		out = append(out, ts)
	}
	return out
}

// testedRevision is the revision of target ts that a helm test tests: the
// one its upgrade action made or found, else the one it reports.
func testedRevision(ts *target) int32 {
	if ts.Action != nil && ts.Action.Revision > 0 {
		return ts.Action.Revision
	}
	return ts.Revision
}

// helmTestAttempt queues the helm test actions of the current attempt of
// st (those not queued yet) and reads their outcomes: the attempt passes
// when every tested target passed, fails at the first target that failed
// or refused (naming it, with its agent's message: the failing test Pod
// and its log excerpt), and times out after the step's timeout.
func (r *Reconciler) helmTestAttempt(ctx context.Context, pr *tugboatv1alpha1.Promotion, spec *tugboatv1alpha1.Step, st *tugboatv1alpha1.StepStatus) (attemptResult, error) {
	if pr.StrategyType() != tugboatv1alpha1.StrategyHelm {
		return attemptResult{done: true, message: fmt.Sprintf("a helmTest step needs the helm strategy (this promotion uses %s): the destination's agents run the tests", pr.StrategyType())}, nil
	}
	return r.helmTestOn(pr, spec, st, helmTestTargets(pr, targetsOf(ctx), spec)), nil
}

// helmTestOn is helmTestAttempt on the targets tested. The attempt's
// clock (st.startedAt) starts again when it asks targets not asked
// before: with waves Each, a wave's tests are bounded by the step's
// timeout from when they were asked, whatever the soak of the waves
// before.
func (r *Reconciler) helmTestOn(pr *tugboatv1alpha1.Promotion, spec *tugboatv1alpha1.Step, st *tugboatv1alpha1.StepStatus, tested []*target) attemptResult {
	if len(tested) == 0 {
		return attemptResult{done: true, message: "no target to test"}
	}
	now := r.Now()
	at := metav1.NewTime(now)
	var waiting []string
	passed := ""
	for _, ts := range tested {
		key := ts.Spoke + "/" + ts.Namespace + "/" + ts.Release
		id := wire.NewHelmTestActionID(string(pr.UID), st.Name, st.Attempts, ts.Spoke, ts.Namespace, ts.Release)
		if ts.HelmTest == nil || ts.HelmTest.ID != id {
			rev := testedRevision(ts)
			if rev <= 0 || ts.Version != pr.Spec.Version {
				return attemptResult{done: true, message: fmt.Sprintf("target %s reports no revision of %s to test", key, pr.Spec.Version)}
			}
			ts.HelmTest = &tugboatv1alpha1.TargetAction{ID: id, Phase: tugboatv1alpha1.ActionPending, Revision: rev, LastUpdateTime: &at}
			st.StartedAt = &at
		}
		switch a := ts.HelmTest; a.Phase {
		case tugboatv1alpha1.ActionSucceeded:
			passed = a.Message
		case tugboatv1alpha1.ActionRefused:
			return attemptResult{done: true, message: clip.String(fmt.Sprintf("%s refused the helm test: %s", key, orDefault(a.Message, "no reason given")), tugboatv1alpha1.MaxStepMessageLength)}
		case tugboatv1alpha1.ActionFailed:
			return attemptResult{done: true, message: clip.String(fmt.Sprintf("helm test failed on %s: %s", key, orDefault(a.Message, "no reason given")), tugboatv1alpha1.MaxStepMessageLength)}
		case tugboatv1alpha1.ActionDelivered:
			waiting = append(waiting, key+" (running)")
		default:
			waiting = append(waiting, key+" (not fetched by its agent yet)")
		}
	}
	if len(waiting) == 0 {
		msg := fmt.Sprintf("the Helm tests passed on %d target(s)", len(tested))
		if len(tested) == 1 {
			msg = passed
		}
		return attemptResult{done: true, ok: true, message: msg}
	}
	timeout := stepTimeout(spec, nil)
	deadline := now
	if st.StartedAt != nil {
		deadline = st.StartedAt.Add(timeout)
	}
	if !now.Before(deadline) {
		return attemptResult{done: true, timedOut: true, message: clip.String(fmt.Sprintf("no outcome within %s from the agents of %s", timeout, listOf(waiting, 3)), tugboatv1alpha1.MaxStepMessageLength)}
	}
	return attemptResult{
		wait:    fmt.Sprintf("waiting for the Helm tests of %d of %d target(s): %s, until %s", len(waiting), len(tested), listOf(waiting, 3), deadline.UTC().Format(time.RFC3339)),
		requeue: min(deadline.Sub(now), helmTestPoll),
	}
}
