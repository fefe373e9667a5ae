package dashboard

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// stepView is one lifecycle step of a Promotion (status.steps), as the
// Promotion page shows it.
type stepView struct {
	Name  string
	Stage tugboatv1alpha1.StepStage
	Type  tugboatv1alpha1.StepType
	Phase tugboatv1alpha1.StepPhase
	// Class is the phase's badge class.
	Class                  string
	Attempts               int32
	StartedAt, CompletedAt *metav1.Time
	// Message is what the step waits for, or how it ended (for a helmTest
	// step, the failing test Pod's log excerpt).
	Message string
	// LifecycleEvent names the current attempt's LifecycleEvent, if any.
	LifecycleEvent string
	// Metrics is the measurements of a metrics step's current (or last)
	// attempt; nil for other steps.
	Metrics *metricsView
}

// metricsView is what a metrics step measured.
type metricsView struct {
	// Summary counts the measurements taken and failed.
	Summary string
	// Measurements are the latest, newest first.
	Measurements []measurementView
}

// measurementView is one evaluation of a metrics step's query.
type measurementView struct {
	At      *metav1.Time
	Value   string
	Passed  bool
	Message string
}

// stepsOf returns pr's steps, in the order the hub runs them (pre steps
// first, then post steps, as status.steps lists them).
func stepsOf(pr *tugboatv1alpha1.Promotion) []stepView {
	out := make([]stepView, 0, len(pr.Status.Steps))
	for _, s := range pr.Status.Steps {
		v := stepView{
			Name: s.Name, Stage: s.Stage, Type: s.Type, Phase: s.Phase, Class: stepClass(s.Phase),
			Attempts: s.Attempts, StartedAt: s.StartedAt, CompletedAt: s.CompletedAt,
			Message: s.Message, LifecycleEvent: s.LifecycleEvent,
		}
		if m := s.Metrics; m != nil {
			mv := &metricsView{Summary: fmt.Sprintf("%d measurement(s) taken, %d failed", m.Taken, m.Failed)}
			for i := len(m.Measurements) - 1; i >= 0; i-- {
				x := m.Measurements[i]
				at := metav1.NewTime(x.At.Time)
				mv.Measurements = append(mv.Measurements, measurementView{At: &at, Value: x.Value, Passed: x.Passed, Message: x.Message})
			}
			v.Metrics = mv
		}
		out = append(out, v)
	}
	return out
}

func stepClass(p tugboatv1alpha1.StepPhase) string {
	switch p {
	case tugboatv1alpha1.StepSucceeded:
		return "ok"
	case tugboatv1alpha1.StepFailed, tugboatv1alpha1.StepTimedOut:
		return "bad"
	case tugboatv1alpha1.StepRunning:
		return "busy"
	}
	return "unknown"
}
