package promotion

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/egress"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

// Options configure the Promotion reconciler.
type Options struct {
	// DefaultTimeout bounds a Promotion whose Pipeline sets no timeout.
	DefaultTimeout time.Duration
	// RetryBase and RetryMax shape the backoff between strategy attempts.
	RetryBase, RetryMax time.Duration
	// MaxAttempts fails a Promotion whose strategy kept failing.
	MaxAttempts int32
	// PreviewTimeout bounds the wait for a Promotion's preview before it
	// waits for approval (DefaultPreviewTimeout when 0).
	PreviewTimeout time.Duration
	// PreviewTTL is how long an on-demand preview is kept
	// (DefaultPreviewTTL when 0; promotion_preview_ondemand.go).
	PreviewTTL time.Duration
}

// NewOptions returns the defaults.
func NewOptions() Options {
	return Options{DefaultTimeout: 30 * time.Minute, RetryBase: 2 * time.Second, RetryMax: 5 * time.Minute, MaxAttempts: 20, PreviewTimeout: DefaultPreviewTimeout, PreviewTTL: DefaultPreviewTTL}
}

// Reconciler reconciles Promotions.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Registry  strategy.Registry
	Options   Options
	Now       func() time.Time
	// Recorder emits the Events of each transition (recordTransition); nil
	// emits none.
	Recorder events.EventRecorder
	// Egress is the destination policy of webhook steps (promotion_steps.go).
	Egress egress.Policy
}

// +kubebuilder:rbac:groups=tugboat.dev,resources=promotions,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotiontargets,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotiontargets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=tugboat.dev,resources=pipelines,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=releasehistories,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=spokes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

var promotionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "tugboat_promotion_duration_seconds",
	Help:    "Time from a Promotion's creation to its end, by final phase.",
	Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600},
}, []string{"phase"})

func init() { ctrlmetrics.Registry.MustRegister(promotionDuration) }

// SetupWithManager registers the reconciler; pipeline.IndexFields must have
// run on mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&tugboatv1alpha1.Promotion{}).
		// An agent's preview answer moves a Promotion on (issue 26).
		Owns(&tugboatv1alpha1.PromotionPreview{}).
		// An agent fetched or reported an action (controllers/promotion/actions).
		Owns(&tugboatv1alpha1.PromotionTarget{}).
		// A lifecycle step's event finished (step_external.go).
		Owns(&tugboatv1alpha1.LifecycleEvent{}).
		Watches(&tugboatv1alpha1.ReleaseHistory{}, handler.EnqueueRequestsFromMapFunc(r.promotionsFor)).
		// A Spoke that joins or leaves an environment by its labels
		// (spokeSelector) changes what a running Promotion waits for.
		Watches(&tugboatv1alpha1.Spoke{}, handler.EnqueueRequestsFromMapFunc(r.promotionsFor)).
		// Whether Kubernetes votes count depends on the policy
		// tugboat-approvals and its binding (request.PolicyEnforced).
		Watches(&admissionregistrationv1.ValidatingAdmissionPolicy{}, handler.EnqueueRequestsFromMapFunc(r.waitingForApproval)).
		Watches(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, handler.EnqueueRequestsFromMapFunc(r.waitingForApproval)).
		// A target added to or removed from the spec changes what a
		// running Promotion acts on (a rollout deals a joiner to a wave).
		Watches(&tugboatv1alpha1.Pipeline{}, handler.EnqueueRequestsFromMapFunc(r.promotionsOf),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("promotion").
		Complete(r)
}

// promotionsFor maps a ReleaseHistory or a Spoke to the unfinished
// Promotions of the Pipelines that target it (pipeline.PipelinesFor).
func (r *Reconciler) promotionsFor(ctx context.Context, o client.Object) []reconcile.Request {
	pipelines, err := pipeline.PipelinesFor(ctx, r.Client, o)
	if err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, p := range pipelines {
		var promos tugboatv1alpha1.PromotionList
		if err := r.Client.List(ctx, &promos, client.InNamespace(p.Namespace), client.MatchingFields{pipeline.PromotionPipelineIndex: p.Name}); err != nil {
			continue
		}
		for _, pr := range promos.Items {
			if !pr.Status.Phase.Terminal() {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pr.Namespace, Name: pr.Name}})
			}
		}
	}
	return reqs
}

