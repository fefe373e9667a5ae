package actions

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion/strategy/helm"
	"tugboat.dev/tugboat/controllers/releasehistory"
)

// SpokeIndex is the cache field index of PromotionTargets by their
// spec.spoke.
const SpokeIndex = "tugboat.dev/promotiontarget-spoke"

// maxMessage is the longest outcome message kept (a PromotionTarget's
// status.action.message allows 1024 characters).
const maxMessage = 1024

// +kubebuilder:rbac:groups=tugboat.dev,resources=promotions,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotiontargets,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotiontargets/status,verbs=get;patch
// +kubebuilder:rbac:groups=tugboat.dev,resources=pipelines,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=spokes,verbs=get;list;watch

// Store offers agents their actions and records their outcomes. It
// implements ingest.ActionStore; create it with New and register it with
// SetupWithManager.
type Store struct {
	client client.Client // cached reads (indexes), direct writes
	api    client.Reader // uncached reads before each write
	now    func() time.Time
	log    logr.Logger

	mu      sync.Mutex
	changed map[ingest.Spoke]chan struct{} // by namespace and name; closed on a change

	resolvedMu sync.Mutex
	resolved   map[resolvedKey]resolvedTargets // environments' targets, briefly kept
}

// resolvedFor is how long the store keeps an environment's resolved
// targets: each agent's poll checks that its target is still in the
// environment, and resolving lists every Spoke of the namespace, so with
// thousands of targets polling at once it is resolved once per second,
// not once per poll. A Spoke that leaves the environment is seen within
// it.
const resolvedFor = time.Second

// maxResolved bounds the environments kept.
const maxResolved = 256

// resolvedKey names an environment at one version of its Pipeline.
type resolvedKey struct {
	namespace, pipeline, resourceVersion, env string
}

// resolvedTargets is an environment's resolution, as of at.
type resolvedTargets struct {
	at  time.Time
	res pipeline.Resolution
}

var _ ingest.ActionStore = (*Store)(nil)

// New returns a Store reading through c (the manager's cached client) and
// api (its APIReader).
func New(c client.Client, api client.Reader) *Store {
	return &Store{
		client:   c,
		api:      api,
		now:      time.Now,
		log:      ctrl.Log.WithName("actions"),
		changed:  map[ingest.Spoke]chan struct{}{},
		resolved: map[resolvedKey]resolvedTargets{},
	}
}

// SetupWithManager registers SpokeIndex, and event handlers on
// PromotionTargets and Promotions that wake Wait.
// releasehistory.IndexSpokeNames must have run on mgr.
func (s *Store) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &tugboatv1alpha1.PromotionTarget{}, SpokeIndex, func(o client.Object) []string {
		if pt, ok := o.(*tugboatv1alpha1.PromotionTarget); ok {
			return []string{pt.Spec.Spoke}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing promotion targets by spoke: %w", err)
	}
	for _, obj := range []client.Object{&tugboatv1alpha1.PromotionTarget{}, &tugboatv1alpha1.Promotion{}} {
		inf, err := mgr.GetCache().GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { s.observe(ctx, o) },
			UpdateFunc: func(_, o any) { s.observe(ctx, o) },
		})
		if err != nil {
			return err
		}
	}
	return s.setupPreviews(ctx, mgr)
}

// target is one PromotionTarget as the store works on it: which release
// on which Spoke, and its status (a pointer into the object, so that the
// store's changes are patched).
type target struct {
	Spoke, Namespace, Release string
	*tugboatv1alpha1.PromotionTargetStatus
}

func viewOf(pt *tugboatv1alpha1.PromotionTarget) *target {
	return &target{Spoke: pt.Spec.Spoke, Namespace: pt.Spec.Namespace, Release: pt.Spec.Release, PromotionTargetStatus: &pt.Status}
}

