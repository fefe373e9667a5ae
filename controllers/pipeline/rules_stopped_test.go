package pipeline

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// failedStep marks the newest Promotion of the world as failed by its
// post step name (of type typ) with phase.
func (w *world) failedStep(name string, typ tugboatv1alpha1.StepType, phase tugboatv1alpha1.StepPhase) {
	pr := &w.promos[len(w.promos)-1]
	pr.Status.Steps = append(pr.Status.Steps, tugboatv1alpha1.StepStatus{Name: name, Stage: tugboatv1alpha1.StepStagePost, Type: typ, Phase: phase, Attempts: 1})
}

// A version whose promotion into staging failed a post step (its smoke
// test) runs in staging, deployed and healthy, but is not promoted out of
// it, and the Pipeline's Ready condition says why; a newer version that
// passes moves on, and so does the version after a retry that did not
// fail. A promotion that failed otherwise (its timeout, say) stops
// nothing, as before.
func TestRules_aVersionThatFailedAPostStepStopsThere(t *testing.T) {
	staged := func() *world {
		w := oneEach()
		w.deploy("dev-1", 2, "1.2.0", healthy, t0.Add(-time.Hour))
		w.deploy("staging-1", 2, "1.2.0", healthy, t0.Add(-30*time.Minute))
		w.deploy("prod-1", 1, "1.0.0", healthy, t0.Add(-48*time.Hour))
		w.promotion("staging", "1.2.0", tugboatv1alpha1.PromotionFailed)
		return w
	}
	t.Run("stopped", func(t *testing.T) {
		for _, phase := range []tugboatv1alpha1.StepPhase{tugboatv1alpha1.StepFailed, tugboatv1alpha1.StepTimedOut} {
			g := NewWithT(t)
			w := staged()
			w.failedStep("smoke", tugboatv1alpha1.StepHelmTest, phase)
			got, _, v := w.reconcile(t0)
			g.Expect(got).To(BeEmpty(), "1.2.0 is not promoted into production")
			g.Expect(v.envs[1].converged).To(BeTrue(), "staging runs it, healthy")
			how := map[tugboatv1alpha1.StepPhase]string{tugboatv1alpha1.StepFailed: "failed", tugboatv1alpha1.StepTimedOut: "timed out"}[phase]
			g.Expect([]string{w.ready().Reason, w.ready().Message}).To(Equal([]string{tugboatv1alpha1.StoppedByStepReason.String(),
				"1.2.0 is not promoted out of staging: its post step smoke (helmTest) " + how + " in promotion web-staging-1.2.0; " +
					"a newer version moves on (or promote it by hand: tugboat promote web --to ENV --version VERSION)"}))
		}
	})
	t.Run("not before its post steps passed", func(t *testing.T) {
		g := NewWithT(t)
		w := staged()
		w.promos[0].Status.Phase = tugboatv1alpha1.PromotionVerifying // its targets run 1.2.0; its smoke test runs
		w.promos[0].Status.Steps = []tugboatv1alpha1.StepStatus{{Name: "smoke", Stage: tugboatv1alpha1.StepStagePost, Type: tugboatv1alpha1.StepHelmTest, Phase: tugboatv1alpha1.StepRunning}}
		got, _, _ := w.reconcile(t0)
		g.Expect(got).To(BeEmpty(), "1.2.0 has not proved itself in staging yet")
		w.promos[0].Status.Phase, w.promos[0].Status.Steps[0].Phase = tugboatv1alpha1.PromotionSucceeded, tugboatv1alpha1.StepSucceeded
		got, _, _ = w.reconcile(t0.Add(time.Second))
		g.Expect(got).To(Equal([]string{"production@1.2.0"}))
	})
	t.Run("a newer version moves on", func(t *testing.T) {
		g := NewWithT(t)
		w := staged()
		w.failedStep("smoke", tugboatv1alpha1.StepHelmTest, tugboatv1alpha1.StepFailed)
		w.deploy("staging-1", 3, "1.2.1", healthy, t0.Add(-time.Minute))
		w.promotion("staging", "1.2.1", tugboatv1alpha1.PromotionSucceeded)
		got, _, _ := w.reconcile(t0)
		g.Expect(got).To(Equal([]string{"production@1.2.1"}))
	})
	t.Run("a retry that passed moves it on", func(t *testing.T) {
		g := NewWithT(t)
		w := staged()
		w.failedStep("smoke", tugboatv1alpha1.StepHelmTest, tugboatv1alpha1.StepFailed)
		w.promos = append(w.promos, tugboatv1alpha1.Promotion{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: AlternatePromotionName("web", "staging", "1.2.0"), CreationTimestamp: metav1.Time{Time: t0.Add(-10 * time.Minute)}},
			Spec:       tugboatv1alpha1.PromotionSpec{Pipeline: "web", To: "staging", Version: "1.2.0"},
			Status:     tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionSucceeded},
		})
		got, _, _ := w.reconcile(t0)
		g.Expect(got).To(Equal([]string{"production@1.2.0"}))
	})
	t.Run("a retry not started yet holds it", func(t *testing.T) {
		for _, phase := range []tugboatv1alpha1.PromotionPhase{"", tugboatv1alpha1.PromotionPending, tugboatv1alpha1.PromotionWaitingApproval} {
			g := NewWithT(t)
			w := staged()
			w.failedStep("smoke", tugboatv1alpha1.StepHelmTest, tugboatv1alpha1.StepFailed)
			w.promos = append(w.promos, tugboatv1alpha1.Promotion{
				ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: AlternatePromotionName("web", "staging", "1.2.0"), CreationTimestamp: metav1.Time{Time: t0.Add(-10 * time.Minute)}},
				Spec:       tugboatv1alpha1.PromotionSpec{Pipeline: "web", To: "staging", Version: "1.2.0"},
				Status:     tugboatv1alpha1.PromotionStatus{Phase: phase},
			})
			got, _, _ := w.reconcile(t0)
			g.Expect(got).To(BeEmpty(), "phase %q: the retry has not run its post steps yet", phase)
		}
	})
	t.Run("another failure stops nothing", func(t *testing.T) {
		g := NewWithT(t)
		w := staged() // failed at its timeout, no step failed
		got, _, _ := w.reconcile(t0)
		g.Expect(got).To(Equal([]string{"production@1.2.0"}))
	})
	t.Run("a pre step's failure changed nothing to stop", func(t *testing.T) {
		g := NewWithT(t)
		w := staged()
		pr := &w.promos[0]
		pr.Status.Steps = []tugboatv1alpha1.StepStatus{{Name: "migrate", Stage: tugboatv1alpha1.StepStagePre, Type: tugboatv1alpha1.StepExternal, Phase: tugboatv1alpha1.StepFailed}}
		got, _, _ := w.reconcile(t0)
		g.Expect(got).To(Equal([]string{"production@1.2.0"}))
	})
}
