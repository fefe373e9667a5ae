package deliver

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// +kubebuilder:rbac:groups=tugboat.dev,resources=promotions,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotiontargets,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=pipelines,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=pipelines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=tugboat.dev,resources=releasehistories,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=releasehistories/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Reconciler sends the notices of every Pipeline's notifiers: it runs three
// controllers, one per kind a notice is about (Promotions, Pipelines for
// their holds, ReleaseHistories for deployments).
type Reconciler struct {
	// Client reads from the cache and writes status.
	Client client.Client
	// APIReader reads around the cache after a write conflict.
	APIReader client.Reader
	// Builder turns notifier specs into notifiers.
	Builder Builder
	// Options configure delivery.
	Options Options
	// Now is the clock; defaults to time.Now.
	Now func() time.Time
}

// deliverer is the state the three controllers share.
type deliverer struct {
	client  client.Client
	reader  client.Reader
	builder Builder
	opts    Options
	now     func() time.Time
}

// SetupWithManager registers the three controllers; pipeline.IndexFields
// must have run on mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	def := NewOptions()
	if r.Options.MaxAttempts <= 0 {
		r.Options.MaxAttempts = def.MaxAttempts
	}
	if r.Options.RetryBase <= 0 {
		r.Options.RetryBase = def.RetryBase
	}
	if r.Options.RetryMax <= 0 {
		r.Options.RetryMax = def.RetryMax
	}
	if r.Options.Timeout <= 0 {
		r.Options.Timeout = def.Timeout
	}
	if r.Options.MaxAge <= 0 {
		r.Options.MaxAge = def.MaxAge
	}
	d := &deliverer{client: r.Client, reader: r.APIReader, builder: r.Builder, opts: r.Options, now: r.Now}
	if err := ctrl.NewControllerManagedBy(mgr).
		For(&tugboatv1alpha1.Promotion{}).
		Named("notify-promotion").
		Complete(promotionReconciler{d}); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		For(&tugboatv1alpha1.Pipeline{}).
		Named("notify-hold").
		Complete(holdReconciler{d}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&tugboatv1alpha1.ReleaseHistory{}).
		Named("notify-deployment").
		Complete(deploymentReconciler{d})
}
