package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Reconciler reconciles Pipelines.
type Reconciler struct {
	// Client reads from the cache and writes.
	Client client.Client
	// APIReader reads Secrets, which the hub does not cache.
	APIReader client.Reader
	// Now is the clock; defaults to time.Now.
	Now func() time.Time
	// MaxConcurrentReconciles is how many Pipelines are reconciled at once;
	// defaults to 4. Reconciles mostly wait on API writes, so one worker
	// queues a burst of releases (100 pipelines converging together) for
	// seconds.
	MaxConcurrentReconciles int
	// MapRetry is how long after a failed lookup of the Pipelines a
	// ReleaseHistory or Spoke concerns it is looked up again; defaults to
	// 2s.
	MapRetry time.Duration

	// remap receives a ReleaseHistory or Spoke whose Pipelines could not be
	// listed, MapRetry later, to map it again (a map function cannot
	// return an error, and dropping the event would leave a Pipeline
	// undecided until its next change).
	remap chan event.GenericEvent
}

// +kubebuilder:rbac:groups=tugboat.dev,resources=pipelines,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=pipelines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotions,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=tugboat.dev,resources=releasehistories,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=spokes,verbs=get;list;watch

// IndexFields registers the field indexes the Pipeline and Promotion
// reconcilers use. Call it once per manager.
func IndexFields(ctx context.Context, mgr ctrl.Manager) error {
	fi := mgr.GetFieldIndexer()
	if err := fi.IndexField(ctx, &tugboatv1alpha1.Pipeline{}, TargetIndex, func(o client.Object) []string {
		p := o.(*tugboatv1alpha1.Pipeline)
		var names []string
		for i := range p.Spec.Environments {
			for j := range p.Spec.Environments[i].Targets {
				names = append(names, HistoryName(p, &p.Spec.Environments[i].Targets[j]))
			}
		}
		return names
	}); err != nil {
		return err
	}
	if err := fi.IndexField(ctx, &tugboatv1alpha1.Pipeline{}, SpokeIndex, func(o client.Object) []string {
		p := o.(*tugboatv1alpha1.Pipeline)
		seen := map[string]bool{}
		var names []string
		for i := range p.Spec.Environments {
			for _, t := range p.Spec.Environments[i].Targets {
				if !seen[t.Spoke] {
					seen[t.Spoke] = true
					names = append(names, t.Spoke)
				}
			}
		}
		return names
	}); err != nil {
		return err
	}
	return fi.IndexField(ctx, &tugboatv1alpha1.Promotion{}, PromotionPipelineIndex, func(o client.Object) []string {
		return []string{o.(*tugboatv1alpha1.Promotion).Spec.Pipeline}
	})
}

// SetupWithManager registers the reconciler; IndexFields must have run.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.MaxConcurrentReconciles <= 0 {
		r.MaxConcurrentReconciles = 4
	}
	r.init()
	return ctrl.NewControllerManagedBy(mgr).
		For(&tugboatv1alpha1.Pipeline{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&tugboatv1alpha1.Promotion{}).
		Watches(&tugboatv1alpha1.ReleaseHistory{}, handler.EnqueueRequestsFromMapFunc(r.pipelinesForHistory)).
		Watches(&tugboatv1alpha1.Spoke{}, handler.EnqueueRequestsFromMapFunc(r.pipelinesForSpoke)).
		WatchesRawSource(source.Channel(r.remap, handler.EnqueueRequestsFromMapFunc(r.pipelinesForObject))).
		Named("pipeline").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}

func (r *Reconciler) init() {
	if r.MapRetry <= 0 {
		r.MapRetry = 2 * time.Second
	}
	if r.remap == nil {
		r.remap = make(chan event.GenericEvent, 1024)
	}
}

func (r *Reconciler) pipelinesForHistory(ctx context.Context, o client.Object) []reconcile.Request {
	return r.pipelinesBy(ctx, o, TargetIndex)
}

func (r *Reconciler) pipelinesForSpoke(ctx context.Context, o client.Object) []reconcile.Request {
	return r.pipelinesBy(ctx, o, SpokeIndex)
}

