package deliver

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
)

// holdReconciler sends HoldStarted when an environment appears in a
// Pipeline's status.heldEnvironments, and HoldReleased when it leaves.
type holdReconciler struct{ *deliverer }

// Reconcile sends the hold notices due for one Pipeline and records them
// in status.notifications.
func (r holdReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &tugboatv1alpha1.Pipeline{}
	if err := r.client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if len(p.Spec.Notify) == 0 {
		return ctrl.Result{}, nil
	}
	held := map[string]tugboatv1alpha1.HeldEnvironment{}
	for _, h := range p.Status.HeldEnvironments {
		held[h.Name] = h
	}
	records := map[string]*tugboatv1alpha1.HoldNotification{}
	for i := range p.Status.Notifications {
		n := &p.Status.Notifications[i]
		records[n.Notifier+"/"+string(n.Event)+"/"+n.Environment] = n
	}
	var (
		out     outcome
		updated []tugboatv1alpha1.HoldNotification
	)
	for i := range p.Spec.Notify {
		spec := &p.Spec.Notify[i]
		if modeOf(spec) == tugboatv1alpha1.NotifySummary {
			continue // a hold has no completion to summarize
		}
		for _, env := range p.Spec.Environments {
			started := records[spec.Name+"/"+string(tugboatv1alpha1.EventHoldStarted)+"/"+env.Name]
			released := records[spec.Name+"/"+string(tugboatv1alpha1.EventHoldReleased)+"/"+env.Name]
			h, isHeld := held[env.Name]
			var (
				e     tugboatv1alpha1.NotifyEvent
				rec   tugboatv1alpha1.HoldNotification
				since = h.Since
			)
			switch {
			case isHeld && wants(spec, tugboatv1alpha1.EventHoldStarted):
				e = tugboatv1alpha1.EventHoldStarted
				if started != nil && started.Since.Equal(&h.Since) {
					rec = *started
				} else {
					rec = tugboatv1alpha1.HoldNotification{Notifier: spec.Name, Event: e, Environment: env.Name, Since: h.Since}
				}
			case !isHeld && started != nil && wants(spec, tugboatv1alpha1.EventHoldReleased) &&
				(released == nil || !released.Since.Equal(&started.Since)):
				e, since = tugboatv1alpha1.EventHoldReleased, started.Since
				rec = tugboatv1alpha1.HoldNotification{Notifier: spec.Name, Event: e, Environment: env.Name, Since: since}
			case !isHeld && started != nil && released != nil && released.Since.Equal(&started.Since):
				rec, e = *released, tugboatv1alpha1.EventHoldReleased
			default:
				continue
			}
			before := rec.DeliveryState
			notice := notify.Notice{
				Event: e, Time: r.now(), Namespace: p.Namespace, Pipeline: p.Name, Release: p.Spec.Release,
				Hold: &notify.Hold{Environment: env.Name, Version: h.Version, Message: h.Message, Since: since.Time},
			}
			if e == tugboatv1alpha1.EventHoldStarted {
				notice.Time = h.Since.Time
			}
			r.attempt(ctx, p, spec, notice, "", &rec.DeliveryState, &out)
			if rec.DeliveryState != before {
				updated = append(updated, rec)
			}
		}
	}
	if len(updated) > 0 {
		if err := r.recordHolds(ctx, req.NamespacedName, updated); err != nil {
			return ctrl.Result{}, err
		}
		// The write changes the Pipeline; its condition is set on the
		// next pass, from a fresh copy.
	}
	r.setNotified(ctx, p, &out)
	return ctrl.Result{RequeueAfter: out.requeue}, nil
}

// recordHolds writes the updated hold records into the Pipeline's status.
func (r *deliverer) recordHolds(ctx context.Context, key types.NamespacedName, updated []tugboatv1alpha1.HoldNotification) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		p := &tugboatv1alpha1.Pipeline{}
		if err := r.reader.Get(ctx, key, p); err != nil {
			return client.IgnoreNotFound(err)
		}
		orig := p.DeepCopy()
		for _, u := range updated {
			found := false
			for i := range p.Status.Notifications {
				n := &p.Status.Notifications[i]
				if n.Notifier == u.Notifier && n.Event == u.Event && n.Environment == u.Environment {
					*n, found = u, true
				}
			}
			if !found {
				p.Status.Notifications = append(p.Status.Notifications, u)
			}
		}
		err := r.client.Status().Patch(ctx, p, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}
