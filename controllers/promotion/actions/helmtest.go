package actions

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// Helm test actions: while a helmTest step of a helm Promotion runs, the
// Promotion reconciler queues one (a PromotionTarget's status.helmTest) per tested
// target for the step's current attempt. The store offers them to the
// targets' agents, with the revision to test, and records their outcomes
// as it does an upgrade's. An action whose id is not the one the running
// step's attempt derives for its target is never offered: nobody but the
// reconciler queues them, and an earlier attempt's is done with.

// runningHelmTest returns pr's running helmTest step, or nil.
func runningHelmTest(pr *tugboatv1alpha1.Promotion) *tugboatv1alpha1.StepStatus {
	for i := range pr.Status.Steps {
		st := &pr.Status.Steps[i]
		if st.Type == tugboatv1alpha1.StepHelmTest && st.Phase == tugboatv1alpha1.StepRunning {
			return st
		}
	}
	return nil
}

// openHelmTest reports whether t has a helm test of pr's running step that
// waits for its outcome.
func openHelmTest(pr *tugboatv1alpha1.Promotion, t *target) bool {
	st := runningHelmTest(pr)
	return st != nil && t.HelmTest != nil && open(t.HelmTest.Phase) && t.Action != nil &&
		t.HelmTest.ID == wire.NewHelmTestActionID(string(pr.UID), st.Name, st.Attempts, t.Spoke, t.Namespace, t.Release)
}

// deliverHelmTest returns the wire action of t's open helm test, marking
// it Delivered (at now) and counting the delivery; ok is false when t has
// none to offer.
func (s *Store) deliverHelmTest(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, t *target, now metav1.Time) (wire.Action, bool) {
	// Verifying, or Running a rollout: a helmTest step with waves Each
	// tests a wave's targets before the next wave is acted on.
	if !offered(pr) || rollingBack(pr) || !openHelmTest(pr, t) {
		return wire.Action{}, false
	}
	up, err := s.action(ctx, pr, p, t)
	if err != nil {
		s.log.Info("Not offering a helm test", "promotion", pr.Namespace+"/"+pr.Name, "spoke", t.Spoke, "error", err.Error())
		return wire.Action{}, false
	}
	st := runningHelmTest(pr)
	a := wire.Action{
		ID:        t.HelmTest.ID,
		Type:      wire.ActionHelmTest,
		Promotion: up.Promotion,
		Namespace: t.Namespace,
		Release:   t.Release,
		HelmTest: &wire.HelmTestAction{
			Revision: int(t.HelmTest.Revision), Version: pr.Spec.Version, TimeoutSeconds: int(helmTestTimeout(p, pr, st) / time.Second),
		},
		Created: up.Created,
	}
	if st.StartedAt != nil {
		a.Created = st.StartedAt.UTC()
	}
	if t.HelmTest.Phase == tugboatv1alpha1.ActionPending {
		t.HelmTest.Phase, t.HelmTest.LastUpdateTime = tugboatv1alpha1.ActionDelivered, &now
	}
	t.HelmTest.Deliveries++
	return a, true
}

// helmTestTimeout is the timeout of step st of pr in Pipeline p (the
// agent bounds the test hooks with it), 0 when unknown (the agent's own
// bound applies).
func helmTestTimeout(p *tugboatv1alpha1.Pipeline, pr *tugboatv1alpha1.Promotion, st *tugboatv1alpha1.StepStatus) time.Duration {
	i := pipeline.EnvironmentIndex(p, pr.Spec.To)
	if i < 0 || p.Spec.Environments[i].Steps == nil {
		return 0
	}
	for _, s := range p.Spec.Environments[i].Steps.Post {
		if s.Name == st.Name && s.Timeout != nil {
			return s.Timeout.Duration
		}
	}
	return 0
}
