package actions

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

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

// Previews (issue 26). The Promotion reconciler creates a PromotionPreview
// whose spec names the targets to preview; this store offers each target's
// agent a preview action while the Promotion has not started (Pending or
// WaitingApproval) and the preview's deadline has not passed, and records
// the answers in the PromotionPreview's status: per target its phase, and
// the distinct changes by digest (status.groups, at most four; more are
// counted), each standing for the targets whose values it previewed.

// PreviewSpokeIndex is the cache field index of PromotionPreviews by the
// spokes of their targets.
const PreviewSpokeIndex = "tugboat.dev/preview-spokes"

// +kubebuilder:rbac:groups=tugboat.dev,resources=promotionpreviews,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=promotionpreviews/status,verbs=get;patch

// setupPreviews registers PreviewSpokeIndex and wakes the polls of the
// spokes a new or changed PromotionPreview asks.
func (s *Store) setupPreviews(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &tugboatv1alpha1.PromotionPreview{}, PreviewSpokeIndex, indexPreviewSpokes); err != nil {
		return fmt.Errorf("indexing promotion previews by spoke: %w", err)
	}
	inf, err := mgr.GetCache().GetInformer(ctx, &tugboatv1alpha1.PromotionPreview{})
	if err != nil {
		return fmt.Errorf("watching promotion previews: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.observePreview,
		UpdateFunc: func(_, o any) { s.observePreview(o) },
	})
	return err
}

func indexPreviewSpokes(o client.Object) []string {
	pp, ok := o.(*tugboatv1alpha1.PromotionPreview)
	if !ok {
		return nil
	}
	var spokes []string
	for _, t := range pp.Spec.Targets {
		if !slices.Contains(spokes, t.Spoke) {
			spokes = append(spokes, t.Spoke)
		}
	}
	return spokes
}

// observePreview wakes the spokes of pp's targets that have no answer.
func (s *Store) observePreview(o any) {
	pp, ok := o.(*tugboatv1alpha1.PromotionPreview)
	if !ok || !pp.DeletionTimestamp.IsZero() {
		return
	}
	for _, t := range pp.Spec.Targets {
		if openPreview(pp, t.ActionID) {
			s.notify(ingest.Spoke{Namespace: pp.Namespace, Name: t.Spoke})
		}
	}
}

// previewStatus returns the status entry of action id in pp, or nil.
func previewStatus(pp *tugboatv1alpha1.PromotionPreview, id string) *tugboatv1alpha1.PreviewTargetStatus {
	for i := range pp.Status.Targets {
		if pp.Status.Targets[i].ActionID == id {
			return &pp.Status.Targets[i]
		}
	}
	return nil
}

// openPreview reports whether action id of pp waits for an answer.
func openPreview(pp *tugboatv1alpha1.PromotionPreview, id string) bool {
	st := previewStatus(pp, id)
	return st == nil || open(st.Phase)
}

// previewOffered reports whether pp's actions may be handed out: its
// Promotion, a helm Promotion (or one whose strategy is not recorded
// yet), has not started, and the deadline has not passed.
func (s *Store) previewOffered(pp *tugboatv1alpha1.PromotionPreview, pr *tugboatv1alpha1.Promotion) bool {
	// A strategy not recorded yet ("") is the Pipeline's (previewStrategy).
	if st := pr.StrategyType(); !pp.DeletionTimestamp.IsZero() || !pr.DeletionTimestamp.IsZero() || st != "" && st != tugboatv1alpha1.StrategyHelm ||
		!s.now().Before(pp.Spec.Deadline.Time) {
		return false
	}
	switch pr.Status.Phase {
	case "", tugboatv1alpha1.PromotionPending, tugboatv1alpha1.PromotionWaitingApproval:
		return true
	}
	return false
}

// pendingPreviews returns the open preview actions of who and marks them
// Delivered.
func (s *Store) pendingPreviews(ctx context.Context, who ingest.Spoke) ([]wire.Action, error) {
	previews, err := s.previews(ctx, who)
	if err != nil {
		return nil, err
	}
	var out []wire.Action
	for i := range previews {
		pp := &previews[i]
		if !slices.ContainsFunc(pp.Spec.Targets, func(t tugboatv1alpha1.PreviewTarget) bool {
			return t.Spoke == who.Name && openPreview(pp, t.ActionID)
		}) {
			continue
		}
		acts, err := s.deliverPreview(ctx, client.ObjectKeyFromObject(pp), who.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, acts...)
	}
	return out, nil
}

