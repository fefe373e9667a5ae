//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// rolloutView is what `tugboat status` shows of an active Promotion that
// rolls out in waves (its status.rollout).
type rolloutView struct {
	Promotion      string                         `json:"promotion"`
	Version        string                         `json:"version"`
	Phase          tugboatv1alpha1.RolloutPhase   `json:"phase,omitempty"`
	PausedBy       string                         `json:"pausedBy,omitempty"`
	CurrentWave    int32                          `json:"currentWave"`
	Waves          []tugboatv1alpha1.WaveStatus   `json:"waves,omitempty"`
	MaxFailures    int32                          `json:"maxFailures"`
	Failed         int32                          `json:"failed"`
	FailedTargets  []tugboatv1alpha1.FailedTarget `json:"failedTargets,omitempty"`
	Message        string                         `json:"message,omitempty"`
	PromotionPhase tugboatv1alpha1.PromotionPhase `json:"promotionPhase,omitempty"`
}

// addRollouts reads the active Promotions of the views' environments (one
// List per namespace) and adds the rollout of each that has one.
func addRollouts(ctx context.Context, c client.Reader, namespace string, views []pipelineView) error {
	active := false
	for _, v := range views {
		for _, ev := range v.Environments {
			active = active || ev.ActivePromotion != ""
		}
	}
	if !active {
		return nil
	}
	var list tugboatv1alpha1.PromotionList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("listing promotions in %s: %w", namespace, err)
	}
	byName := map[string]*tugboatv1alpha1.Promotion{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	for _, v := range views {
		for j, ev := range v.Environments {
			if pr := byName[ev.ActivePromotion]; pr != nil && pr.Status.Rollout != nil {
				v.Environments[j].Rollout = rolloutOf(pr) // the slice is shared with views
			}
		}
	}
	return nil
}

func rolloutOf(pr *tugboatv1alpha1.Promotion) *rolloutView {
	r := pr.Status.Rollout
	return &rolloutView{
		Promotion: pr.Name, Version: pr.Spec.Version, Phase: r.Phase, PausedBy: r.PausedBy, PromotionPhase: pr.Status.Phase,
		CurrentWave: r.CurrentWave, Waves: r.Waves, MaxFailures: r.MaxFailures, Failed: r.Failed,
		FailedTargets: r.FailedTargets, Message: r.Message,
	}
}

// progress is the rollout in one line (RolloutStatus.Progress).
func (r *rolloutView) progress() string {
	return (&tugboatv1alpha1.RolloutStatus{
		Phase: r.Phase, PausedBy: r.PausedBy, CurrentWave: r.CurrentWave, Waves: r.Waves, MaxFailures: r.MaxFailures, Failed: r.Failed,
	}).Progress()
}

// activeText is the ACTIVE PROMOTION cell: the Promotion, and the
// rollout's progress when it has one.
func activeText(ev environmentView) string {
	if ev.Rollout == nil {
		return ev.ActivePromotion
	}
	return ev.ActivePromotion + " (" + ev.Rollout.progress() + ")"
}

// printRollouts writes, for each environment rolling out in waves, its
// waves and, with wide, the targets that failed.
func printRollouts(w io.Writer, v pipelineView, wide bool, pt painter) {
	for _, ev := range v.Environments {
		r := ev.Rollout
		if r == nil {
			continue
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Rollout of %s into %s (promotion %s): %s\n", r.Version, ev.Name, r.Promotion, r.progress())
		if r.Message != "" {
			fmt.Fprintln(w, r.Message)
		}
		tw := newTable(w)
		row(tw, "WAVE", "TARGETS", "SUCCEEDED", "IN PROGRESS", "PENDING", "FAILED", "STARTED", "COMPLETED")
		for i, ws := range r.Waves {
			name := ws.Name
			if int32(i) == r.CurrentWave {
				name = "> " + name
			}
			row(tw, name, itoa(ws.Targets), itoa(ws.Succeeded), itoa(ws.InProgress), itoa(ws.Pending), itoa(ws.Failed), timestamp(ws.StartedAt), timestamp(ws.CompletedAt))
		}
		_ = tw.Flush()
		if !wide || len(r.FailedTargets) == 0 {
			if r.Failed > 0 && !wide {
				fmt.Fprintf(w, "%d failed target(s): -o wide lists them.\n", r.Failed)
			}
			continue
		}
		fmt.Fprintln(w)
		tw = newTable(w)
		row(tw, "FAILED SPOKE", "NAMESPACE", "RELEASE", "WAVE", pt.header("REASON"), "REVISION", "SINCE", "MESSAGE")
		for _, f := range r.FailedTargets {
			rev := ""
			if f.Revision > 0 {
				rev = itoa(f.Revision)
			}
			row(tw, f.Spoke, f.Namespace, f.Release, f.Wave, pt.cell(string(f.Reason)), rev, timestamp(f.Since), f.Message)
		}
		_ = tw.Flush()
		if more := int(r.Failed) - len(r.FailedTargets); more > 0 {
			fmt.Fprintf(w, "and %d more failing target(s), not listed (the Promotion keeps at most 20).\n", more)
		}
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
