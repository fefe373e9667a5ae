package promotion_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// promotionTargets reads the PromotionTargets of Promotion name in ns
// from the API server, sorted by target.
func promotionTargets(tb testing.TB, ns, name string) []tugboatv1alpha1.PromotionTarget {
	tb.Helper()
	var list tugboatv1alpha1.PromotionTargetList
	if err := cluster.Client.List(context.Background(), &list, client.InNamespace(ns),
		client.MatchingLabels{tugboatv1alpha1.LabelPromotion: tugboatv1alpha1.PromotionLabelValue(name)}); err != nil {
		tb.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b tugboatv1alpha1.PromotionTarget) int { return strings.Compare(a.Key(), b.Key()) })
	return list.Items
}

// patchTarget applies change to the status of the PromotionTarget of
// Promotion name on spoke, as the hub's receiver does (hubc, optimistic
// lock).
func patchTarget(tb testing.TB, ns, name, spoke string, change func(*tugboatv1alpha1.PromotionTargetStatus)) error {
	tb.Helper()
	for _, pt := range promotionTargets(tb, ns, name) {
		if pt.Spec.Spoke != spoke {
			continue
		}
		orig := pt.DeepCopy()
		change(&pt.Status)
		if err := hubc.Status().Patch(context.Background(), &pt, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
	}
	return nil
}
