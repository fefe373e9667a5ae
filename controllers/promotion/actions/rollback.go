package actions

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// Rollback actions: a helm Promotion whose rollout spent its failure
// budget with onFailure Rollback is RollingBack; the Promotion reconciler
// queued a rollback (its PromotionTarget's status.rollout.rollback) for every target
// it changed. While it is, the store offers those, and only those, to the
// targets' agents, and records their outcomes as it does an upgrade's.

// rollingBack reports whether pr offers its rollbacks rather than its
// upgrades.
func rollingBack(pr *tugboatv1alpha1.Promotion) bool {
	return pr.Status.Phase == tugboatv1alpha1.PromotionRollingBack
}

// rollbackOf returns the rollback of target t, or nil.
func rollbackOf(t *target) *tugboatv1alpha1.TargetAction {
	if t.Rollout == nil {
		return nil
	}
	return t.Rollout.Rollback
}

// offeredAction returns the action of t that pr offers in its phase: the
// rollback while it rolls back, else the upgrade. Nil when it has none.
func offeredAction(pr *tugboatv1alpha1.Promotion, t *target) *tugboatv1alpha1.TargetAction {
	if rollingBack(pr) {
		return rollbackOf(t)
	}
	return t.Action
}

// actionByID returns t's upgrade, rollback or helm test whose id is id,
// or nil.
func actionByID(t *target, id string) *tugboatv1alpha1.TargetAction {
	if t.HelmTest != nil && t.HelmTest.ID == id {
		return t.HelmTest
	}
	if t.Action != nil && t.Action.ID == id {
		return t.Action
	}
	if rb := rollbackOf(t); rb != nil && rb.ID == id {
		return rb
	}
	return nil
}

// deliverRollback returns the wire action of t's open rollback, marking
// it Delivered (at now) and counting the delivery; ok is false when t has
// none to offer. A rollback whose id is not the one this Promotion
// derives for t is never offered (nobody but the reconciler queues them).
func (s *Store) deliverRollback(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, t *target, now metav1.Time) (wire.Action, bool) {
	rb := rollbackOf(t)
	if rb == nil || !open(rb.Phase) || t.Action == nil ||
		rb.ID != wire.NewRollbackActionID(string(pr.UID), t.Spoke, t.Namespace, t.Release) {
		return wire.Action{}, false
	}
	up, err := s.action(ctx, pr, p, t)
	if err != nil {
		s.log.Info("Not offering a rollback", "promotion", pr.Namespace+"/"+pr.Name, "spoke", t.Spoke, "error", err.Error())
		return wire.Action{}, false
	}
	tr := t.Rollout
	a := wire.Action{
		ID:          rb.ID,
		Type:        wire.ActionRollback,
		Promotion:   up.Promotion,
		Namespace:   t.Namespace,
		Release:     t.Release,
		HelmRelease: up.HelmRelease,
		Rollback: &wire.RollbackAction{
			Revision: int(tr.BaselineRevision), Version: tr.BaselineVersion, From: pr.Spec.Version, Undoes: t.Action.ID,
		},
		Created: up.Created,
	}
	if st := pr.Status.Rollout; st != nil && st.RollbackStartedAt != nil {
		a.Created = st.RollbackStartedAt.UTC()
	}
	if rb.Phase == tugboatv1alpha1.ActionPending {
		rb.Phase, rb.LastUpdateTime = tugboatv1alpha1.ActionDelivered, &now
	}
	rb.Deliveries++
	return a, true
}