// deliverPreview marks the open preview actions of one PromotionPreview for
// spoke Delivered and returns them, from a fresh read.
func (s *Store) deliverPreview(ctx context.Context, key types.NamespacedName, spoke string) ([]wire.Action, error) {
	var acts []wire.Action
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		acts = nil
		pp := &tugboatv1alpha1.PromotionPreview{}
		if err := s.api.Get(ctx, key, pp); err != nil {
			return client.IgnoreNotFound(err)
		}
		hs, ref, err := s.previewStrategy(ctx, pp)
		if err != nil || hs == nil {
			return err
		}
		values, err := helm.ValuesPolicy(hs)
		if err != nil {
			return nil
		}
		orig := pp.DeepCopy()
		for _, t := range pp.Spec.Targets {
			if t.Spoke != spoke || !openPreview(pp, t.ActionID) {
				continue
			}
			src, err := helm.ChartSource(hs, t.Release, false)
			if err != nil {
				s.log.Info("Not offering a preview", "promotion", key.String(), "spoke", spoke, "error", err.Error())
				continue
			}
			st := previewStatus(pp, t.ActionID)
			if st == nil {
				pp.Status.Targets = append(pp.Status.Targets, tugboatv1alpha1.PreviewTargetStatus{ActionID: t.ActionID, Phase: tugboatv1alpha1.ActionDelivered})
				st = &pp.Status.Targets[len(pp.Status.Targets)-1]
			}
			st.Phase = tugboatv1alpha1.ActionDelivered
			st.Deliveries++
			acts = append(acts, wire.Action{
				ID:        t.ActionID,
				Type:      wire.ActionPreview,
				Promotion: ref,
				Namespace: t.Namespace,
				Release:   t.Release,
				Preview:   &wire.PreviewAction{Chart: src, Version: pp.Spec.Version, ValuesPolicy: values},
				Created:   pp.CreationTimestamp.UTC(),
			})
		}
		if len(acts) == 0 {
			return nil
		}
		return s.client.Status().Patch(ctx, pp, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return nil, fmt.Errorf("marking the preview actions of %s delivered: %w", key, err)
	}
	return acts, nil
}

// previewStrategy returns the helm strategy pp's actions carry out, and
// what they are for (the Promotion's namespace/name, or the on-demand
// preview's), or nil when they are not offered (any more): a Promotion's
// preview while its Promotion has not started; an on-demand one once the
// hub resolved it (promotion.OnDemandReconciler), with the strategy of
// its destination environment as the Pipeline says now. Both until their
// deadline.
func (s *Store) previewStrategy(ctx context.Context, pp *tugboatv1alpha1.PromotionPreview) (*tugboatv1alpha1.HelmStrategy, string, error) {
	if !pp.Spec.OnDemand() {
		pr := &tugboatv1alpha1.Promotion{}
		if err := s.client.Get(ctx, types.NamespacedName{Namespace: pp.Namespace, Name: pp.Spec.Promotion}, pr); err != nil {
			return nil, "", client.IgnoreNotFound(err)
		}
		if !s.previewOffered(pp, pr) || !ownedBy(pp, pr) {
			return nil, "", nil
		}
		ref := pr.Namespace + "/" + pr.Name
		if st := pr.Status.Strategy; st != nil {
			return st.Helm, ref, nil
		}
		// The reconcile that created pp records the strategy it resolved
		// from the Pipeline in the Promotion's status just after: this read
		// came first.
		hs, err := s.helmStrategyOf(ctx, pp.Namespace, pr.Spec.Pipeline, pr.Spec.To)
		return hs, ref, err
	}
	if len(pp.Spec.Targets) == 0 || !pp.DeletionTimestamp.IsZero() || !s.now().Before(pp.Spec.Deadline.Time) {
		return nil, "", nil
	}
	hs, err := s.helmStrategyOf(ctx, pp.Namespace, pp.Spec.Pipeline, pp.Spec.To)
	return hs, pp.Namespace + "/" + pp.Name, err
}

// helmStrategyOf returns the helm strategy environment env of Pipeline
// name promotes with, or nil (no such Pipeline or environment, another
// strategy).
func (s *Store) helmStrategyOf(ctx context.Context, namespace, name, env string) (*tugboatv1alpha1.HelmStrategy, error) {
	p := &tugboatv1alpha1.Pipeline{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, p); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	for i := range p.Spec.Environments {
		if e := &p.Spec.Environments[i]; e.Name == env {
			if st := pipeline.StrategyFor(p, e); st.Type == tugboatv1alpha1.StrategyHelm {
				return st.Helm, nil
			}
		}
	}
	return nil, nil
}