// waitingForApproval maps a change of the policy tugboat-approvals or of
// a binding to every Promotion that may wait for approval.
func (r *Reconciler) waitingForApproval(ctx context.Context, o client.Object) []reconcile.Request {
	switch o := o.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		if o.Name != request.PolicyName {
			return nil
		}
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		if o.Spec.PolicyName != request.PolicyName {
			return nil
		}
	}
	var promos tugboatv1alpha1.PromotionList
	if err := r.Client.List(ctx, &promos); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, pr := range promos.Items {
		if ph := pr.Status.Phase; (ph == "" || ph == tugboatv1alpha1.PromotionPending || ph == tugboatv1alpha1.PromotionWaitingApproval) && pr.Status.Approval == nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pr.Namespace, Name: pr.Name}})
		}
	}
	return reqs
}

// promotionsOf maps a Pipeline to its unfinished Promotions.
func (r *Reconciler) promotionsOf(ctx context.Context, o client.Object) []reconcile.Request {
	var promos tugboatv1alpha1.PromotionList
	if err := r.Client.List(ctx, &promos, client.InNamespace(o.GetNamespace()), client.MatchingFields{pipeline.PromotionPipelineIndex: o.GetName()}); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, pr := range promos.Items {
		if !pr.Status.Phase.Terminal() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pr.Namespace, Name: pr.Name}})
		}
	}
	return reqs
}

// Reconcile advances one Promotion.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	pr := &tugboatv1alpha1.Promotion{}
	if err := r.Client.Get(ctx, req.NamespacedName, pr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pr.Status.Phase.Terminal() || !pr.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	orig := pr.DeepCopy()
	startPhase := pr.Status.Phase
	approvedBefore := pr.Status.Approval != nil
	// The Promotion's PromotionTargets: read once, written back (before
	// the Promotion's own status) only where they changed.
	set := &targetSet{stored: map[string]*tugboatv1alpha1.PromotionTarget{}}
	if startPhase.Started() {
		var err error
		if set, err = r.loadTargets(ctx, pr); err != nil {
			return ctrl.Result{}, err
		}
	}
	ctx = withTargets(ctx, set)
	defer func() {
		if conflict, err := r.writeTargets(ctx, pr, set); err != nil || conflict {
			// The Promotion's status is derived from its targets: it is
			// written once they are, on the next reconcile.
			if err != nil && retErr == nil {
				retErr = err
			}
			if conflict {
				result, retErr = ctrl.Result{RequeueAfter: time.Second}, nil
			}
			return
		}
		pr.Status.ObservedGeneration = pr.Generation
		if equality.Semantic.DeepEqual(orig.Status, pr.Status) {
			// Nothing changed: no write (a report that changes nothing
			// the Promotion shows costs the API server no request).
			return
		}
		patch := client.MergeFrom(orig)
		if pr.StrategyType() == tugboatv1alpha1.StrategyHelm {
			// The hub's receiver writes the agents' actions too: never
			// overwrite an outcome with a stale copy of the targets.
			patch = client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
		}
		if err := r.Client.Status().Patch(ctx, pr, patch); err != nil {
			if apierrors.IsConflict(err) {
				result, retErr = ctrl.Result{RequeueAfter: time.Second}, nil
				return
			}
			if retErr == nil {
				retErr = client.IgnoreNotFound(err)
			}
			return
		}
		recordSteps(r.Recorder, pr, orig.Status.Steps)
		recordPreviewRecheck(r.Recorder, orig.Status.Preview, pr.Status.Preview, pr)
		recordTransition(r.Recorder, pr, startPhase, approvedBefore)
		if pr.Status.Phase != startPhase {
			pipeline.PromotionPhaseTransitions().WithLabelValues(string(pr.Status.Phase)).Inc()
			if pr.Status.Phase.Terminal() {
				promotionDuration.WithLabelValues(string(pr.Status.Phase)).Observe(r.Now().Sub(pr.CreationTimestamp.Time).Seconds())
			}
			log.FromContext(ctx).Info("promotion phase", "phase", pr.Status.Phase, "version", pr.Spec.Version, "to", pr.Spec.To)
		}
	}()

	// A person asked to stop it (tugboat abort); the policy
	// tugboat-approvals made sure abortRequest.user is who they are.
	if a := pr.Status.AbortRequest; a != nil {
		r.finish(pr, tugboatv1alpha1.PromotionAborted, tugboatv1alpha1.AbortedReason, "aborted by "+a.User+suffix(a.Message))
		return ctrl.Result{}, nil
	}

	p := &tugboatv1alpha1.Pipeline{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: pr.Namespace, Name: pr.Spec.Pipeline}, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.finish(pr, tugboatv1alpha1.PromotionAborted, tugboatv1alpha1.AbortedReason, "pipeline "+pr.Spec.Pipeline+" no longer exists")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	idx := pipeline.EnvironmentIndex(p, pr.Spec.To)
	if idx < 0 {
		r.finish(pr, tugboatv1alpha1.PromotionFailed, tugboatv1alpha1.InvalidSpecReason,
			fmt.Sprintf("pipeline %s has no environment %q", p.Name, pr.Spec.To))
		return ctrl.Result{}, nil
	}
	env := &p.Spec.Environments[idx]
	if pr.Status.Strategy == nil {
		// Resolved by the hub, never taken from the requester (a strategy
		// names where the hub sends credentials and requests), and kept, so
		// later edits of the Pipeline do not change this Promotion.
		s := pipeline.StrategyFor(p, env)
		pr.Status.Strategy = s.DeepCopy()
	}

	switch pr.Status.Phase {
	case "", tugboatv1alpha1.PromotionPending:
		return r.pending(ctx, pr, p, env)
	case tugboatv1alpha1.PromotionWaitingApproval:
		if err := r.refreshPreview(ctx, pr); err != nil {
			return ctrl.Result{}, err
		}
		return r.waitingApproval(ctx, pr, p, env)
	case tugboatv1alpha1.PromotionRunning:
		return r.running(ctx, pr, p, env)
	case tugboatv1alpha1.PromotionVerifying:
		return r.verifying(ctx, pr, p, env)
	case tugboatv1alpha1.PromotionPaused, tugboatv1alpha1.PromotionRollingBack:
		return r.rollout(ctx, pr, p, env)
	}
	return ctrl.Result{}, nil
}

