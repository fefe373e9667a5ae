//go:build !agentonly

package app

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/lifecycle"
)

// checkLifecycles warns, under the promotion check, about each Lifecycle
// that no controller claimed within lifecycle.ClaimWindow: the external
// steps that name it wait for nobody and time out. A hub without the
// Lifecycle CRD (older than lifecycle steps), or a user who may not list
// Lifecycles, is not a finding of its own: the check is skipped.
func (d *doctor) checkLifecycles(ctx context.Context) {
	var list tugboatv1alpha1.LifecycleList
	var opts []client.ListOption
	if d.namespace != "" {
		opts = append(opts, client.InNamespace(d.namespace))
	}
	if err := d.c.List(ctx, &list, opts...); err != nil {
		if !apimeta.IsNoMatchError(err) && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
			d.readFailed(ctx, checkPromotion, "list", "lifecycles."+d.group, d.namespace, "", err)
		}
		return
	}
	now := d.now()
	for i := range list.Items {
		lc := &list.Items[i]
		if lifecycle.Claimed(lc, now) {
			continue
		}
		msg := fmt.Sprintf("Lifecycle %s (event key %s) has never been claimed: no controller says it handles it, so the external steps that name it time out", lc.Name, lc.Spec.EventKey)
		if t := lc.Status.LastClaimedAt; t != nil {
			msg = fmt.Sprintf("Lifecycle %s (event key %s) was last claimed %s ago by %s: its controller may have stopped, and the external steps that name it time out",
				lc.Name, lc.Spec.EventKey, age(now.Sub(t.Time)), orNone(lc.Status.ClaimedBy))
		}
		d.add(checkPromotion, codeLifecycleUnclaimed, severityWarning, lc.Namespace+"/"+lc.Name, msg,
			fmt.Sprintf("run the controller that handles event key %s; it claims the Lifecycle (tugboat lifecycle claim %s -n %s) at least every %s (docs/lifecycle.md#claiming-a-lifecycle)",
				lc.Spec.EventKey, lc.Name, lc.Namespace, age(lifecycle.ClaimWindow/3)))
	}
}

func orNone(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
