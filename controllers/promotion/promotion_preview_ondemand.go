package promotion

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// On-demand previews (issue 26): `tugboat diff PIPELINE --from ENV --to
// ENV` creates a PromotionPreview naming only spec.pipeline, from and to
// (the policy tugboat-previews lets a person write nothing else). The
// OnDemandReconciler resolves it once: the version that runs in from
// (the chart version most of from's targets report), and the targets of
// to, one per distinct set of values, exactly as for a Promotion's
// preview; it writes them into the spec with a deadline
// (--promotion-preview-timeout), and the actions store offers the preview
// actions to the agents. What it cannot resolve it records in
// status.failure. Every on-demand preview is deleted once its time to
// live (--promotion-preview-ttl) passed.

// +kubebuilder:rbac:groups=tugboat.dev,resources=promotionpreviews,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotionpreviews/status,verbs=get;patch

// DefaultPreviewTTL is how long an on-demand preview is kept.
const DefaultPreviewTTL = 15 * time.Minute

// OnDemandReconciler resolves and cleans up on-demand PromotionPreviews.
type OnDemandReconciler struct {
	Client client.Client
	// Timeout bounds the wait for the agents' answers
	// (DefaultPreviewTimeout when 0); TTL is how long a preview is kept
	// after its creation (DefaultPreviewTTL when 0).
	Timeout, TTL time.Duration
	Now          func() time.Time
}

// SetupWithManager registers the reconciler for on-demand previews only.
func (r *OnDemandReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	onDemand := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pp, ok := o.(*tugboatv1alpha1.PromotionPreview)
		return ok && pp.Spec.OnDemand()
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&tugboatv1alpha1.PromotionPreview{}, builder.WithPredicates(onDemand)).
		Named("promotionpreview-ondemand").
		Complete(r)
}

// Reconcile deletes an expired on-demand preview, and resolves a new one.
func (r *OnDemandReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pp := &tugboatv1alpha1.PromotionPreview{}
	if err := r.Client.Get(ctx, req.NamespacedName, pp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pp.Spec.OnDemand() || !pp.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	expires := pp.CreationTimestamp.Add(cmp.Or(r.TTL, DefaultPreviewTTL))
	if !r.Now().Before(expires) {
		log.FromContext(ctx).Info("Deleting an on-demand preview past its time to live", "preview", req.String())
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, pp, client.Preconditions{UID: &pp.UID}))
	}
	after := ctrl.Result{RequeueAfter: expires.Sub(r.Now()) + time.Second}
	if len(pp.Spec.Targets) > 0 || pp.Status.Failure != "" {
		return after, nil
	}
	spec, why, err := r.resolve(ctx, pp)
	if err != nil {
		return ctrl.Result{}, err
	}
	if why != "" {
		orig := pp.DeepCopy()
		pp.Status.Failure = clip.String(why, 1024)
		return after, client.IgnoreNotFound(r.Client.Status().Patch(ctx, pp, client.MergeFrom(orig)))
	}
	pp.Spec = spec
	if err := r.Client.Update(ctx, pp); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return after, nil
}

// resolve returns pp's spec with the version that runs in from and the
// targets of to, or why it cannot be previewed.
func (r *OnDemandReconciler) resolve(ctx context.Context, pp *tugboatv1alpha1.PromotionPreview) (tugboatv1alpha1.PromotionPreviewSpec, string, error) {
	spec := pp.Spec
	p := &tugboatv1alpha1.Pipeline{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: pp.Namespace, Name: spec.Pipeline}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return spec, fmt.Sprintf("pipeline %s not found in namespace %s", spec.Pipeline, pp.Namespace), nil
		}
		return spec, "", err
	}
	fi, ti := pipeline.EnvironmentIndex(p, spec.From), pipeline.EnvironmentIndex(p, spec.To)
	switch {
	case fi < 0:
		return spec, fmt.Sprintf("pipeline %s has no environment %q", p.Name, spec.From), nil
	case ti < 0:
		return spec, fmt.Sprintf("pipeline %s has no environment %q", p.Name, spec.To), nil
	}
	from, to := &p.Spec.Environments[fi], &p.Spec.Environments[ti]
	s := pipeline.StrategyFor(p, to)
	if s.Type != tugboatv1alpha1.StrategyHelm || s.Helm == nil {
		return spec, fmt.Sprintf("%s is promoted by the %s strategy: previews are computed for the helm strategy, whose agents carry out the promotion", to.Name, s.Type), nil
	}
	version, err := r.runningVersion(ctx, p, from)
	if err != nil || version == "" {
		return spec, fmt.Sprintf("no version runs in %s: none of its targets reported a release yet", from.Name), err
	}
	res, err := pipeline.ResolveTargets(ctx, r.Client, p, to)
	if err != nil {
		return spec, "", err
	}
	targets, total, why := previewTargets(ctx, r.Client, pp.Namespace, s.Helm, p, res.Targets, string(pp.UID)+"/preview")
	if len(targets) == 0 {
		return spec, "no target of " + to.Name + " can be previewed: " + why, nil
	}
	spec.Version, spec.Targets, spec.TotalTargets = version, targets, int32(min(max(total, 0), 1<<31-1))
	spec.Deadline = metav1.NewTime(r.Now().Add(cmp.Or(r.Timeout, DefaultPreviewTimeout)).Truncate(time.Second))
	return spec, "", nil
}

// runningVersion is the chart version most of env's targets run, as their
// ReleaseHistories report it ("" when none reported one).
func (r *OnDemandReconciler) runningVersion(ctx context.Context, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (string, error) {
	res, err := pipeline.ResolveTargets(ctx, r.Client, p, env)
	if err != nil {
		return "", err
	}
	count := map[string]int{}
	for _, rt := range res.Targets {
		rh := &tugboatv1alpha1.ReleaseHistory{}
		key := types.NamespacedName{Namespace: p.Namespace, Name: tugboatv1alpha1.ReleaseHistoryName(rt.Spoke, rt.Namespace, pipeline.ReleaseOf(p, &rt.Target))}
		if err := r.Client.Get(ctx, key, rh); err != nil || rh.Status.Current == nil || rh.Status.Current.ChartVersion == "" {
			continue
		}
		count[rh.Status.Current.ChartVersion]++
	}
	versions := make([]string, 0, len(count))
	for v := range count {
		versions = append(versions, v)
	}
	slices.SortFunc(versions, func(a, b string) int { return cmp.Or(count[b]-count[a], cmp.Compare(a, b)) })
	if len(versions) == 0 {
		return "", nil
	}
	return versions[0], nil
}
