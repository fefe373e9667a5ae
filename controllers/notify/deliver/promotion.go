package deliver

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// promotionEvents returns the events pr has reached, in order.
func promotionEvents(pr *tugboatv1alpha1.Promotion, env *tugboatv1alpha1.Environment) []tugboatv1alpha1.NotifyEvent {
	s := &pr.Status
	events := []tugboatv1alpha1.NotifyEvent{tugboatv1alpha1.EventPromotionCreated}
	if s.Phase == tugboatv1alpha1.PromotionWaitingApproval || len(s.Approvals) > 0 || s.Approval != nil ||
		(env != nil && env.Gates.RequireApproval && s.Phase != "" && s.Phase != tugboatv1alpha1.PromotionPending) {
		events = append(events, tugboatv1alpha1.EventPromotionWaitingApproval)
	}
	// The preview computed again after the approval differs from the one
	// approved (issue 26): told before the strategy's result.
	if s.Preview != nil && s.Preview.ChangedSinceApproval {
		events = append(events, tugboatv1alpha1.EventPromotionPreviewChanged)
	}
	// Running is told once the strategy acted, so the notice carries its
	// result (the pull request).
	if s.StrategyResult != nil || s.Phase == tugboatv1alpha1.PromotionVerifying {
		events = append(events, tugboatv1alpha1.EventPromotionRunning)
	}
	for _, e := range recurring {
		if occurrences(pr, e) > 0 {
			events = append(events, e)
		}
	}
	if s.Rollout != nil && s.Rollout.RollbackStartedAt != nil {
		events = append(events, tugboatv1alpha1.EventPromotionRollingBack)
	}
	if e, ok := terminalEvent(s.Phase); ok {
		events = append(events, e)
	}
	return events
}

// recurring are the events told once per occurrence, in this order
// within a pass: a rollout's waves, pauses and resumes.
var recurring = []tugboatv1alpha1.NotifyEvent{
	tugboatv1alpha1.EventPromotionWaveCompleted, tugboatv1alpha1.EventPromotionPaused, tugboatv1alpha1.EventPromotionResumed,
}

// occurrences is how many times recurring event e happened to pr: the
// waves that qualified (in order: waves before the current one), the
// pauses and the resumes of its rollout. 0 for another event.
func occurrences(pr *tugboatv1alpha1.Promotion, e tugboatv1alpha1.NotifyEvent) int32 {
	st := pr.Status.Rollout
	if st == nil || st.Resolved == nil {
		return 0
	}
	switch e {
	case tugboatv1alpha1.EventPromotionWaveCompleted:
		var n int32
		for _, w := range st.Waves {
			if w.CompletedAt == nil {
				break
			}
			n++
		}
		return n
	case tugboatv1alpha1.EventPromotionPaused:
		return st.Pauses
	case tugboatv1alpha1.EventPromotionResumed:
		return st.Resumes
	}
	return 0
}

func isRecurring(e tugboatv1alpha1.NotifyEvent) bool {
	for _, x := range recurring {
		if x == e {
			return true
		}
	}
	return false
}

func terminalEvent(phase tugboatv1alpha1.PromotionPhase) (tugboatv1alpha1.NotifyEvent, bool) {
	switch phase {
	case tugboatv1alpha1.PromotionSucceeded:
		return tugboatv1alpha1.EventPromotionSucceeded, true
	case tugboatv1alpha1.PromotionFailed:
		return tugboatv1alpha1.EventPromotionFailed, true
	case tugboatv1alpha1.PromotionAborted:
		return tugboatv1alpha1.EventPromotionAborted, true
	}
	return "", false
}

// promotionReconciler sends the notices about Promotions.
type promotionReconciler struct{ *deliverer }

