package lifecycle

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/statuspatch"
)

// Reasons of a Lifecycle's Ready condition.
const (
	// ClaimedReason: a controller claimed the Lifecycle within ClaimWindow.
	ClaimedReason tugboatv1alpha1.ConditionReason = "Claimed"
	// NotClaimedReason: no controller ever claimed it.
	NotClaimedReason tugboatv1alpha1.ConditionReason = "NotClaimed"
	// ClaimExpiredReason: its last claim is older than ClaimWindow.
	ClaimExpiredReason tugboatv1alpha1.ConditionReason = "ClaimExpired"
)

// Reconciler is the hub's side of a Lifecycle: it says in the Ready
// condition whether a controller claimed it within ClaimWindow (the
// claim itself is the controller's: Claim), and looks again when the
// claim expires.
type Reconciler struct {
	Client client.Client
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=tugboat.dev,resources=lifecycles,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=lifecycles/status,verbs=get;update;patch

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).For(&tugboatv1alpha1.Lifecycle{}).Named("lifecycle").Complete(r)
}

// Reconcile writes one Lifecycle's Ready condition from its claim: True
// while claimed within ClaimWindow (requeued for when the claim expires),
// else False, saying that the external steps naming it will time out.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lc := &tugboatv1alpha1.Lifecycle{}
	if err := r.Client.Get(ctx, req.NamespacedName, lc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	patcher := statuspatch.New(lc, r.Client)
	now := r.Now()
	var (
		status  metav1.ConditionStatus
		reason  tugboatv1alpha1.ConditionReason
		message string
		res     ctrl.Result
	)
	switch t := lc.Status.LastClaimedAt; {
	case Claimed(lc, now):
		status, reason = metav1.ConditionTrue, ClaimedReason
		message = fmt.Sprintf("claimed by %s at %s", lc.Status.ClaimedBy, t.UTC().Format(time.RFC3339))
		res.RequeueAfter = max(t.Add(ClaimWindow).Sub(now), time.Second)
	case t == nil:
		status, reason = metav1.ConditionFalse, NotClaimedReason
		message = fmt.Sprintf("no controller has claimed lifecycle %s: the external steps naming it wait for nobody and time out (its controller claims it through lifecycles/status: docs/lifecycle.md)", lc.Name)
	default:
		status, reason = metav1.ConditionFalse, ClaimExpiredReason
		message = fmt.Sprintf("last claimed by %s at %s, more than %s ago: is its controller running? The external steps naming it time out meanwhile",
			lc.Status.ClaimedBy, t.UTC().Format(time.RFC3339), ClaimWindow)
	}
	statuspatch.Set(lc, tugboatv1alpha1.ReadyCondition, status, reason, message)
	if err := patcher.Patch(ctx, lc, true, nil); err != nil {
		return ctrl.Result{}, err
	}
	return res, nil
}
