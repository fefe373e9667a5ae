package pipeline

import (
	"fmt"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// rolloutHold returns the hold of environment env after a rollout into
// it spent its failure budget and was rolled back automatically
// (onFailure Rollback), derived from the newest Promotion into env while
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
	return &tugboatv1alpha1.HeldEnvironment{
		Name:    env,
		Reason:  tugboatv1alpha1.HoldRolloutFailed,
		Since:   *st.RollbackStartedAt,
		Version: newest.Spec.Version,
		Message: fmt.Sprintf("the rollout of %s (promotion %s) spent its failure budget and was rolled back", newest.Spec.Version, newest.Name),
	}
}
