//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// checkPromotions reports Promotions stuck waiting for approval, near or
// past their timeout, not started, and each Pipeline's recent failures.
func (d *doctor) checkPromotions(ctx context.Context, promotions []tugboatv1alpha1.Promotion, pipelines []tugboatv1alpha1.Pipeline) {
	now := d.now()
	byName := map[string]*tugboatv1alpha1.Pipeline{}
	for i := range pipelines {
		byName[pipelines[i].Namespace+"/"+pipelines[i].Name] = &pipelines[i]
	}
	problems := 0
	add := func(code findingCode, sev severity, obj, msg, hint string) {
		problems++
		d.add(checkPromotion, code, sev, obj, msg, hint)
	}
	failed := map[string][]*tugboatv1alpha1.Promotion{} // by pipeline
	for i := range promotions {
		pr := &promotions[i]
		obj := pr.Namespace + "/" + pr.Name
		what := fmt.Sprintf("%s into %s of pipeline %s", pr.Spec.Version, pr.Spec.To, pr.Spec.Pipeline)
		ready := apimeta.FindStatusCondition(pr.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
		since := pr.CreationTimestamp.Time
		if ready != nil && !ready.LastTransitionTime.IsZero() {
			since = ready.LastTransitionTime.Time
		}
		switch pr.Status.Phase {
		case tugboatv1alpha1.PromotionWaitingApproval:
			if waited := now.Sub(since); waited > d.opts.approvalAge {
				add(codePromotionAwaitingApproval, severityWarning, obj, fmt.Sprintf("%s has waited for approval for %s", what, age(waited)),
					fmt.Sprintf("tugboat approve %s -n %s, or tugboat reject %s -n %s", pr.Name, pr.Namespace, pr.Name, pr.Namespace))
			}
		case "", tugboatv1alpha1.PromotionPending:
			if waited := now.Sub(since); waited > d.opts.staleAfter {
				msg := fmt.Sprintf("%s is Pending for %s", what, age(waited))
				if ready != nil && ready.Message != "" {
					msg += ": " + ready.Message
				}
				add(codePromotionPending, severityWarning, obj, msg, "it starts once the Promotion into "+pr.Spec.To+" under way finishes; if none is, see the hub check")
			}
		case tugboatv1alpha1.PromotionPaused:
			msg := what + " is Paused"
			if ready != nil && ready.Message != "" {
				msg += ": " + ready.Message
			}
			add(codePromotionRolloutPaused, severityWarning, obj, msg,
				fmt.Sprintf("look at the failing targets (tugboat status %s -n %s); the Promotion holds %s until it is resumed and finishes (tugboat rollout resume %s -n %s) or is aborted (tugboat rollout abort %s -n %s)",
					pr.Spec.Pipeline, pr.Namespace, pr.Spec.To, pr.Name, pr.Namespace, pr.Name, pr.Namespace))
		case tugboatv1alpha1.PromotionRollingBack:
			msg := what + " is RollingBack"
			if ready != nil && ready.Message != "" {
				msg += ": " + ready.Message
			}
			add(codePromotionRollingBack, severityWarning, obj, msg,
				fmt.Sprintf("its rollout failed; the agents of the targets named return them to the revision they ran (tugboat status %s -n %s); then it fails and %s stays held until resumed", pr.Spec.Pipeline, pr.Namespace, pr.Spec.To))
		case tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.PromotionVerifying:
			if pr.Status.Rollout != nil && pr.Status.Rollout.Resolved != nil {
				// A rollout is bounded by its waves' progress deadlines, not
				// the Pipeline's timeout: soaks may take hours.
				break
			}
			timeout := defaultPromotionTimeout
			if p := byName[pr.Namespace+"/"+pr.Spec.Pipeline]; p != nil && p.Spec.Timeout != nil && p.Spec.Timeout.Duration > 0 {
				timeout = p.Spec.Timeout.Duration
			}
			start := pr.CreationTimestamp.Time
			if pr.Status.StartedAt != nil {
				start = pr.Status.StartedAt.Time
			}
			elapsed := now.Sub(start)
			waiting := d.waitingTargets(ctx, pr)
			switch {
			case elapsed > timeout+d.opts.reconcileGrace:
				add(codePromotionPastTimeout, severityError, obj, fmt.Sprintf("%s is %s for %s, past its %s timeout, and the hub has not failed it%s", what, pr.Status.Phase, age(elapsed), age(timeout), waiting),
					"the hub's promotion controller is not acting: see the hub check")
			case elapsed >= timeout*4/5:
				add(codePromotionNearTimeout, severityWarning, obj, fmt.Sprintf("%s is %s for %s of its %s timeout%s", what, pr.Status.Phase, age(elapsed), age(timeout), waiting),
					fmt.Sprintf("look at the targets of %s: tugboat status %s -n %s", pr.Spec.To, pr.Spec.Pipeline, pr.Namespace))
			}
		case tugboatv1alpha1.PromotionFailed:
			key := pr.Namespace + "/" + pr.Spec.Pipeline
			failed[key] = append(failed[key], pr)
		}
	}

	// Each Pipeline's most recent failures: an error while nothing into
	// that environment succeeded or started since, a warning otherwise.
	for _, list := range failed {
		sort.Slice(list, func(i, j int) bool {
			ti, tj := finishedAt(list[i]), finishedAt(list[j])
			if !ti.Equal(tj) {
				return ti.After(tj)
			}
			return list[i].Name < list[j].Name
		})
		for n, pr := range list {
			if n >= d.opts.failures {
				break
			}
			obj := pr.Namespace + "/" + pr.Name
			reason, msg := "", ""
			if c := apimeta.FindStatusCondition(pr.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil {
				reason, msg = c.Reason, c.Message
			}
			text := fmt.Sprintf("%s into %s of pipeline %s failed %s ago", pr.Spec.Version, pr.Spec.To, pr.Spec.Pipeline, age(now.Sub(finishedAt(pr))))
			if reason != "" {
				text += fmt.Sprintf(" (%s): %s", reason, msg)
			}
			retry := fmt.Sprintf("fix what the message names, then retry: tugboat promote %s --to %s --version %s -n %s", pr.Spec.Pipeline, pr.Spec.To, pr.Spec.Version, pr.Namespace)
			if later := laterPromotion(promotions, pr); later != "" {
				add(codePromotionFailedSuperseded, severityWarning, obj, text+"; since then "+later, retry)
				continue
			}
			add(codePromotionFailed, severityError, obj, text, retry)
		}
	}
	if problems == 0 {
		d.add(checkPromotion, codePromotionsOK, severityOK, "", fmt.Sprintf("%s %s: none stuck, none failed", plural(len(promotions), "Promotion"), d.scope()), "")
	}
}

// waitingTargets lists the destination targets a Promotion still waits
// for (its PromotionTargets not done; the first 5); "" when there are
// none or they cannot be read.
func (d *doctor) waitingTargets(ctx context.Context, pr *tugboatv1alpha1.Promotion) string {
	var list tugboatv1alpha1.PromotionTargetList
	if err := d.c.List(ctx, &list, client.InNamespace(pr.Namespace),
		client.MatchingLabels{tugboatv1alpha1.LabelPromotion: tugboatv1alpha1.PromotionLabelValue(pr.Name)}); err != nil {
		return ""
	}
	var parts []string
	more := 0
	for i := range list.Items {
		pt := &list.Items[i]
		if pt.Spec.Promotion != pr.Name || pt.Status.Done {
			continue
		}
		if len(parts) == 5 {
			more++
			continue
		}
		s := pt.Key()
		if pt.Status.Message != "" {
			s += " (" + pt.Status.Message + ")"
		}
		parts = append(parts, s)
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("%d more", more))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; waiting for " + strings.Join(parts, ", ")
}

func finishedAt(pr *tugboatv1alpha1.Promotion) time.Time {
	if pr.Status.CompletedAt != nil {
		return pr.Status.CompletedAt.Time
	}
	return pr.CreationTimestamp.Time
}

// laterPromotion describes a Promotion into the same environment that
// succeeded after failed finished, or is under way; "" when there is none.
func laterPromotion(promotions []tugboatv1alpha1.Promotion, failed *tugboatv1alpha1.Promotion) string {
	for i := range promotions {
		pr := &promotions[i]
		if pr.UID == failed.UID || pr.Namespace != failed.Namespace || pr.Spec.Pipeline != failed.Spec.Pipeline || pr.Spec.To != failed.Spec.To {
			continue
		}
		switch {
		case pr.Status.Phase == tugboatv1alpha1.PromotionSucceeded && finishedAt(pr).After(finishedAt(failed)):
			return fmt.Sprintf("%s succeeded (%s)", pr.Spec.Version, pr.Name)
		case !pr.Status.Phase.Terminal():
			return fmt.Sprintf("%s is under way (%s)", pr.Spec.Version, pr.Name)
		}
	}
	return ""
}

// checkReleaseHistories counts the ReleaseHistories whose Ready is False,
// by reason.
func (d *doctor) checkReleaseHistories(ctx context.Context) {
	var list tugboatv1alpha1.ReleaseHistoryList
	if !d.list(ctx, checkReleaseHistory, "releasehistories", &list) {
		return
	}
	byReason := map[string][]*tugboatv1alpha1.ReleaseHistory{}
	for i := range list.Items {
		rh := &list.Items[i]
		if c := apimeta.FindStatusCondition(rh.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil && c.Status == metav1.ConditionFalse {
			byReason[c.Reason] = append(byReason[c.Reason], rh)
		}
	}
	if len(byReason) == 0 {
		d.add(checkReleaseHistory, codeReleaseHistoriesOK, severityOK, "", fmt.Sprintf("%s %s, none Ready=False", plural(len(list.Items), "ReleaseHistory"), d.scope()), "")
		return
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		rhs := byReason[reason]
		sort.Slice(rhs, func(i, j int) bool {
			return rhs[i].Namespace+"/"+rhs[i].Name < rhs[j].Namespace+"/"+rhs[j].Name
		})
		names := make([]string, len(rhs))
		for i, rh := range rhs {
			names[i] = rh.Namespace + "/" + rh.Name
		}
		first := rhs[0]
		msg := ""
		if c := apimeta.FindStatusCondition(first.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil && c.Message != "" {
			msg = fmt.Sprintf(" (%s: %s)", first.Name, c.Message)
		}
		var hint string
		code := codeReleaseHistoryNotReady
		switch reason {
		case "Failed":
			code = codeReleaseHistoryFailed
			hint = fmt.Sprintf("see what happened on the spoke: tugboat history %s/%s/%s -n %s --events", first.Spec.Spoke, first.Spec.Namespace, first.Spec.Release, first.Namespace)
		case "Uninstalled":
			code = codeReleaseHistoryUninstalled
			hint = "the releases are gone from their spokes: delete their ReleaseHistories if that is for good, and drop them from Pipelines' targets"
		default:
			hint = "kubectl describe releasehistory " + first.Name + " -n " + first.Namespace
		}
		d.add(checkReleaseHistory, code, severityWarning, "", fmt.Sprintf("%s Ready=False (%s): %s%s", plural(len(rhs), "ReleaseHistory"), reason, firstFew(names, 3), msg), hint)
	}
}
