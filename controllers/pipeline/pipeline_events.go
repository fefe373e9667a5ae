package pipeline

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Event reasons of a Pipeline.
const (
	// EventHoldSet: a rollback or an uninstall holds automatic promotion
	// into and out of an environment.
	EventHoldSet = "HoldSet"
	// EventHoldLifted: a resume lifted a hold.
	EventHoldLifted = "HoldLifted"
)

// recordHolds emits an Event for each hold set (or moved to a newer
// rollback) and each hold lifted between before and after. A nil recorder
// records nothing.
func recordHolds(rec events.EventRecorder, p *tugboatv1alpha1.Pipeline, before, after []tugboatv1alpha1.HeldEnvironment) {
	if rec == nil {
		return
	}
	was := map[string]tugboatv1alpha1.HeldEnvironment{}
	for _, h := range before {
		was[h.Name] = h
	}
	now := map[string]bool{}
	for _, h := range after {
		now[h.Name] = true
		if old, ok := was[h.Name]; ok && old.Version == h.Version && old.Reason == h.Reason && old.Since.Equal(&h.Since) {
			continue
		}
		rec.Eventf(p, nil, corev1.EventTypeWarning, EventHoldSet, "Hold",
			"automatic promotion into and out of %s is held (%s: %s); resume with `tugboat resume %s --env %s`", h.Name, h.Reason, h.Message, p.Name, h.Name)
	}
	for _, h := range before {
		if !now[h.Name] {
			rec.Eventf(p, nil, corev1.EventTypeNormal, EventHoldLifted, "Resume",
				"the hold on %s (%s of %s) is lifted: automatic promotion into and out of it goes on", h.Name, h.Reason, h.Version)
		}
	}
}
