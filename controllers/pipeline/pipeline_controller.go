package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
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
	"tugboat.dev/tugboat/controllers/statuspatch"
)

// Reconciler reconciles Pipelines.
type Reconciler struct {
	// Client reads from the cache and writes.
	Client client.Client
	// APIReader reads Secrets, which the hub does not cache.
	APIReader client.Reader
	// Now is the clock; defaults to time.Now.
	Now func() time.Time
	// Recorder emits the Events of holds set and lifted; nil emits none.
	Recorder events.EventRecorder
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
	return indexFields(ctx, mgr.GetFieldIndexer())
}

func indexFields(ctx context.Context, fi client.FieldIndexer) error {
	if err := fi.IndexField(ctx, &tugboatv1alpha1.Pipeline{}, TargetIndex, func(o client.Object) []string {
		p := o.(*tugboatv1alpha1.Pipeline)
		var names []string
		for i := range p.Spec.Environments {
			for j := range p.Spec.Environments[i].Targets {
				t := &p.Spec.Environments[i].Targets[j]
				if t.SpokeSelector != nil {
					names = append(names, selectorKey(t.Namespace, ReleaseOf(p, t)))
					continue
				}
				names = append(names, HistoryName(p, t))
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
				name := t.Spoke
				if t.SpokeSelector != nil {
					name = selectorIndexValue
				}
				if !seen[name] {
					seen[name] = true
					names = append(names, name)
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
	return r.pipelinesFor(ctx, o)
}

func (r *Reconciler) pipelinesForSpoke(ctx context.Context, o client.Object) []reconcile.Request {
	return r.pipelinesFor(ctx, o)
}

// pipelinesForObject maps an object sent to remap again.
func (r *Reconciler) pipelinesForObject(ctx context.Context, o client.Object) []reconcile.Request {
	return r.pipelinesFor(ctx, o)
}

// pipelinesFor requests the Pipelines o concerns (PipelinesFor). When the
// list fails it logs the error and maps o again MapRetry later, for as
// long as it fails.
func (r *Reconciler) pipelinesFor(ctx context.Context, o client.Object) []reconcile.Request {
	list, err := PipelinesFor(ctx, r.Client, o)
	if err != nil {
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
	reqs := make([]reconcile.Request, 0, len(list))
	for _, p := range list {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	return reqs
}

// PipelinesFor lists the Pipelines of o's namespace that a Spoke or a
// ReleaseHistory o concerns, through the field indexes IndexFields
// registers on c: those naming the Spoke (or the history's target), and
// those whose spokeSelector matches the Spoke's labels (for a history,
// the labels of its Spoke, and only a selector target of its namespace
// and release). For a Spoke update, controller-runtime maps the old and
// the new object, so a Spoke that loses a label still reaches the
// Pipelines that selected it.
func PipelinesFor(ctx context.Context, c client.Reader, o client.Object) ([]tugboatv1alpha1.Pipeline, error) {
	var index, selectorValue string
	var lbls map[string]string
	var release *[2]string
	switch obj := o.(type) {
	case *tugboatv1alpha1.Spoke:
		index, selectorValue, lbls = SpokeIndex, selectorIndexValue, obj.Labels
	case *tugboatv1alpha1.ReleaseHistory:
		index, selectorValue = TargetIndex, selectorKey(obj.Spec.Namespace, obj.Spec.Release)
		release = &[2]string{obj.Spec.Namespace, obj.Spec.Release}
	default:
		return nil, fmt.Errorf("no pipelines for a %T", o)
	}
	var named, selecting tugboatv1alpha1.PipelineList
	if err := c.List(ctx, &named, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
		return nil, err
	}
	if err := c.List(ctx, &selecting, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: selectorValue}); err != nil {
		return nil, err
	}
	out := named.Items
	if len(selecting.Items) == 0 {
		return out, nil
	}
	if release != nil {
		sp := &tugboatv1alpha1.Spoke{}
		err := c.Get(ctx, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.(*tugboatv1alpha1.ReleaseHistory).Spec.Spoke}, sp)
		switch {
		case apierrors.IsNotFound(err):
			return out, nil // no Spoke, nothing selected
		case err != nil:
			return nil, err
		}
		lbls = sp.Labels
	}
	for i := range selecting.Items {
		p := &selecting.Items[i]
		if selects(p, lbls, release) && !slices.ContainsFunc(out, func(q tugboatv1alpha1.Pipeline) bool { return q.Name == p.Name }) {
			out = append(out, *p)
		}
	}
	return out, nil
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
	// Nothing changed (most reconciles: heartbeats reconcile every
	// Pipeline of a Spoke): the patcher sends no request.
	patcher := statuspatch.New(p, r.Client)
	heldBefore := slices.Clone(p.Status.HeldEnvironments)
	defer func() {
		if err := patcher.Patch(ctx, p, retErr == nil, nil); err != nil {
			if retErr == nil {
				retErr = err
			}
			return
		}
		recordHolds(r.Recorder, p, heldBefore, p.Status.HeldEnvironments)
	}()

	// 1. A configuration error is terminal: Stalled, no requeue (a Spoke
	// that changes the expansion of a spokeSelector maps to the Pipeline).
	spokes, err := listSpokes(ctx, r.Client, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.validate(ctx, p, spokes); err != nil {
		r.setStalled(p, err)
		return ctrl.Result{RequeueAfter: err.requeue}, nil
	}
	statuspatch.Delete(p, tugboatv1alpha1.StalledCondition)

	// 2. Where each environment stands.
	promos, err := r.promotions(ctx, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	view, err := r.observe(ctx, p, promos, spokes)
	if err != nil {
		return ctrl.Result{}, err
	}

	// 3. Decide and create promotions.
	requeue, err := r.decide(ctx, p, view, promos)
	if apierrors.IsConflict(err) {
		// A Promotion moved on since the cache's copy (supersede writes
		// with its resourceVersion): decide again from a fresher one; not
		// a failure.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
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
	statuspatch.Set(p, tugboatv1alpha1.StalledCondition, metav1.ConditionTrue, err.reason, err.Error())
	statuspatch.Set(p, tugboatv1alpha1.ReadyCondition, metav1.ConditionFalse, err.reason, err.Error())
	statuspatch.Delete(p, tugboatv1alpha1.ReconcilingCondition)
}

// setFailed reports an error that stopped the decision in Ready=False
// (ReconciliationFailed); the reconcile is retried with back-off, and the
// next one that gets through sets Ready again.
func (r *Reconciler) setFailed(p *tugboatv1alpha1.Pipeline, err error) {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ") // errors.Join's lines
	statuspatch.Set(p, tugboatv1alpha1.ReadyCondition, metav1.ConditionFalse, tugboatv1alpha1.ReconciliationFailedReason, msg)
}
