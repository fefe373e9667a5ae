package promotion

// Per-target state (issue 24): each target a Promotion acts on has a
// PromotionTarget of its own, owned by the Promotion, so that a Promotion
// into thousands of targets stays small and an agent's report rewrites
// one small object. A reconcile reads the Promotion's PromotionTargets
// once (loadTargets, from the API server: acting is planned from them, so
// never from a cache that lags behind the last write), works on them in
// memory (targetSet), and writes back, before the Promotion's own status,
// only the PromotionTargets that changed (writeTargets): a report that
// changes nothing writes nothing.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// target is one destination target as a reconcile works on it: which
// release on which Spoke (its PromotionTarget's spec), and its progress
// (its status).
type target struct {
	Spoke, Namespace, Release string
	tugboatv1alpha1.PromotionTargetStatus
}

func (t *target) key() string { return t.Spoke + "/" + t.Namespace + "/" + t.Release }

// targetSet is the targets of one Promotion during one reconcile: items
// in the order the reconcile works on them, and the PromotionTargets as
// read, by key, to write back only what changed.
type targetSet struct {
	items  []target
	stored map[string]*tugboatv1alpha1.PromotionTarget
}

type targetSetKey struct{}

// withTargets returns ctx carrying set: the reconcile's working set, read
// by the phases and steps through targetsOf, so their signatures (shared
// with the steps' code) stay as they are.
func withTargets(ctx context.Context, set *targetSet) context.Context {
	return context.WithValue(ctx, targetSetKey{}, set)
}

// targetsOf returns the working set ctx carries; an empty one (that
// writes nothing) when none.
func targetsOf(ctx context.Context) *targetSet {
	if set, ok := ctx.Value(targetSetKey{}).(*targetSet); ok {
		return set
	}
	return &targetSet{}
}

// listTargets returns the PromotionTargets of pr that r reads through c,
// sorted by target.
func listTargets(ctx context.Context, c client.Reader, pr *tugboatv1alpha1.Promotion) ([]tugboatv1alpha1.PromotionTarget, error) {
	var list tugboatv1alpha1.PromotionTargetList
	if err := c.List(ctx, &list, client.InNamespace(pr.Namespace),
		client.MatchingLabels{tugboatv1alpha1.LabelPromotion: tugboatv1alpha1.PromotionLabelValue(pr.Name)}); err != nil {
		return nil, fmt.Errorf("listing the targets of promotion %s: %w", pr.Name, err)
	}
	out := slices.DeleteFunc(list.Items, func(pt tugboatv1alpha1.PromotionTarget) bool {
		return !pt.Of(pr)
	})
	slices.SortFunc(out, func(a, b tugboatv1alpha1.PromotionTarget) int { return strings.Compare(a.Key(), b.Key()) })
	return out, nil
}

// loadTargets reads pr's PromotionTargets from the API server.
func (r *Reconciler) loadTargets(ctx context.Context, pr *tugboatv1alpha1.Promotion) (*targetSet, error) {
	pts, err := listTargets(ctx, r.APIReader, pr)
	if err != nil {
		return nil, err
	}
	set := &targetSet{stored: make(map[string]*tugboatv1alpha1.PromotionTarget, len(pts))}
	for i := range pts {
		pt := &pts[i]
		set.stored[pt.Key()] = pt
		set.items = append(set.items, target{Spoke: pt.Spec.Spoke, Namespace: pt.Spec.Namespace, Release: pt.Spec.Release, PromotionTargetStatus: *pt.Status.DeepCopy()})
	}
	return set, nil
}

// kept reports whether t has a PromotionTarget: with a rollout, once its
// wave was acted on; without, every target the Promotion started with.
func kept(pr *tugboatv1alpha1.Promotion, t *target) bool {
	return !hasRollout(pr) || t.Rollout != nil
}