// ownedBy reports whether pp belongs to pr (the Promotion of the same
// name and UID), so a preview left from a deleted Promotion of the same
// name is never offered.
func ownedBy(pp *tugboatv1alpha1.PromotionPreview, pr *tugboatv1alpha1.Promotion) bool {
	for _, ref := range pp.OwnerReferences {
		if ref.UID == pr.UID {
			return true
		}
	}
	return false
}

// reportPreview records the outcome of a preview action of who. It reports
// false when who has no preview action with that id (the caller then looks
// among the Promotions' actions).
func (s *Store) reportPreview(ctx context.Context, who ingest.Spoke, o wire.ActionOutcome) (bool, error) {
	previews, err := s.previews(ctx, who)
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(previews, func(pp tugboatv1alpha1.PromotionPreview) bool { return previewTarget(&pp, who.Name, o.ID) != nil })
	if i < 0 {
		return false, nil
	}
	phase, ok := phases[o.Result]
	if !ok {
		return true, fmt.Errorf("result %q: must be %s, %s or %s", o.Result, wire.ActionSucceeded, wire.ActionFailed, wire.ActionRefused)
	}
	if phase == tugboatv1alpha1.ActionSucceeded && o.Preview == nil {
		phase, o.Message = tugboatv1alpha1.ActionFailed, "the agent answered no preview (an agent older than previews?)"
	}
	msg := clip.String(o.Message, maxMessage)
	key := client.ObjectKeyFromObject(&previews[i])
	return true, retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		pp := &tugboatv1alpha1.PromotionPreview{}
		if err := s.api.Get(ctx, key, pp); err != nil {
			return fmt.Errorf("reading promotion preview %s: %w", key, err)
		}
		t := previewTarget(pp, who.Name, o.ID)
		if t == nil {
			return errNotFound(o.ID)
		}
		orig := pp.DeepCopy()
		st := previewStatus(pp, o.ID)
		if st != nil && !open(st.Phase) {
			if st.Phase == phase && (o.Preview == nil || st.Digest == o.Preview.Digest) {
				return nil
			}
			return errConflict(fmt.Sprintf("preview %s was already reported %s", o.ID, st.Phase))
		}
		if st == nil {
			pp.Status.Targets = append(pp.Status.Targets, tugboatv1alpha1.PreviewTargetStatus{ActionID: o.ID})
			st = &pp.Status.Targets[len(pp.Status.Targets)-1]
		}
		st.Phase, st.Message = phase, msg
		if phase == tugboatv1alpha1.ActionSucceeded {
			st.Digest, st.Revision = o.Preview.Digest, int32(min(max(o.Preview.Revision, 0), 1<<31-1))
			mergeGroup(&pp.Status, t, o.Preview)
		}
		if err := s.client.Status().Patch(ctx, pp, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		s.log.Info("Agent answered a preview", "promotion", key.String(), "spoke", who.Name, "namespace", t.Namespace, "release", t.Release, "result", o.Result)
		return nil
	})
}

// previewTarget returns pp's target on spoke whose action has id, or nil.
func previewTarget(pp *tugboatv1alpha1.PromotionPreview, spoke, id string) *tugboatv1alpha1.PreviewTarget {
	for i := range pp.Spec.Targets {
		if t := &pp.Spec.Targets[i]; t.Spoke == spoke && t.ActionID == id {
			return t
		}
	}
	return nil
}

// previews lists, from the cache, the PromotionPreviews asking who, in the
// namespace of the Spoke (see promotions).
func (s *Store) previews(ctx context.Context, who ingest.Spoke) ([]tugboatv1alpha1.PromotionPreview, error) {
	ns := who.Namespace
	if ns == "" {
		var spokes tugboatv1alpha1.SpokeList
		if err := s.client.List(ctx, &spokes, client.MatchingFields{releasehistory.SpokeNameIndex: who.Name}); err != nil {
			return nil, fmt.Errorf("listing spokes: %w", err)
		}
		var live []string
		for _, sp := range spokes.Items {
			if sp.DeletionTimestamp.IsZero() {
				live = append(live, sp.Namespace)
			}
		}
		if len(live) != 1 {
			return nil, nil
		}
		ns = live[0]
	}
	var list tugboatv1alpha1.PromotionPreviewList
	if err := s.client.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{PreviewSpokeIndex: who.Name}); err != nil {
		return nil, fmt.Errorf("listing promotion previews: %w", err)
	}
	return list.Items, nil
}