// pipelinesForObject maps an object sent to remap again.
func (r *Reconciler) pipelinesForObject(ctx context.Context, o client.Object) []reconcile.Request {
	if _, ok := o.(*tugboatv1alpha1.Spoke); ok {
		return r.pipelinesForSpoke(ctx, o)
	}
	return r.pipelinesForHistory(ctx, o)
}

// pipelinesBy lists the Pipelines of o's namespace whose index holds o's
// name. When the list fails it logs the error and maps o again MapRetry
// later, for as long as it fails.
func (r *Reconciler) pipelinesBy(ctx context.Context, o client.Object, index string) []reconcile.Request {
	var list tugboatv1alpha1.PipelineList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "listing the pipelines concerned; retrying", "kind", fmt.Sprintf("%T", o), "object", client.ObjectKeyFromObject(o), "retryIn", r.MapRetry)
		mapErrors.Inc()
		r.init()
		time.AfterFunc(r.MapRetry, func() {
			select {
			case r.remap <- event.GenericEvent{Object: o}:
			case <-ctx.Done():
			}
		})
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	return reqs
}

// Reconcile brings one Pipeline's status up to date and decides its
// promotions.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	p := &tugboatv1alpha1.Pipeline{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	orig := p.DeepCopy()
	defer func() {
		if retErr == nil {
			p.Status.ObservedGeneration = p.Generation
		}
		if apiequality.Semantic.DeepEqual(orig.Status, p.Status) {
			return // nothing changed: no request (heartbeats reconcile every Pipeline of a Spoke)
		}
		if err := r.Client.Status().Patch(ctx, p, client.MergeFrom(orig)); err != nil && retErr == nil {
			retErr = client.IgnoreNotFound(err)
		}
	}()

	// 1. A configuration error is terminal: Stalled, no requeue.
	if err := r.validate(ctx, p); err != nil {
		r.setStalled(p, err)
		return ctrl.Result{RequeueAfter: err.requeue}, nil
	}
	apimeta.RemoveStatusCondition(&p.Status.Conditions, tugboatv1alpha1.StalledCondition.String())

	// 2. Where each environment stands.
	promos, err := r.promotions(ctx, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	view, err := r.observe(ctx, p, promos)
	if err != nil {
		return ctrl.Result{}, err
	}

	// 3. Decide and create promotions.
	requeue, err := r.decide(ctx, p, view, promos)
	if err != nil {
		r.setFailed(p, err)
		return ctrl.Result{}, err
	}

	// 4. Retention.
	if err := r.prune(ctx, p, promos); err != nil {
		return ctrl.Result{}, err
	}
	r.setReady(p, view)
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// promotions lists the Pipeline's Promotions.
func (r *Reconciler) promotions(ctx context.Context, p *tugboatv1alpha1.Pipeline) ([]tugboatv1alpha1.Promotion, error) {
	var list tugboatv1alpha1.PromotionList
	if err := r.Client.List(ctx, &list, client.InNamespace(p.Namespace), client.MatchingFields{PromotionPipelineIndex: p.Name}); err != nil {
		return nil, fmt.Errorf("listing promotions: %w", err)
	}
	return list.Items, nil
}

func (r *Reconciler) setStalled(p *tugboatv1alpha1.Pipeline, err *specError) {
	set := func(t tugboatv1alpha1.ConditionType, s metav1.ConditionStatus) {
		apimeta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
			Type: t.String(), Status: s, Reason: err.reason.String(), Message: err.Error(), ObservedGeneration: p.Generation,
		})
	}
	set(tugboatv1alpha1.StalledCondition, metav1.ConditionTrue)
	set(tugboatv1alpha1.ReadyCondition, metav1.ConditionFalse)
	apimeta.RemoveStatusCondition(&p.Status.Conditions, tugboatv1alpha1.ReconcilingCondition.String())
}

// setFailed reports an error that stopped the decision in Ready=False
// (ReconciliationFailed); the reconcile is retried with back-off, and the
// next one that gets through sets Ready again.
func (r *Reconciler) setFailed(p *tugboatv1alpha1.Pipeline, err error) {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ") // errors.Join's lines
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	apimeta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
		Type: tugboatv1alpha1.ReadyCondition.String(), Status: metav1.ConditionFalse,
		Reason: tugboatv1alpha1.ReconciliationFailedReason.String(), Message: msg, ObservedGeneration: p.Generation,
	})
}
