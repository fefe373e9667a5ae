//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/lifecycle"
	"tugboat.dev/tugboat/controllers/promotion"
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

// timedOutRun is how many of a Lifecycle's latest finished events must
// all have timed out for doctor to warn: its controller does not answer.
const timedOutRun = 3

// checkTimeouts warns about each lifecycle whose latest timedOutRun
// finished events (by finishedAt) all timed out.
func (d *doctor) checkTimeouts(ctx context.Context) {
	var list tugboatv1alpha1.LifecycleEventList
	var opts []client.ListOption
	if d.namespace != "" {
		opts = append(opts, client.InNamespace(d.namespace))
	}
	if err := d.c.List(ctx, &list, opts...); err != nil {
		if !apimeta.IsNoMatchError(err) && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
			d.readFailed(ctx, checkPromotion, "list", "lifecycleevents."+d.group, d.namespace, "", err)
		}
		return
	}
	finished := map[string][]*tugboatv1alpha1.LifecycleEvent{} // by namespace/lifecycle
	for i := range list.Items {
		ev := &list.Items[i]
		if ev.Phase().Finished() && ev.Status.FinishedAt != nil {
			k := ev.Namespace + "/" + ev.Spec.Lifecycle
			finished[k] = append(finished[k], ev)
		}
	}
	keys := make([]string, 0, len(finished))
	for k := range finished {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		evs := finished[k]
		if len(evs) < timedOutRun {
			continue
		}
		sort.SliceStable(evs, func(i, j int) bool { return evs[j].Status.FinishedAt.Before(evs[i].Status.FinishedAt) })
		latest := evs[:timedOutRun]
		var names []string
		for _, ev := range latest {
			if ev.Phase() != tugboatv1alpha1.EventTimedOut {
				names = nil
				break
			}
			names = append(names, ev.Name)
		}
		if names == nil {
			continue
		}
		ns, name, _ := strings.Cut(k, "/")
		if name == promotion.WebhookLifecycle {
			// The events of webhook steps whose receivers answered 202: no
			// controller stands behind them, the receivers report.
			d.add(checkPromotion, codeLifecycleStepsTimeOut, severityWarning, k,
				fmt.Sprintf("the last %d webhook steps that answered 202 Accepted got no report before their timeout: %s", timedOutRun, strings.Join(names, ", ")),
				fmt.Sprintf("do the receivers report through the CI API (POST /v1/pipelines/%s/{pipeline}/steps, docs/ci-api.md#report-a-webhook-step), in time? kubectl get lifecycleevents -n %s -l %s=%s",
					ns, ns, tugboatv1alpha1.LabelLifecycle, name))
			continue
		}
		d.add(checkPromotion, codeLifecycleStepsTimeOut, severityWarning, k,
			fmt.Sprintf("the last %d events of lifecycle %s (event key %s) timed out, unanswered: %s", timedOutRun, name, latest[0].Spec.EventKey, strings.Join(names, ", ")),
			fmt.Sprintf("is the controller for event key %s running, with RBAC on lifecycleevents/status? kubectl get lifecycleevents -n %s -l %s=%s",
				latest[0].Spec.EventKey, ns, tugboatv1alpha1.LabelLifecycle, name))
	}
}

func orNone(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
