package pipeline

import (
	"fmt"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// rolloutHold returns the hold of environment env after a rollout into
// it spent its failure budget (or one of its post steps failed) and was
// rolled back automatically (onFailure Rollback), derived from the newest Promotion into env while
// its rollout is RollingBack or RolledBack: the environment is held as
// after a person's rollback, lifted the same way (a resume dated at or
// after since, the time the rollback started). It takes precedence over
// rollbackOf, which would take tugboat's own rollback revisions (an older
// chart version than the revision before) for a person's. Nil when the
// newest Promotion into env did not roll back.
func rolloutHold(promos []tugboatv1alpha1.Promotion, env string) *tugboatv1alpha1.HeldEnvironment {
	var newest *tugboatv1alpha1.Promotion
	for i := range promos {
		pr := &promos[i]
		if pr.Spec.To != env {
			continue
		}
		if newest == nil || newest.CreationTimestamp.Before(&pr.CreationTimestamp) ||
			newest.CreationTimestamp.Equal(&pr.CreationTimestamp) && pr.Name > newest.Name {
			newest = pr
		}
	}
	if newest == nil || newest.Status.Rollout == nil || newest.Status.Rollout.RollbackStartedAt == nil {
		return nil
	}
	st := newest.Status.Rollout
	if st.Phase != tugboatv1alpha1.RolloutRollingBack && st.Phase != tugboatv1alpha1.RolloutRolledBack {
		return nil
	}
	what := "spent its failure budget"
	if step := failedPostStep(newest); step != nil {
		what = fmt.Sprintf("failed its post step %s (%s)", step.Name, step.Type)
	}
	return &tugboatv1alpha1.HeldEnvironment{
		Name:    env,
		Reason:  tugboatv1alpha1.HoldRolloutFailed,
		Since:   *st.RollbackStartedAt,
		Version: newest.Spec.Version,
		Message: fmt.Sprintf("the rollout of %s (promotion %s) %s and was rolled back", newest.Spec.Version, newest.Name, what),
	}
}

// stoppedByStep says why version is not promoted out of environment env:
// the newest Promotion of version into env failed a post step (a
// lifecycle step that checks the version where it runs: its Helm tests,
// a metric, a check of your own). A version that failed its checks does
// not move on, even though its targets run it healthy (without a rollout
// that rolls back, a failed post step leaves it there). "" when it is not
// stopped: no such Promotion, or the newest one (a retry) did not fail a
// post step.
func stoppedByStep(promos []tugboatv1alpha1.Promotion, env, version string) string {
	var newest *tugboatv1alpha1.Promotion
	for i := range promos {
		pr := &promos[i]
		if pr.Spec.To != env || pr.Spec.Version != version {
			continue
		}
		if newest == nil || newest.CreationTimestamp.Before(&pr.CreationTimestamp) ||
			newest.CreationTimestamp.Equal(&pr.CreationTimestamp) && pr.Name > newest.Name {
			newest = pr
		}
	}
	if newest == nil || newest.Status.Phase != tugboatv1alpha1.PromotionFailed {
		return ""
	}
	step := failedPostStep(newest)
	if step == nil {
		return ""
	}
	how := "failed"
	if step.Phase == tugboatv1alpha1.StepTimedOut {
		how = "timed out"
	}
	return fmt.Sprintf("%s is not promoted out of %s: its post step %s (%s) %s in promotion %s", version, env, step.Name, step.Type, how, newest.Name)
}

// failedPostStep returns the post step of pr that failed (or timed out),
// or nil: a rollout with onFailure Rollback rolls back when one does
// (controllers/promotion/promotion_steps_rollback.go).
func failedPostStep(pr *tugboatv1alpha1.Promotion) *tugboatv1alpha1.StepStatus {
	for i := range pr.Status.Steps {
		st := &pr.Status.Steps[i]
		if st.Stage == tugboatv1alpha1.StepStagePost && (st.Phase == tugboatv1alpha1.StepFailed || st.Phase == tugboatv1alpha1.StepTimedOut) {
			return st
		}
	}
	return nil
}