// writeTargets writes back what changed in set: it creates the
// PromotionTarget of a target acted on for the first time, patches the
// status of one that changed (optimistic lock: the receiver writes the
// agents' outcomes to the same objects), and deletes that of a target
// that left the Promotion. conflict is true when a patch lost against a
// concurrent write: the reconcile is then repeated on fresh reads.
func (r *Reconciler) writeTargets(ctx context.Context, pr *tugboatv1alpha1.Promotion, set *targetSet) (conflict bool, err error) {
	if set.stored == nil && len(set.items) == 0 {
		return false, nil
	}
	seen := map[string]bool{}
	for i := range set.items {
		t := &set.items[i]
		if !kept(pr, t) {
			continue
		}
		seen[t.key()] = true
		pt := set.stored[t.key()]
		if pt == nil {
			if pt, err = r.createTarget(ctx, pr, t); apierrors.IsAlreadyExists(err) {
				// Created by a reconcile whose Promotion status write did
				// not land (the phase it moved to was not recorded): the
				// same target of the same Promotion, so it is this one.
				pt = &tugboatv1alpha1.PromotionTarget{}
				key := client.ObjectKey{Namespace: pr.Namespace, Name: tugboatv1alpha1.PromotionTargetName(pr.Name, t.Spoke, t.Namespace, t.Release)}
				if err := r.APIReader.Get(ctx, key, pt); apierrors.IsNotFound(err) {
					// Gone since (the garbage collector deleting the
					// target of an earlier Promotion of this name): the
					// reconcile is repeated, so no target is left out.
					return true, nil
				} else if err != nil {
					return false, err
				}
				if !metav1.IsControlledBy(pt, pr) || pt.Spec.Promotion != pr.Name || pt.Key() != t.key() {
					return false, fmt.Errorf("promotion target %s exists and is not promotion %s's target %s", key.Name, pr.Name, t.key())
				}
			} else if err != nil {
				return false, err
			}
		}
		if equality.Semantic.DeepEqual(pt.Status, t.PromotionTargetStatus) {
			continue
		}
		orig := pt.DeepCopy()
		pt.Status = *t.DeepCopy()
		if err := r.Client.Status().Patch(ctx, pt, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return true, nil
			}
			return false, fmt.Errorf("recording target %s of promotion %s: %w", t.key(), pr.Name, err)
		}
	}
	for key, pt := range set.stored {
		if seen[key] {
			continue
		}
		// The target left the environment: it is no longer part of this
		// Promotion, and the store no longer offers it an action.
		if err := r.Client.Delete(ctx, pt, client.Preconditions{UID: &pt.UID}); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("deleting target %s of promotion %s: %w", key, pr.Name, err)
		}
	}
	return false, nil
}

// createTarget creates the PromotionTarget of t, owned by pr, without
// status (the status subresource ignores it on create).
func (r *Reconciler) createTarget(ctx context.Context, pr *tugboatv1alpha1.Promotion, t *target) (*tugboatv1alpha1.PromotionTarget, error) {
	pt := &tugboatv1alpha1.PromotionTarget{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pr.Namespace,
			Name:      tugboatv1alpha1.PromotionTargetName(pr.Name, t.Spoke, t.Namespace, t.Release),
			Labels: map[string]string{
				tugboatv1alpha1.LabelPromotion: tugboatv1alpha1.PromotionLabelValue(pr.Name),
				tugboatv1alpha1.LabelSpoke:     t.Spoke,
			},
		},
		Spec: tugboatv1alpha1.PromotionTargetSpec{Promotion: pr.Name, Spoke: t.Spoke, Namespace: t.Namespace, Release: t.Release},
	}
	if err := controllerutil.SetControllerReference(pr, pt, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, pt); err != nil {
		return nil, fmt.Errorf("creating target %s of promotion %s: %w", t.key(), pr.Name, err)
	}
	return pt, nil
}

// eventTargets returns how many targets pr carries the version to
// (promotionTargets: with a rollout, every target of the environment,
// acted on or not) and the first MaxEventTargets of them, as a step's
// request or LifecycleEvent names them.
func (r *Reconciler) eventTargets(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline) (int, []tugboatv1alpha1.EventTarget, error) {
	i := pipeline.EnvironmentIndex(p, pr.Spec.To)
	if i < 0 {
		return 0, nil, nil
	}
	resolved, err := r.promotionTargets(ctx, pr, p, &p.Spec.Environments[i])
	if err != nil {
		return 0, nil, err
	}
	out := make([]tugboatv1alpha1.EventTarget, 0, min(len(resolved), tugboatv1alpha1.MaxEventTargets))
	for _, rt := range resolved[:min(len(resolved), tugboatv1alpha1.MaxEventTargets)] {
		out = append(out, tugboatv1alpha1.EventTarget{Spoke: rt.Spoke, Namespace: rt.Namespace, Release: pipeline.ReleaseOf(p, &rt.Target)})
	}
	return len(resolved), out, nil
}