// pending waits for any other Promotion into the same environment that is
// already running, then asks for approval or starts.
func (r *Reconciler) pending(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (ctrl.Result, error) {
	var promos tugboatv1alpha1.PromotionList
	if err := r.Client.List(ctx, &promos, client.InNamespace(pr.Namespace), client.MatchingFields{pipeline.PromotionPipelineIndex: pr.Spec.Pipeline}); err != nil {
		return ctrl.Result{}, err
	}
	for _, other := range promos.Items {
		if other.Name != pr.Name && other.Spec.To == pr.Spec.To && other.Status.Phase.Started() {
			r.setPhase(pr, tugboatv1alpha1.PromotionPending, tugboatv1alpha1.ProgressingReason, "waiting for promotion "+other.Name+" into "+pr.Spec.To+" to finish")
			return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
		}
	}
	if !env.Gates.RequireApproval && pr.Status.Approval == nil {
		return r.start(ctx, pr, p, env)
	}
	if wait, after, err := r.previewFirst(ctx, pr, p, env); err != nil || wait {
		r.setPhase(pr, tugboatv1alpha1.PromotionPending, tugboatv1alpha1.ProgressingReason,
			"computing the preview of "+pr.Spec.Version+" on "+pr.Spec.To+"'s agents before asking for approval")
		return ctrl.Result{RequeueAfter: after}, err
	}
	return r.waitingApproval(ctx, pr, p, env)
}

// waitingApproval counts the votes in status.approvals (request.Count): a
// counted rejection aborts the Promotion, enough distinct approvals start
// it; either way the outcome goes to status.approval. Until then the
// Promotion waits in WaitingApproval, its Ready message saying who
// approved and what is missing. An outcome already recorded stands.
func (r *Reconciler) waitingApproval(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (ctrl.Result, error) {
	if a := pr.Status.Approval; a == nil {
		// Kubernetes votes are authentic only where the API server
		// enforces tugboat-approvals; those written while it does not
		// never count (status.unverifiedVotes).
		enforced, why, err := request.PolicyEnforced(ctx, r.Client)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !enforced && len(pr.Status.Approvals) > int(pr.Status.UnverifiedVotes) {
			pr.Status.UnverifiedVotes = int32(min(len(pr.Status.Approvals), math.MaxInt32))
		}
		tally := request.Count(p, pr)
		switch {
		case tally.Rejection != nil:
			v := tally.Rejection
			pr.Status.Approval = &tugboatv1alpha1.Approval{RejectedBy: clip.String(tally.RejectedBy(), 256), Time: v.Time, Message: v.Message}
		case tally.Approved():
			last := tally.Approvals[len(tally.Approvals)-1]
			pr.Status.Approval = &tugboatv1alpha1.Approval{ApprovedBy: clip.String(tally.ApprovedBy(), 1024), Time: last.Time, Message: last.Message}
		default:
			reason := tugboatv1alpha1.WaitingForApprovalReason
			msg := fmt.Sprintf("promotion of %s into %s has %s; waiting for %s (tugboat approve %s)",
				pr.Spec.Version, pr.Spec.To, tally.Summary(), tally.Missing(), pr.Name)
			if !enforced {
				reason = tugboatv1alpha1.ApprovalPolicyNotEnforcedReason
				msg += "; Kubernetes votes do not count: " + why + ", so nothing checks who wrote them"
			}
			if again := approvalAskedAgain(pr); again != "" {
				msg += "; " + again
			}
			r.setPhase(pr, tugboatv1alpha1.PromotionWaitingApproval, reason, msg)
			return ctrl.Result{}, nil
		}
	}
	if a := pr.Status.Approval; a.RejectedBy != "" {
		r.finish(pr, tugboatv1alpha1.PromotionAborted, tugboatv1alpha1.RejectedReason, "rejected by "+a.RejectedBy+suffix(a.Message))
		return ctrl.Result{}, nil
	}
	if wait, after, err := r.recheckPreview(ctx, pr, p, env); err != nil || wait {
		r.setPhase(pr, cmp.Or(pr.Status.Phase, tugboatv1alpha1.PromotionPending), tugboatv1alpha1.ProgressingReason,
			"approved by "+pr.Status.Approval.ApprovedBy+"; the preview went stale since, so it is computed again before "+
				pr.Spec.Version+" is promoted into "+pr.Spec.To+": "+pr.Status.Preview.Reason)
		return ctrl.Result{RequeueAfter: after}, err
	}
	if pr.Status.Approval == nil {
		// The preview changed since the approval, and the gate asks for
		// approval again (reapproveOnChange): waits for new votes.
		r.setPhase(pr, tugboatv1alpha1.PromotionWaitingApproval, tugboatv1alpha1.WaitingForApprovalReason,
			fmt.Sprintf("promotion of %s into %s waits for approval again (tugboat approve %s); %s", pr.Spec.Version, pr.Spec.To, pr.Name, approvalAskedAgain(pr)))
		return ctrl.Result{}, nil
	}
	return r.start(ctx, pr, p, env)
}

// start moves the Promotion to Running and records its destination
// targets, resolved now (pipeline.ResolveTargets), as its PromotionTargets
// (without a rollout; with one, a target gets its PromotionTarget when its
// wave is acted on): the Promotion carries the version to these. A Spoke that joins the
// environment later is left to the next decision (with a rollout, to a
// wave not done yet); one that leaves is dropped (promotionTargets). With a
// rollout, the environment's rollout is recorded too (resolveRollout).
// While the destination resolves to no target
// (a spokeSelector that matches no Spoke) the Promotion waits in Pending.
func (r *Reconciler) start(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (ctrl.Result, error) {
	res, err := pipeline.ResolveTargets(ctx, r.Client, p, env)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(res.Targets) == 0 {
		r.setPhase(pr, tugboatv1alpha1.PromotionPending, tugboatv1alpha1.ProgressingReason,
			fmt.Sprintf("waiting for a target in %s: spokeSelector %s matches no spoke", pr.Spec.To, strings.Join(res.Unmatched, ", ")))
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	set := targetsOf(ctx)
	set.items = nil
	for _, t := range res.Targets {
		set.items = append(set.items, target{
			Spoke: t.Spoke, Namespace: t.Namespace, Release: pipeline.ReleaseOf(p, &t.Target),
			PromotionTargetStatus: tugboatv1alpha1.PromotionTargetStatus{Message: "not checked yet"},
		})
	}
	now := metav1.NewTime(r.Now())
	pr.Status.StartedAt = &now
	resolveRollout(pr, env)
	resolveSteps(pr, env)
	msg := fmt.Sprintf("promoting %s into %s with strategy %s", pr.Spec.Version, pr.Spec.To, pr.StrategyType())
	if a := pr.Status.Approval; a != nil && a.ApprovedBy != "" {
		msg += " (approved by " + a.ApprovedBy + ")"
	}
	r.setPhase(pr, tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.ProgressingReason, msg)
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// promotionTargets are the destination targets this Promotion carries the
// version to: those recorded when it started (its PromotionTargets) that
// the environment still has. A Promotion with none recorded takes every
// target the environment has,
// and so does a rollout, whose planner deals a target that joins to a
// wave not done yet.
func (r *Reconciler) promotionTargets(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) ([]pipeline.ResolvedTarget, error) {
	res, err := pipeline.ResolveTargets(ctx, r.Client, p, env)
	if err != nil {
		return nil, err
	}
	set := targetsOf(ctx)
	if len(set.items) == 0 || hasRollout(pr) {
		return res.Targets, nil
	}
	recorded := map[string]bool{}
	for i := range set.items {
		recorded[set.items[i].key()] = true
	}
	var out []pipeline.ResolvedTarget
	for _, t := range res.Targets {
		if recorded[t.Spoke+"/"+t.Namespace+"/"+pipeline.ReleaseOf(p, &t.Target)] {
			out = append(out, t)
		}
	}
	return out, nil
}

func (r *Reconciler) setPhase(pr *tugboatv1alpha1.Promotion, phase tugboatv1alpha1.PromotionPhase, reason tugboatv1alpha1.ConditionReason, msg string) {
	pr.Status.Phase = phase
	status := metav1.ConditionUnknown
	apimeta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{
		Type: tugboatv1alpha1.ReadyCondition.String(), Status: status, Reason: reason.String(), Message: clip.String(msg, 1024), ObservedGeneration: pr.Generation,
	})
	apimeta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{
		Type: tugboatv1alpha1.ReconcilingCondition.String(), Status: metav1.ConditionTrue, Reason: reason.String(), Message: clip.String(msg, 1024), ObservedGeneration: pr.Generation,
	})
}

func (r *Reconciler) finish(pr *tugboatv1alpha1.Promotion, phase tugboatv1alpha1.PromotionPhase, reason tugboatv1alpha1.ConditionReason, msg string) {
	pr.Status.Phase = phase
	now := metav1.NewTime(r.Now())
	pr.Status.CompletedAt = &now
	status := metav1.ConditionFalse
	if phase == tugboatv1alpha1.PromotionSucceeded {
		status = metav1.ConditionTrue
	}
	apimeta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{
		Type: tugboatv1alpha1.ReadyCondition.String(), Status: status, Reason: reason.String(), Message: clip.String(msg, 1024), ObservedGeneration: pr.Generation,
	})
	apimeta.RemoveStatusCondition(&pr.Status.Conditions, tugboatv1alpha1.ReconcilingCondition.String())
	if phase == tugboatv1alpha1.PromotionFailed {
		apimeta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{
			Type: tugboatv1alpha1.StalledCondition.String(), Status: metav1.ConditionTrue, Reason: reason.String(), Message: clip.String(msg, 1024), ObservedGeneration: pr.Generation,
		})
	}
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

func orUnknown(s string) string { return orDefault(s, "Unknown") }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
