package pipeline

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// rolledBackPromotion records a Promotion of version into env, created at
// created, whose rollout spent its budget and started rolling back at
// started; phase is RollingBack, or Failed once the rollback ended.
func (w *world) rolledBackPromotion(env, version string, created, started time.Time, phase tugboatv1alpha1.PromotionPhase) {
	rollout := tugboatv1alpha1.RolloutRollingBack
	if phase == tugboatv1alpha1.PromotionFailed {
		rollout = tugboatv1alpha1.RolloutRolledBack
	}
	w.promos = append(w.promos, tugboatv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: PromotionName("web", env, version), CreationTimestamp: metav1.Time{Time: created}},
		Spec:       tugboatv1alpha1.PromotionSpec{Pipeline: "web", To: env, Version: version},
		Status: tugboatv1alpha1.PromotionStatus{Phase: phase, Rollout: &tugboatv1alpha1.RolloutStatus{
			Phase: rollout, Resolved: &tugboatv1alpha1.Rollout{OnFailure: tugboatv1alpha1.RolloutRollback}, RollbackStartedAt: &metav1.Time{Time: started},
		}},
	})
}

// The RolloutFailed hold: a rollout into production rolled back
// automatically holds production (reason RolloutFailed, not the Rollback
// of a person that its rollback revision looks like) from when the
// rollback started, until a resume dated at or after it; a newer
// Promotion into production that did not roll back holds nothing.
func TestRules_rolloutFailedHold(t *testing.T) {
	// production ran 1.1.0; the rollout of 1.2.0 failed on prod-1 and
	// started rolling back at t0, whose Helm rollback made revision 3.
	rolledBack := func(phase tugboatv1alpha1.PromotionPhase) *world {
		w := oneEach()
		w.deploy("dev-1", 3, "1.3.0", healthy, t0.Add(-time.Hour))
		w.deploy("staging-1", 3, "1.3.0", healthy, t0.Add(-time.Hour))
		w.deploy("prod-1", 1, "1.1.0", healthy, t0.Add(-2*time.Hour))
		w.deploy("prod-1", 2, "1.2.0", tugboatv1alpha1.HealthFailed, t0.Add(-time.Minute))
		w.deploy("prod-1", 3, "1.1.0", healthy, t0.Add(30*time.Second))
		w.rolledBackPromotion("production", "1.2.0", t0.Add(-2*time.Minute), t0, phase)
		return w
	}
	for _, phase := range []tugboatv1alpha1.PromotionPhase{tugboatv1alpha1.PromotionRollingBack, tugboatv1alpha1.PromotionFailed} {
		t.Run("held while "+string(phase), func(t *testing.T) {
			g := NewWithT(t)
			w := rolledBack(phase)
			got, _, _ := w.reconcile(t0.Add(time.Minute))
			g.Expect(w.heldNames()).To(Equal([]string{"production"}))
			h := w.p.Status.HeldEnvironments[0]
			g.Expect([]any{h.Reason, h.Since.Time, h.Version}).To(Equal([]any{tugboatv1alpha1.HoldRolloutFailed, t0, "1.2.0"}))
			g.Expect(h.Message).To(Equal("the rollout of 1.2.0 (promotion web-production-1.2.0) spent its failure budget and was rolled back"))
			g.Expect(w.ready().Reason).To(Equal(tugboatv1alpha1.HeldAfterRolloutFailedReason.String()))
			g.Expect(w.ready().Message).To(Equal("automatic promotion into and out of production is held after a failed rollout (" + h.Message +
				"); resume with `tugboat resume web --env production`"))
			g.Expect(got).NotTo(ContainElement("production@1.3.0"), "staging's 1.3.0 is not promoted into a held production")
		})
	}
	t.Run("naming the post step whose failure rolled it back", func(t *testing.T) {
		g := NewWithT(t)
		w := rolledBack(tugboatv1alpha1.PromotionFailed)
		w.promos[len(w.promos)-1].Status.Steps = []tugboatv1alpha1.StepStatus{
			{Name: "migrate", Stage: tugboatv1alpha1.StepStagePre, Type: tugboatv1alpha1.StepExternal, Phase: tugboatv1alpha1.StepSucceeded},
			{Name: "smoke", Stage: tugboatv1alpha1.StepStagePost, Type: tugboatv1alpha1.StepHelmTest, Phase: tugboatv1alpha1.StepFailed},
		}
		_, _, _ = w.reconcile(t0.Add(time.Minute))
		g.Expect(w.heldNames()).To(Equal([]string{"production"}))
		h := w.p.Status.HeldEnvironments[0]
		g.Expect(h.Reason).To(Equal(tugboatv1alpha1.HoldRolloutFailed))
		g.Expect(h.Message).To(Equal("the rollout of 1.2.0 (promotion web-production-1.2.0) failed its post step smoke (helmTest) and was rolled back"))
	})
	t.Run("lifted by a resume dated after the rollback started", func(t *testing.T) {
		g := NewWithT(t)
		w := rolledBack(tugboatv1alpha1.PromotionFailed)
		w.resume("production", t0.Add(-time.Second))
		_, _, _ = w.reconcile(t0.Add(time.Minute))
		g.Expect(w.heldNames()).To(Equal([]string{"production"}), "a resume before the rollback does not lift it")
		w.resume("production", t0.Add(2*time.Minute))
		got, _, _ := w.reconcile(t0.Add(2 * time.Minute))
		g.Expect(w.heldNames()).To(BeEmpty(), "nor does tugboat's own rollback revision hold it as a person's")
		g.Expect(got).To(Equal([]string{"production@1.3.0"}))
	})
	t.Run("not from an older Promotion", func(t *testing.T) {
		g := NewWithT(t)
		w := rolledBack(tugboatv1alpha1.PromotionFailed)
		w.promotion("production", "1.2.1", tugboatv1alpha1.PromotionSucceeded)
		w.promos[len(w.promos)-1].CreationTimestamp = metav1.Time{Time: t0.Add(2 * time.Minute)}
		w.deploy("prod-1", 4, "1.2.1", healthy, t0.Add(3*time.Minute))
		_, _, _ = w.reconcile(t0.Add(4 * time.Minute))
		g.Expect(w.heldNames()).To(BeEmpty())
	})
}
