package gauges

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/dora"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// Options configure the DORA gauges.
type Options struct {
	// Window is the period the figures cover.
	Window time.Duration
	// MinInterval is the shortest time between two computations of one
	// Pipeline's figures: changes within it are folded into one.
	MinInterval time.Duration
	// Resync recomputes every Pipeline's figures this often, as the
	// window slides, when nothing changes.
	Resync time.Duration
}

// NewOptions returns the defaults.
func NewOptions() Options {
	return Options{Window: dora.DefaultWindow, MinInterval: 30 * time.Second, Resync: 10 * time.Minute}
}

// BindFlags binds the options to fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.Window, "dora-window", o.Window, "period the DORA gauges (tugboat_dora_*) cover")
	fs.DurationVar(&o.MinInterval, "dora-min-interval", o.MinInterval, "shortest time between two computations of one Pipeline's DORA figures")
	fs.DurationVar(&o.Resync, "dora-resync", o.Resync, "how often every Pipeline's DORA figures are recomputed as the window slides")
}

// Validate reports every invalid option.
func (o *Options) Validate() error {
	switch {
	case o.Window <= 0:
		return fmt.Errorf("--dora-window must be positive, not %s", o.Window)
	case o.MinInterval < 0:
		return fmt.Errorf("--dora-min-interval must not be negative, not %s", o.MinInterval)
	case o.Resync <= 0:
		return fmt.Errorf("--dora-resync must be positive, not %s", o.Resync)
	}
	return nil
}

// Reconciler keeps the DORA gauges of every Pipeline current.
type Reconciler struct {
	// Client reads Pipelines, Promotions and ReleaseHistories (from the
	// manager's cache); pipeline.IndexFields must have run on its manager.
	Client  client.Client
	Options Options
	// Now tells the time (tests); nil uses time.Now.
	Now func() time.Time

	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

// +kubebuilder:rbac:groups=tugboat.dev,resources=pipelines,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotions,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=releasehistories,verbs=get;list;watch

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if err := r.Options.Validate(); err != nil {
		return err
	}
	r.last = map[types.NamespacedName]time.Time{}
	return ctrl.NewControllerManagedBy(mgr).
		For(&tugboatv1alpha1.Pipeline{}).
		Watches(&tugboatv1alpha1.Promotion{}, handler.EnqueueRequestsFromMapFunc(pipelineOfPromotion)).
		Watches(&tugboatv1alpha1.ReleaseHistory{}, handler.EnqueueRequestsFromMapFunc(r.pipelinesOfHistory)).
		Named("dora").
		Complete(r)
}

func pipelineOfPromotion(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.(*tugboatv1alpha1.Promotion).Spec.Pipeline}}}
}

// pipelinesOfHistory requests the Pipelines a ReleaseHistory is a target
// of. A failed lookup is logged: the next Resync catches up.
func (r *Reconciler) pipelinesOfHistory(ctx context.Context, o client.Object) []reconcile.Request {
	list, err := pipeline.PipelinesFor(ctx, r.Client, o)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing the pipelines a ReleaseHistory concerns", "releaseHistory", client.ObjectKeyFromObject(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list))
	for _, p := range list {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	return reqs
}

// Reconcile recomputes one Pipeline's figures, unless it did less than
// MinInterval ago: then it comes back when the interval is over.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &tugboatv1alpha1.Pipeline{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			remove(req.Namespace, req.Name)
			r.mu.Lock()
			delete(r.last, req.NamespacedName)
			r.mu.Unlock()
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	now := r.Now()
	r.mu.Lock()
	last, seen := r.last[req.NamespacedName]
	r.mu.Unlock()
	if wait := r.Options.MinInterval - now.Sub(last); seen && wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	var histories tugboatv1alpha1.ReleaseHistoryList
	if err := r.Client.List(ctx, &histories, client.InNamespace(p.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing ReleaseHistories: %w", err)
	}
	var promotions tugboatv1alpha1.PromotionList
	if err := r.Client.List(ctx, &promotions, client.InNamespace(p.Namespace), client.MatchingFields{pipeline.PromotionPipelineIndex: p.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing Promotions: %w", err)
	}
	f := dora.Compute(dora.Input{Pipeline: p, Histories: histories.Items, Promotions: promotions.Items, Now: now, Window: r.Options.Window})
	set(&f)
	r.mu.Lock()
	r.last[req.NamespacedName] = now
	r.mu.Unlock()
	return ctrl.Result{RequeueAfter: r.Options.Resync}, nil
}