// observe wakes the waiters of every spoke with a Pending action: that of
// a PromotionTarget that changed, or those of the targets of a Promotion
// that changed (it may offer its actions now: Verifying, RollingBack, a
// helmTest step started).
func (s *Store) observe(ctx context.Context, o any) {
	switch o := o.(type) {
	case *tugboatv1alpha1.PromotionTarget:
		pr := &tugboatv1alpha1.Promotion{}
		if err := s.client.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: o.Spec.Promotion}, pr); err != nil {
			return
		}
		s.observeTarget(pr, o)
	case *tugboatv1alpha1.Promotion:
		if !offered(o) {
			return
		}
		var list tugboatv1alpha1.PromotionTargetList
		if err := s.client.List(ctx, &list, client.InNamespace(o.Namespace),
			client.MatchingLabels{tugboatv1alpha1.LabelPromotion: tugboatv1alpha1.PromotionLabelValue(o.Name)}); err != nil {
			return
		}
		for i := range list.Items {
			s.observeTarget(o, &list.Items[i])
		}
	}
}

// observeTarget wakes the waiters of pt's spoke when pr offers one of its
// actions and it is Pending.
func (s *Store) observeTarget(pr *tugboatv1alpha1.Promotion, pt *tugboatv1alpha1.PromotionTarget) {
	if !offered(pr) || pt.Spec.Promotion != pr.Name {
		return
	}
	t := viewOf(pt)
	if a := offeredAction(pr, t); a != nil && a.Phase == tugboatv1alpha1.ActionPending ||
		openHelmTest(pr, t) && t.HelmTest.Phase == tugboatv1alpha1.ActionPending {
		// A Pipeline's targets are Spokes of its own namespace.
		s.notify(ingest.Spoke{Namespace: pr.Namespace, Name: t.Spoke})
	}
}

// notify wakes the waiters of sp, and those that know its name alone.
func (s *Store) notify(sp ingest.Spoke) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range []ingest.Spoke{sp, {Name: sp.Name}} {
		if ch, ok := s.changed[k]; ok {
			close(ch)
			delete(s.changed, k)
		}
	}
}

// Wait returns a channel that is closed once an action for sp may have
// been queued after the call. Take it before calling Pending, so a change
// in between is not missed.
func (s *Store) Wait(sp ingest.Spoke) <-chan struct{} {
	k := ingest.Spoke{Namespace: sp.Namespace, Name: sp.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.changed[k]
	if !ok {
		ch = make(chan struct{})
		s.changed[k] = ch
	}
	return ch
}

// offered reports whether pr's actions may be handed out: a helm Promotion
// that is Verifying, or Running with a rollout (whose waves' actions are
// queued while later waves wait), or RollingBack (its rollbacks only:
// offeredAction). A paused rollout offers none.
func offered(pr *tugboatv1alpha1.Promotion) bool {
	if pr.StrategyType() != tugboatv1alpha1.StrategyHelm || !pr.DeletionTimestamp.IsZero() {
		return false
	}
	rollout := pr.Status.Rollout != nil && pr.Status.Rollout.Resolved != nil
	return pr.Status.Phase == tugboatv1alpha1.PromotionVerifying ||
		pr.Status.Phase == tugboatv1alpha1.PromotionRunning && rollout ||
		pr.Status.Phase == tugboatv1alpha1.PromotionRollingBack
}

// open reports whether an action still waits for its outcome.
func open(p tugboatv1alpha1.ActionPhase) bool {
	return p == tugboatv1alpha1.ActionPending || p == tugboatv1alpha1.ActionDelivered
}

// Pending returns the open actions of spoke (Pending, or Delivered and
// not reported yet: an agent that restarted gets them again) and marks
// them Delivered, counting the delivery.
func (s *Store) Pending(ctx context.Context, who ingest.Spoke) ([]wire.Action, error) {
	spoke := who.Name
	out, err := s.pendingPreviews(ctx, who)
	if err != nil {
		return nil, err
	}
	pts, err := s.targets(ctx, who)
	if err != nil {
		return nil, err
	}
	for i := range pts {
		pt := &pts[i]
		pr := &tugboatv1alpha1.Promotion{}
		if err := s.client.Get(ctx, types.NamespacedName{Namespace: pt.Namespace, Name: pt.Spec.Promotion}, pr); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return nil, err
			}
			continue
		}
		if t := viewOf(pt); !offered(pr) || !metav1.IsControlledBy(pt, pr) || t.Spoke != spoke {
			continue
		} else if a := offeredAction(pr, t); (a == nil || !open(a.Phase)) && !openHelmTest(pr, t) {
			continue
		}
		acts, err := s.deliver(ctx, client.ObjectKeyFromObject(pt), spoke)
		if err != nil {
			return nil, err
		}
		out = append(out, acts...)
	}
	slices.SortFunc(out, func(a, b wire.Action) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Promotion, b.Promotion), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// deliver marks the open actions of one PromotionTarget of spoke