// Reconcile sends every notice due about one Promotion and records it in
// status.notifications.
func (r promotionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pr := &tugboatv1alpha1.Promotion{}
	if err := r.client.Get(ctx, req.NamespacedName, pr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	p := &tugboatv1alpha1.Pipeline{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: pr.Namespace, Name: pr.Spec.Pipeline}, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if len(p.Spec.Notify) == 0 {
		return ctrl.Result{}, nil
	}
	var env *tugboatv1alpha1.Environment
	if i := pipeline.EnvironmentIndex(p, pr.Spec.To); i >= 0 {
		env = &p.Spec.Environments[i]
	}
	reached := promotionEvents(pr, env)
	records := map[string]tugboatv1alpha1.NotificationDelivery{}
	for _, n := range pr.Status.Notifications {
		records[n.Notifier+"/"+string(n.Event)] = n
	}
	var (
		out     outcome
		updated []tugboatv1alpha1.NotificationDelivery
	)
	stale := pr.Status.CompletedAt != nil && r.now().Sub(pr.Status.CompletedAt.Time) > r.opts.MaxAge
	for i := range p.Spec.Notify {
		spec := &p.Spec.Notify[i]
		thread := threadOf(pr.Status.Notifications, spec.Name)
		for _, e := range r.dueEvents(spec, reached) {
			rec, seen := records[spec.Name+"/"+string(e)]
			if !seen {
				rec = tugboatv1alpha1.NotificationDelivery{Notifier: spec.Name, Event: e}
			}
			due := occurrences(pr, e)
			if isRecurring(e) && rec.Occurrence < due && (!seen || rec.Phase == tugboatv1alpha1.NotificationDelivered || rec.Phase == tugboatv1alpha1.NotificationFailed) {
				// The next occurrence (the next wave, pause or resume)
				// reuses the record: one notice per occurrence, in order.
				rec.Occurrence++
				rec.DeliveryState = tugboatv1alpha1.DeliveryState{Phase: tugboatv1alpha1.NotificationPending}
				seen = false
			}
			if stale && !seen {
				r.skip(spec, e, &rec.DeliveryState, &out)
				updated = append(updated, rec)
				continue
			}
			before := rec.DeliveryState
			notice := r.promotionNotice(ctx, p, env, pr, spec, e)
			if isRecurring(e) {
				rolloutNotice(&notice, pr, e, rec.Occurrence)
			}
			if ref := r.attempt(ctx, p, spec, notice, thread, &rec.DeliveryState, &out); ref != "" && rec.Reference == "" {
				rec.Reference = clip.String(ref, 256)
				if thread == "" {
					thread = rec.Reference
				}
			}
			if rec.DeliveryState != before || !seen {
				updated = append(updated, rec)
			}
			if rec.Phase != tugboatv1alpha1.NotificationDelivered && rec.Phase != tugboatv1alpha1.NotificationFailed {
				// Keep the order of one notifier's notices: the next waits.
				break
			}
			if rec.Occurrence < due {
				// More occurrences to tell (waves that qualified at once):
				// the next pass tells the next one, before later events.
				out.after(time.Millisecond)
				break
			}
		}
	}
	if len(updated) > 0 {
		if err := r.recordPromotion(ctx, req.NamespacedName, updated); err != nil {
			return ctrl.Result{}, err
		}
	}
	r.setNotified(ctx, p, &out)
	return ctrl.Result{RequeueAfter: out.requeue}, nil
}

// dueEvents filters reached by what spec selects and its mode: a summary
// notifier is told only the event that completed the promotion.
func (r *deliverer) dueEvents(spec *tugboatv1alpha1.Notifier, reached []tugboatv1alpha1.NotifyEvent) []tugboatv1alpha1.NotifyEvent {
	if modeOf(spec) == tugboatv1alpha1.NotifySummary {
		last := reached[len(reached)-1]
		if _, terminal := terminalPromotionEvent[last]; terminal && wants(spec, last) {
			return []tugboatv1alpha1.NotifyEvent{last}
		}
		return nil
	}
	var due []tugboatv1alpha1.NotifyEvent
	for _, e := range reached {
		if wants(spec, e) {
			due = append(due, e)
		}
	}
	return due
}

var terminalPromotionEvent = map[tugboatv1alpha1.NotifyEvent]struct{}{
	tugboatv1alpha1.EventPromotionSucceeded: {}, tugboatv1alpha1.EventPromotionFailed: {}, tugboatv1alpha1.EventPromotionAborted: {},
}

// threadOf returns the Reference of the first notice of notifier that has
// one: later notices about the same promotion go into its thread.
func threadOf(records []tugboatv1alpha1.NotificationDelivery, notifier string) string {
	for _, n := range records {
		if n.Notifier == notifier && n.Reference != "" {
			return n.Reference
		}
	}
	return ""
}

// recordPromotion writes the updated records into the Promotion's status,
// re-reading it on conflict: the Promotion controller writes the same
// status, and a notice already sent must not be sent again because of a
// conflict.
func (r *deliverer) recordPromotion(ctx context.Context, key types.NamespacedName, updated []tugboatv1alpha1.NotificationDelivery) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		pr := &tugboatv1alpha1.Promotion{}
		var err error
		if first {
			err = r.client.Get(ctx, key, pr)
		} else {
			err = r.reader.Get(ctx, key, pr)
		}
		first = false
		if err != nil {
			return client.IgnoreNotFound(err)
		}
		orig := pr.DeepCopy()
		for _, u := range updated {
			found := false
			for i := range pr.Status.Notifications {
				n := &pr.Status.Notifications[i]
				if n.Notifier == u.Notifier && n.Event == u.Event {
					*n, found = u, true
				}
			}
			if !found {
				pr.Status.Notifications = append(pr.Status.Notifications, u)
			}
		}
		if len(pr.Status.Notifications) > 100 {
			pr.Status.Notifications = pr.Status.Notifications[len(pr.Status.Notifications)-100:]
		}
		err = r.client.Status().Patch(ctx, pr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// setNotified records the pass's results in the Pipeline's
// status.notifiers and sets its Notified condition from them: False while
// any notifier's last attempt failed, naming it and its error. It writes
// only when something changed.
func (r *deliverer) setNotified(ctx context.Context, p *tugboatv1alpha1.Pipeline, out *outcome) {
	if len(out.results) == 0 {
		return
	}
	_ = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		fresh := &tugboatv1alpha1.Pipeline{}
		if err := r.reader.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
			return client.IgnoreNotFound(err)
		}
		orig := fresh.DeepCopy()
		now := metav1.NewTime(r.now())
		for name, err := range out.results {
			var st *tugboatv1alpha1.NotifierStatus
			for i := range fresh.Status.Notifiers {
				if fresh.Status.Notifiers[i].Name == name {
					st = &fresh.Status.Notifiers[i]
				}
			}
			if st == nil {
				fresh.Status.Notifiers = append(fresh.Status.Notifiers, tugboatv1alpha1.NotifierStatus{Name: name})
				st = &fresh.Status.Notifiers[len(fresh.Status.Notifiers)-1]
			}
			if err == nil {
				st.LastDeliveredAt = &now
			} else {
				st.LastFailedAt, st.LastError = &now, err.Error()
			}
		}
		// Forget notifiers no longer in the spec.
		kept := fresh.Status.Notifiers[:0]
		for _, st := range fresh.Status.Notifiers {
			for _, n := range fresh.Spec.Notify {
				if n.Name == st.Name {
					kept = append(kept, st)
					break
				}
			}
		}
		fresh.Status.Notifiers = kept
		if len(fresh.Status.Notifiers) > 10 {
			fresh.Status.Notifiers = fresh.Status.Notifiers[:10]
		}
		apimeta.SetStatusCondition(&fresh.Status.Conditions, notifiedCondition(fresh))
		if equality.Semantic.DeepEqual(orig.Status, fresh.Status) {
			return nil
		}
		return r.client.Status().Patch(ctx, fresh, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
}

// notifiedCondition is False while any notifier's last attempt failed.
func notifiedCondition(p *tugboatv1alpha1.Pipeline) metav1.Condition {
	var failing []string
	for _, st := range p.Status.Notifiers {
		if st.LastFailedAt != nil && (st.LastDeliveredAt == nil || st.LastDeliveredAt.Before(st.LastFailedAt)) {
			failing = append(failing, st.Name+": "+st.LastError)
		}
	}
	sort.Strings(failing)
	if len(failing) == 0 {
		return metavOK(p.Generation)
	}
	return metavFailed(p.Generation, fmt.Sprintf("%d notifier(s) failing: %s", len(failing), joinClip(failing, 900)))
}

// since returns how long ago t was, from the deliverer's clock.
func (r *deliverer) since(t time.Time) time.Duration { return r.now().Sub(t) }

func joinClip(parts []string, n int) string { return clip.String(strings.Join(parts, "; "), n) }
