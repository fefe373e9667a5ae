package spoke

import (
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Event reasons of a Spoke.
const (
	// EventAgentLost: the spoke was Ready and is no longer (no heartbeat
	// within the timeout, an old agent, a refused key).
	EventAgentLost = "AgentLost"
	// EventAgentReady: the spoke is Ready: its agent (or Flux) is heard
	// from, for the first time or again after it was lost.
	EventAgentReady = "AgentReady"
)

// recordReadiness emits an Event when sp's Ready condition moved between
// before and sp.Status: lost, or ready (first heard from, or back). The
// note is the condition's message (times and reasons, never a key). A nil
// recorder records nothing.
func recordReadiness(rec events.EventRecorder, sp *tugboatv1alpha1.Spoke, before []metav1.Condition) {
	if rec == nil {
		return
	}
	was := apimeta.FindStatusCondition(before, tugboatv1alpha1.ReadyCondition.String())
	now := apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
	if now == nil {
		return
	}
	wasReady := was != nil && was.Status == metav1.ConditionTrue
	isReady := now.Status == metav1.ConditionTrue
	switch {
	case wasReady && !isReady:
		rec.Eventf(sp, nil, corev1.EventTypeWarning, EventAgentLost, "Heartbeat", "%s", now.Message)
	case !wasReady && isReady:
		rec.Eventf(sp, nil, corev1.EventTypeNormal, EventAgentReady, "Heartbeat", "%s", now.Message)
	}
}