// Delivered and returns them, from a fresh read.
func (s *Store) deliver(ctx context.Context, key types.NamespacedName, spoke string) ([]wire.Action, error) {
	var acts []wire.Action
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		acts = nil
		pt := &tugboatv1alpha1.PromotionTarget{}
		if err := s.api.Get(ctx, key, pt); err != nil {
			return client.IgnoreNotFound(err)
		}
		pr := &tugboatv1alpha1.Promotion{}
		if err := s.api.Get(ctx, types.NamespacedName{Namespace: pt.Namespace, Name: pt.Spec.Promotion}, pr); err != nil {
			return client.IgnoreNotFound(err)
		}
		if !offered(pr) || !metav1.IsControlledBy(pt, pr) || pt.Spec.Spoke != spoke {
			return nil
		}
		p := &tugboatv1alpha1.Pipeline{}
		if err := s.client.Get(ctx, types.NamespacedName{Namespace: pr.Namespace, Name: pr.Spec.Pipeline}, p); err != nil {
			// Gone: the reconciler aborts the Promotion.
			return client.IgnoreNotFound(err)
		}
		orig := pt.DeepCopy()
		now := metav1.NewTime(s.now())
		t := viewOf(pt)
		switch {
		case rollingBack(pr):
			if a, ok := s.deliverRollback(ctx, pr, p, t, now); ok {
				acts = append(acts, a)
			}
		default:
			if a, ok := s.deliverHelmTest(ctx, pr, p, t, now); ok {
				acts = append(acts, a)
			}
			if t.Action == nil || !open(t.Action.Phase) ||
				t.Action.ID != wire.NewActionID(string(pr.UID), t.Spoke, t.Namespace, t.Release) {
				break
			}
			a, err := s.action(ctx, pr, p, t)
			if err != nil {
				s.log.Info("Not offering an action", "promotion", pr.Namespace+"/"+pr.Name, "spoke", spoke, "error", err.Error())
				break
			}
			if t.Action.Phase == tugboatv1alpha1.ActionPending {
				t.Action.Phase, t.Action.LastUpdateTime = tugboatv1alpha1.ActionDelivered, &now
			}
			t.Action.Deliveries++
			acts = append(acts, a)
		}
		if len(acts) == 0 {
			return nil
		}
		return s.client.Status().Patch(ctx, pt, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return nil, fmt.Errorf("marking the actions of %s delivered: %w", key, err)
	}
	return acts, nil
}

