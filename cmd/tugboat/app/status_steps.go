//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"io"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// addSteps reads the lifecycle steps of each environment's active
// promotion into v (status.steps of the Promotion).
func addSteps(ctx context.Context, s *hubSession, v *pipelineView) error {
	for i := range v.Environments {
		ev := &v.Environments[i]
		if ev.ActivePromotion == "" {
			continue
		}
		pr := &tugboatv1alpha1.Promotion{}
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: v.Namespace, Name: ev.ActivePromotion}, pr); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
				// Deleted since the Pipeline's status was written, or not
				// readable by this user: the steps are left out.
				continue
			}
			return fmt.Errorf("reading promotion %s: %w", ev.ActivePromotion, err)
		}
		ev.Steps = pr.Status.Steps
	}
	return nil
}

// printSteps prints the lifecycle steps of the active promotions, if any.
func printSteps(w io.Writer, v pipelineView, pt painter) {
	some := false
	for _, ev := range v.Environments {
		some = some || len(ev.Steps) > 0
	}
	if !some {
		return
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	row(tw, "ENVIRONMENT", "PROMOTION", "STEP", "STAGE", "TYPE", pt.header("PHASE"), "ATTEMPTS", "EVENT", "MESSAGE")
	for _, ev := range v.Environments {
		for _, st := range ev.Steps {
			row(tw, ev.Name, ev.ActivePromotion, st.Name, string(st.Stage), string(st.Type), pt.cell(string(st.Phase)), strconv.Itoa(int(st.Attempts)), st.LifecycleEvent, st.Message)
		}
	}
	_ = tw.Flush()
}