// mergeGroup adds the answer of target t to the group of its digest, or
// to a new group (at most MaxPreviewGroups; beyond, it is counted in
// otherChanges). Groups are kept most targets first.
func mergeGroup(st *tugboatv1alpha1.PromotionPreviewStatus, t *tugboatv1alpha1.PreviewTarget, res *wire.PreviewResult) {
	addSpokes := func(g *tugboatv1alpha1.PreviewGroup) {
		spokes := t.Spokes
		if len(spokes) == 0 {
			spokes = []string{t.Spoke}
		}
		for _, sp := range spokes {
			if len(g.Spokes) < tugboatv1alpha1.MaxPreviewSpokes && !slices.Contains(g.Spokes, sp) {
				g.Spokes = append(g.Spokes, sp)
			}
		}
	}
	if i := slices.IndexFunc(st.Groups, func(g tugboatv1alpha1.PreviewGroup) bool { return g.Digest == res.Digest }); i >= 0 {
		st.Groups[i].Targets += t.Targets
		addSpokes(&st.Groups[i])
	} else if len(st.Groups) < tugboatv1alpha1.MaxPreviewGroups {
		g := storedGroup(res)
		g.Targets = t.Targets
		addSpokes(&g)
		st.Groups = append(st.Groups, g)
	} else {
		st.OtherChanges++
		return
	}
	slices.SortStableFunc(st.Groups, func(a, b tugboatv1alpha1.PreviewGroup) int { return cmp.Compare(b.Targets, a.Targets) })
}

// storedGroup converts an answer to a group within the object's bounds:
// at most MaxPreviewObjects objects and MaxPreviewGroupDiffs bytes of
// diffs (the values diff first, then the objects in order); what is cut
// is marked and said in the note.
func storedGroup(res *wire.PreviewResult) tugboatv1alpha1.PreviewGroup {
	g := tugboatv1alpha1.PreviewGroup{
		Digest: res.Digest, FromVersion: clip.String(res.FromVersion, 128), DryRun: res.DryRun,
		ObjectsChanged: int32(min(max(res.ObjectsChanged, 0), 1<<31-1)), LinesChanged: int32(min(max(res.LinesChanged, 0), 1<<31-1)),
		Truncated: res.Truncated,
	}
	var notes []string
	if res.Note != "" {
		notes = append(notes, res.Note)
	}
	values := res.ValuesDiff
	if len(values) > tugboatv1alpha1.MaxPreviewValuesDiff {
		values, g.Truncated = cutDiff(values, tugboatv1alpha1.MaxPreviewValuesDiff), true
		notes = append(notes, "the hub cut the values diff")
	}
	g.ValuesDiff = values
	budget := tugboatv1alpha1.MaxPreviewGroupDiffs - len(values)
	dropped := 0
	for i, o := range res.Objects {
		if i == tugboatv1alpha1.MaxPreviewObjects {
			g.Truncated = true
			notes = append(notes, fmt.Sprintf("the hub lists %d of %d objects", tugboatv1alpha1.MaxPreviewObjects, len(res.Objects)))
			break
		}
		po := tugboatv1alpha1.PreviewObject{
			APIVersion: clip.String(o.APIVersion, 128), Kind: clip.String(o.Kind, 63), Namespace: clip.String(o.Namespace, 63), Name: clip.String(o.Name, 253),
			Change: tugboatv1alpha1.PreviewChange(o.Change), Secret: o.Secret, Truncated: o.Truncated,
		}
		if !o.Secret {
			po.Diff = cutDiff(o.Diff, tugboatv1alpha1.MaxPreviewDiff)
		}
		if len(po.Diff) > budget {
			po.Diff, po.Truncated = "", true
			dropped++
		}
		budget -= len(po.Diff)
		g.Objects = append(g.Objects, po)
	}
	if dropped > 0 {
		g.Truncated = true
		notes = append(notes, fmt.Sprintf("the hub left out %d diffs to keep within %d KiB", dropped, tugboatv1alpha1.MaxPreviewGroupDiffs>>10))
	}
	g.Note = clip.String(strings.Join(notes, "; "), 1024)
	return g
}

// cutDiff shortens a diff to at most n bytes, on a line boundary.
func cutDiff(d string, n int) string {
	if len(d) <= n {
		return d
	}
	d = clip.String(d, n)
	if i := strings.LastIndexByte(d, '\n'); i >= 0 {
		return d[:i+1]
	}
	return ""
}