// action builds the wire action of target t of pr, a Promotion of Pipeline
// p.
// p's targets are resolved through the store's cache (resolve): a Spoke
// that left the environment gets no action.
func (s *Store) action(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, t *target) (wire.Action, error) {
	var hr *wire.HelmReleaseRef
	found := false
	if i := pipeline.EnvironmentIndex(p, pr.Spec.To); i >= 0 {
		res, err := s.resolve(ctx, p, &p.Spec.Environments[i])
		if err != nil {
			return wire.Action{}, err
		}
		for _, rt := range res.Targets {
			pt := rt.Target
			if pt.Spoke != t.Spoke || pt.Namespace != t.Namespace || pipeline.ReleaseOf(p, &pt) != t.Release {
				continue
			}
			found = true
			if pt.HelmRelease != nil {
				hr = &wire.HelmReleaseRef{Namespace: cmp.Or(pt.HelmRelease.Namespace, pt.Namespace), Name: pt.HelmRelease.Name}
			}
		}
	}
	if !found {
		return wire.Action{}, fmt.Errorf("pipeline %s no longer has the target %s/%s/%s in %s", p.Name, t.Spoke, t.Namespace, t.Release, pr.Spec.To)
	}
	if pr.Status.Strategy == nil {
		return wire.Action{}, fmt.Errorf("promotion %s has no strategy resolved yet", pr.Name)
	}
	src, err := helm.ChartSource(pr.Status.Strategy.Helm, t.Release, hr != nil)
	if err != nil {
		return wire.Action{}, err
	}
	values, err := helm.ValuesPolicy(pr.Status.Strategy.Helm)
	if err != nil {
		return wire.Action{}, err
	}
	created := pr.CreationTimestamp.Time
	if pr.Status.StartedAt != nil {
		created = pr.Status.StartedAt.Time
	}
	return wire.Action{
		ID:           t.Action.ID,
		Promotion:    pr.Namespace + "/" + pr.Name,
		Namespace:    t.Namespace,
		Release:      t.Release,
		Chart:        src,
		Version:      pr.Spec.Version,
		ValuesPolicy: values,
		HelmRelease:  hr,
		Created:      created.UTC(),
	}, nil
}

// Report records the outcome of one of spoke's actions. It returns an
// error matching ingest.ErrActionNotFound when spoke has no action with
// that id (another spoke's action is not found either), and one matching
// ingest.ErrActionConflict when the action already has a different
// outcome. Reporting the same outcome again changes nothing.
func (s *Store) Report(ctx context.Context, who ingest.Spoke, o wire.ActionOutcome) error {
	if found, err := s.reportPreview(ctx, who, o); found {
		return err
	}
	spoke := who.Name
	phase, ok := phases[o.Result]
	if !ok {
		return fmt.Errorf("result %q: must be %s, %s or %s", o.Result, wire.ActionSucceeded, wire.ActionFailed, wire.ActionRefused)
	}
	msg := clip.String(o.Message, maxMessage)
	rev := int32(min(max(o.Revision, 0), 1<<31-1))
	pts, err := s.targets(ctx, who)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(pts, func(pt tugboatv1alpha1.PromotionTarget) bool { return actionByID(viewOf(&pt), o.ID) != nil })
	if i < 0 {
		return fmt.Errorf("%w: %s", ingest.ErrActionNotFound, o.ID)
	}
	key := client.ObjectKeyFromObject(&pts[i])
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		pt := &tugboatv1alpha1.PromotionTarget{}
		if err := s.api.Get(ctx, key, pt); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("%w: %s", ingest.ErrActionNotFound, o.ID)
			}
			return fmt.Errorf("reading promotion target %s: %w", key, err)
		}
		pr := &tugboatv1alpha1.Promotion{}
		if err := s.api.Get(ctx, types.NamespacedName{Namespace: pt.Namespace, Name: pt.Spec.Promotion}, pr); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("%w: %s", ingest.ErrActionNotFound, o.ID)
			}
			return fmt.Errorf("reading promotion %s: %w", pt.Spec.Promotion, err)
		}
		orig := pt.DeepCopy()
		t := viewOf(pt)
		var act *tugboatv1alpha1.TargetAction
		if t.Spoke == spoke && pr.StrategyType() == tugboatv1alpha1.StrategyHelm && metav1.IsControlledBy(pt, pr) {
			act = actionByID(t, o.ID)
		}
		switch {
		case act == nil:
			return fmt.Errorf("%w: %s", ingest.ErrActionNotFound, o.ID)
		case !open(act.Phase):
			if act.Phase == phase && act.Message == msg && act.Revision == rev {
				return nil
			}
			return fmt.Errorf("%w: action %s was already reported %s", ingest.ErrActionConflict, o.ID, act.Phase)
		}
		now := metav1.NewTime(s.now())
		act.Phase, act.Message, act.Revision, act.LastUpdateTime = phase, msg, rev, &now
		if err := s.client.Status().Patch(ctx, pt, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		s.log.Info("Agent reported an action", "promotion", pt.Namespace+"/"+pt.Spec.Promotion, "spoke", spoke, "namespace", t.Namespace, "release", t.Release, "result", o.Result)
		return nil
	})
}

// errNotFound and errConflict are the errors Report returns for an action
// the spoke does not have, and for one already reported differently.
func errNotFound(id string) error { return fmt.Errorf("%w: %s", ingest.ErrActionNotFound, id) }

func errConflict(msg string) error { return fmt.Errorf("%w: %s", ingest.ErrActionConflict, msg) }

var phases = map[string]tugboatv1alpha1.ActionPhase{
	wire.ActionSucceeded: tugboatv1alpha1.ActionSucceeded,
	wire.ActionFailed:    tugboatv1alpha1.ActionFailed,
	wire.ActionRefused:   tugboatv1alpha1.ActionRefused,
}

// targets lists, from the cache, the PromotionTargets of the Spoke who,
// in its namespace: a Pipeline's targets name Spokes in its own
// namespace, so a Promotion elsewhere never reaches this spoke. Without
// a namespace (a receiver that knows names alone), the namespace is that of
// the one live Spoke of the name; an unknown or ambiguous name has none.
func (s *Store) targets(ctx context.Context, who ingest.Spoke) ([]tugboatv1alpha1.PromotionTarget, error) {
	spoke := who.Name
	if who.Namespace != "" {
		return s.targetsIn(ctx, who.Namespace, spoke)
	}
	var spokes tugboatv1alpha1.SpokeList
	if err := s.client.List(ctx, &spokes, client.MatchingFields{releasehistory.SpokeNameIndex: spoke}); err != nil {
		return nil, fmt.Errorf("listing spokes: %w", err)
	}
	var ns []string
	for _, sp := range spokes.Items {
		if sp.DeletionTimestamp.IsZero() {
			ns = append(ns, sp.Namespace)
		}
	}
	if len(ns) != 1 {
		return nil, nil
	}
	return s.targetsIn(ctx, ns[0], spoke)
}

// targetsIn lists, from the cache, the PromotionTargets of namespace on
// spoke (SpokeIndex).
func (s *Store) targetsIn(ctx context.Context, namespace, spoke string) ([]tugboatv1alpha1.PromotionTarget, error) {
	var list tugboatv1alpha1.PromotionTargetList
	if err := s.client.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{SpokeIndex: spoke}); err != nil {
		return nil, fmt.Errorf("listing promotion targets: %w", err)
	}
	// Only the hub's: each target has one name, which the hub gives it.
	return slices.DeleteFunc(list.Items, func(pt tugboatv1alpha1.PromotionTarget) bool {
		return pt.Name != tugboatv1alpha1.PromotionTargetName(pt.Spec.Promotion, pt.Spec.Spoke, pt.Spec.Namespace, pt.Spec.Release)
	}), nil
}

// resolve returns env's targets in p (pipeline.ResolveTargets), kept for
// resolvedFor per version of p.
func (s *Store) resolve(ctx context.Context, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (pipeline.Resolution, error) {
	key := resolvedKey{namespace: p.Namespace, pipeline: p.Name, resourceVersion: p.ResourceVersion, env: env.Name}
	now := s.now()
	s.resolvedMu.Lock()
	kept, ok := s.resolved[key]
	s.resolvedMu.Unlock()
	if ok && now.Sub(kept.at) < resolvedFor && !now.Before(kept.at) {
		return kept.res, nil
	}
	res, err := pipeline.ResolveTargets(ctx, s.client, p, env)
	if err != nil {
		return pipeline.Resolution{}, err
	}
	s.resolvedMu.Lock()
	defer s.resolvedMu.Unlock()
	if len(s.resolved) >= maxResolved {
		for k, v := range s.resolved {
			if now.Sub(v.at) >= resolvedFor || now.Before(v.at) {
				delete(s.resolved, k)
			}
		}
		if len(s.resolved) >= maxResolved {
			clear(s.resolved)
		}
	}
	s.resolved[key] = resolvedTargets{at: now, res: res}
	return res, nil
}
