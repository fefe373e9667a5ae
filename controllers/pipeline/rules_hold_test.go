package pipeline

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// heldNames lists the held environments.
func (w *world) heldNames() []string {
	var names []string
	for _, h := range w.p.Status.HeldEnvironments {
		names = append(names, h.Name)
	}
	return names
}

// The hold rule (docs/pipelines.md): a rollback or an uninstall in an
// environment holds automatic promotion into and out of it until a resume
// dated at or after it; the hold stays when the environment moves on, a
// resumed rollback does not hold again, a newer one does.
func TestRules_rollbackHold(t *testing.T) {
	// staging ran 1.1.0, a person rolled it back to 1.0.0 at t0+1m; dev
	// runs 1.2.0, healthy.
	rolledBack := func() *world {
		w := oneEach()
		w.deploy("dev-1", 3, "1.2.0", healthy, t0)
		w.deploy("staging-1", 1, "1.0.0", healthy, t0.Add(-time.Hour))
		w.deploy("staging-1", 2, "1.1.0", healthy, t0.Add(-30*time.Minute))
		w.deploy("staging-1", 3, "1.0.0", healthy, t0.Add(time.Minute))
		w.deploy("prod-1", 1, "1.1.0", healthy, t0.Add(-time.Hour))
		return w
	}
	t.Run("set on the rolled-back environment: nothing into it, nothing out of it", func(t *testing.T) {
		g := NewWithT(t)
		w := rolledBack()
		got, _, _ := w.reconcile(t0.Add(2 * time.Minute))
		g.Expect(got).To(BeEmpty(), "not staging@1.2.0")
		g.Expect(w.heldNames()).To(Equal([]string{"staging"}))
		h := w.p.Status.HeldEnvironments[0]
		g.Expect(h.Reason).To(Equal(tugboatv1alpha1.HoldRollback))
		g.Expect(h.Since.Time).To(Equal(t0.Add(time.Minute)))
		g.Expect(h.Message).To(Equal("staging-1/apps/web: rolled back from 1.1.0 (revision 2) to 1.0.0 (revision 3)"))
		g.Expect(w.ready().Reason).To(Equal(tugboatv1alpha1.HeldAfterRollbackReason.String()))
		g.Expect(w.ready().Message).To(Equal("automatic promotion into and out of staging is held after a rollback (" + h.Message +
			"); resume with `tugboat resume web --env staging`"))
	})
	t.Run("stays when the environment moves on, until released", func(t *testing.T) {
		g := NewWithT(t)
		w := rolledBack()
		_, _, _ = w.reconcile(t0.Add(2 * time.Minute))
		w.deploy("staging-1", 4, "1.2.0", healthy, t0.Add(3*time.Minute)) // a person upgrades by hand
		got, _, _ := w.reconcile(t0.Add(4 * time.Minute))
		g.Expect(w.heldNames()).To(Equal([]string{"staging"}))
		g.Expect(got).To(BeEmpty(), "production@1.2.0 waits for the resume")
		w.resume("staging", t0.Add(5*time.Minute))
		got, _, _ = w.reconcile(t0.Add(5 * time.Minute))
		g.Expect(w.heldNames()).To(BeEmpty())
		g.Expect(got).To(Equal([]string{"production@1.2.0"}))
	})
	t.Run("released by a resume dated after it, not by one before it", func(t *testing.T) {
		g := NewWithT(t)
		w := rolledBack()
		w.resume("staging", t0) // resumed an earlier hold, before this rollback
		_, _, _ = w.reconcile(t0.Add(2 * time.Minute))
		g.Expect(w.heldNames()).To(Equal([]string{"staging"}))
		w.resume("staging", t0.Add(2*time.Minute))
		got, _, _ := w.reconcile(t0.Add(2 * time.Minute))
		g.Expect(w.heldNames()).To(BeEmpty())
		g.Expect(got).To(Equal([]string{"staging@1.2.0"}), "the resumed environment is promoted into again")
		g.Expect(w.ready().Reason).To(Equal(tugboatv1alpha1.SucceededReason.String()))
	})
	t.Run("not re-triggered by the same rollback; re-triggered by a newer one", func(t *testing.T) {
		g := NewWithT(t)
		w := rolledBack()
		_, _, _ = w.reconcile(t0.Add(2 * time.Minute))
		w.resume("staging", t0.Add(2*time.Minute))
		for i := 3; i < 6; i++ {
			_, _, _ = w.reconcile(t0.Add(time.Duration(i) * time.Minute))
			g.Expect(w.heldNames()).To(BeEmpty(), "reconcile %d", i)
		}
		w.deploy("staging-1", 4, "1.2.0", healthy, t0.Add(10*time.Minute))
		w.deploy("staging-1", 5, "1.1.0", healthy, t0.Add(11*time.Minute)) // rolled back again
		_, _, _ = w.reconcile(t0.Add(12 * time.Minute))
		g.Expect(w.heldNames()).To(Equal([]string{"staging"}))
		g.Expect(w.p.Status.HeldEnvironments[0].Version).To(Equal("1.1.0"))
	})
	t.Run("a second rollback while held: the hold follows the newest one", func(t *testing.T) {
		g := NewWithT(t)
		w := rolledBack()
		_, _, _ = w.reconcile(t0.Add(2 * time.Minute))
		g.Expect(w.p.Status.HeldEnvironments[0].Version).To(Equal("1.0.0"))
		// Still held, a person upgrades by hand, then rolls back to
		// another version than the first rollback's.
		w.deploy("staging-1", 4, "1.2.0", healthy, t0.Add(3*time.Minute))
		w.deploy("staging-1", 5, "1.1.0", healthy, t0.Add(4*time.Minute))
		_, _, _ = w.reconcile(t0.Add(5 * time.Minute))
		g.Expect(w.heldNames()).To(Equal([]string{"staging"}))
		h := w.p.Status.HeldEnvironments[0]
		g.Expect(h.Version).To(Equal("1.1.0"), "the newest rollback's version")
		g.Expect(h.Since.Time).To(Equal(t0.Add(4*time.Minute)), "and its time")
		// A resume dated between the two rollbacks does not release it.
		w.resume("staging", t0.Add(3*time.Minute+30*time.Second))
		got, _, _ := w.reconcile(t0.Add(6 * time.Minute))
		g.Expect(w.heldNames()).To(Equal([]string{"staging"}))
		g.Expect(got).To(BeEmpty())
		w.resume("staging", t0.Add(6*time.Minute))
		_, _, _ = w.reconcile(t0.Add(6 * time.Minute))
		g.Expect(w.heldNames()).To(BeEmpty())
	})
	t.Run("a rollback in the first environment holds promotion out of it", func(t *testing.T) {
		g := NewWithT(t)
		w := oneEach()
		w.deploy("dev-1", 1, "1.0.0", healthy, t0.Add(-time.Hour))
		w.deploy("dev-1", 2, "1.1.0", healthy, t0.Add(-time.Minute))
		w.deploy("dev-1", 3, "1.0.0", healthy, t0) // rolled back
		w.deploy("staging-1", 1, "0.9.0", healthy, t0.Add(-time.Hour))
		w.deploy("prod-1", 1, "0.9.0", healthy, t0.Add(-time.Hour))
		got, _, _ := w.reconcile(t0)
		g.Expect(w.heldNames()).To(Equal([]string{"dev"}))
		g.Expect(got).To(BeEmpty(), "staging@1.0.0 is not promoted out of a rolled-back dev")
		w.deploy("dev-1", 4, "1.2.0", healthy, t0.Add(time.Minute)) // dev moves forward
		got, _, _ = w.reconcile(t0.Add(2 * time.Minute))
		g.Expect(w.heldNames()).To(Equal([]string{"dev"}), "the hold does not lift itself")
		g.Expect(got).To(BeEmpty())
		w.resume("dev", t0.Add(2*time.Minute))
		got, _, _ = w.reconcile(t0.Add(2 * time.Minute))
		g.Expect(got).To(Equal([]string{"staging@1.2.0"}))
	})
}

// The uninstall rule: an uninstalled target is absent, and its environment
// is held (as after a rollback) with a visible reason until resumed; then
// it is promoted into again (reinstalled).
func TestRules_uninstalledDestination(t *testing.T) {
	g := NewWithT(t)
	w := oneEach()
	w.deploy("dev-1", 1, "1.0.0", healthy, t0.Add(-time.Hour))
	w.deploy("staging-1", 1, "1.0.0", healthy, t0.Add(-time.Hour))
	w.deploy("prod-1", 1, "1.0.0", healthy, t0.Add(-time.Hour))
	w.uninstall("staging-1", t0)
	w.deploy("dev-1", 2, "1.1.0", healthy, t0.Add(time.Minute))

	got, _, v := w.reconcile(t0.Add(2 * time.Minute))
	g.Expect(got).To(BeEmpty())
	ts := w.p.Status.Environments[1].Targets[0]
	g.Expect(ts.Absent).To(BeTrue(), "an uninstalled target is absent")
	g.Expect(ts.Version).To(BeEmpty())
	g.Expect(v.envs[1].notReady).To(ConsistOf("staging-1/apps/web was uninstalled"))
	g.Expect(w.heldNames()).To(Equal([]string{"staging"}))
	h := w.p.Status.HeldEnvironments[0]
	g.Expect(h.Reason).To(Equal(tugboatv1alpha1.HoldUninstall))
	g.Expect(h.Since.Time).To(Equal(t0))
	g.Expect(w.ready().Reason).To(Equal(tugboatv1alpha1.HeldAfterUninstallReason.String()))
	g.Expect(w.ready().Message).To(Equal("automatic promotion into and out of staging is held after an uninstall " +
		"(staging-1/apps/web: uninstalled (was 1.0.0, revision 1)); resume with `tugboat resume web --env staging`"))

	w.resume("staging", t0.Add(3*time.Minute))
	got, _, _ = w.reconcile(t0.Add(3 * time.Minute))
	g.Expect(w.heldNames()).To(BeEmpty())
	g.Expect(got).To(Equal([]string{"staging@1.1.0"}), "promoted into again: the absent target is installed")
	got, _, _ = w.reconcile(t0.Add(4 * time.Minute))
	g.Expect(w.heldNames()).To(BeEmpty(), "the same uninstall does not hold again")
	g.Expect(got).To(Equal([]string{"staging@1.1.0"}))
}

func TestRules_suspend(t *testing.T) {
	setup := func() *world {
		w := oneEach()
		w.deploy("dev-1", 2, "1.1.0", healthy, t0)
		w.deploy("staging-1", 2, "1.1.0", healthy, t0)
		w.deploy("prod-1", 1, "1.0.0", healthy, t0)
		return w
	}
	t.Run("a suspended Pipeline creates nothing", func(t *testing.T) {
		g := NewWithT(t)
		w := setup()
		w.deploy("dev-1", 3, "1.2.0", healthy, t0)
		w.p.Spec.Suspend = true
		got, _, _ := w.reconcile(t0)
		g.Expect(got).To(BeEmpty())
		w.p.Spec.Suspend = false
		got, _, _ = w.reconcile(t0)
		g.Expect(got).To(Equal([]string{"staging@1.2.0", "production@1.1.0"}))
	})
	t.Run("a suspended destination Spoke is not promoted into", func(t *testing.T) {
		g := NewWithT(t)
		w := setup()
		w.f.spokes["prod-1"].Spec.Suspend = true
		// The hub refuses a suspended spoke's heartbeats: it turns not Ready.
		w.f.spokes["prod-1"].Status.Conditions[0].Status = "Unknown"
		got, _, _ := w.reconcile(t0)
		g.Expect(got).To(BeEmpty())
		g.Expect(w.ready().Reason).To(Equal(tugboatv1alpha1.SuspendedReason.String()))
		g.Expect(w.ready().Message).To(Equal("automatic promotion into and out of production is paused: spoke prod-1 is suspended (spec.suspend)"))
	})
	t.Run("a suspended source Spoke is not promoted from", func(t *testing.T) {
		g := NewWithT(t)
		w := setup()
		w.f.spokes["staging-1"].Spec.Suspend = true
		got, _, _ := w.reconcile(t0)
		g.Expect(got).To(BeEmpty(), "neither staging (into) nor production (from staging)")
		g.Expect(w.ready().Message).To(ContainSubstring("spoke staging-1 is suspended"))
		w.f.spokes["staging-1"].Spec.Suspend = false
		got, _, _ = w.reconcile(t0)
		g.Expect(got).To(Equal([]string{"production@1.1.0"}))
	})
}

// The approval gate lives in the Promotion controller (WaitingApproval);
// the Pipeline's part is to create the Promotion at once, never a second
// one for the same version, to supersede one still waiting by a newer
// version, and to wait for one approved (running).
//
// Counting N approvals is the Promotion controller's: controllers/promotion/
// request's TestCount_countsDistinctApproversAndNotTheRequester.
func TestRules_approvalGate(t *testing.T) {
	tests := []struct {
		name  string
		phase tugboatv1alpha1.PromotionPhase // of the Promotion of 1.1.0 into staging
		dev   string                         // what dev runs now
		want  []string
	}{
		{name: "no Promotion yet: created, approval or not", dev: "1.1.0", want: []string{"staging@1.1.0"}},
		{name: "0 approvals: waiting, not created again", phase: tugboatv1alpha1.PromotionWaitingApproval, dev: "1.1.0"},
		{name: "0 approvals and a newer version: the newer one is decided (the waiting one is superseded)",
			phase: tugboatv1alpha1.PromotionWaitingApproval, dev: "1.2.0", want: []string{"staging@1.2.0"}},
		{name: "1 approval: running, the newer version waits for it", phase: tugboatv1alpha1.PromotionRunning, dev: "1.2.0"},
		{name: "1 approval: verifying, the newer version waits for it", phase: tugboatv1alpha1.PromotionVerifying, dev: "1.2.0"},
		{name: "rejected: never promoted again automatically", phase: tugboatv1alpha1.PromotionAborted, dev: "1.1.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := oneEach()
			w.env("staging").Gates.RequireApproval = true
			w.deploy("dev-1", 2, tt.dev, healthy, t0)
			w.deploy("staging-1", 1, "1.0.0", healthy, t0)
			w.deploy("prod-1", 1, "1.0.0", healthy, t0)
			if tt.phase != "" {
				w.promotion("staging", "1.1.0", tt.phase)
			}
			got, _, _ := w.reconcile(t0)
			g.Expect(got).To(Equal(tt.want))
			if tt.phase == tugboatv1alpha1.PromotionWaitingApproval {
				g.Expect(w.p.Status.Environments[1].ActivePromotion).To(Equal("web-staging-1.1.0"))
			}
		})
	}
}

func TestRules_idempotentPromotionName(t *testing.T) {
	g := NewWithT(t)
	w := oneEach()
	w.deploy("dev-1", 2, "1.1.0+build.7", healthy, t0)
	w.deploy("staging-1", 1, "1.0.0", healthy, t0)
	w.deploy("prod-1", 1, "1.0.0", healthy, t0)
	got, _, _ := w.reconcile(t0)
	g.Expect(got).To(Equal([]string{"staging@1.1.0+build.7"}))
	got2, _, _ := w.reconcile(t0.Add(time.Second))
	g.Expect(got2).To(Equal(got), "re-deciding before the Promotion exists decides the same one")
	name := PromotionName("web", "staging", "1.1.0+build.7")
	g.Expect(name).To(Equal(PromotionName("web", "staging", "1.1.0+build.7")))

	for _, phase := range []tugboatv1alpha1.PromotionPhase{"", tugboatv1alpha1.PromotionPending, tugboatv1alpha1.PromotionSucceeded,
		tugboatv1alpha1.PromotionFailed, tugboatv1alpha1.PromotionAborted} {
		w.promos = nil
		w.promotion("staging", "1.1.0+build.7", phase)
		g.Expect(w.promos[0].Name).To(Equal(name))
		got, _, _ := w.reconcile(t0.Add(time.Minute))
		g.Expect(got).To(BeEmpty(), "phase %q: one Promotion per (pipeline, environment, version)", phase)
	}
	// Under its alternate name (a collision), or a retry's own name: still one.
	w.promos[0].Name = AlternatePromotionName("web", "staging", "1.1.0+build.7")
	got, _, _ = w.reconcile(t0.Add(time.Minute))
	g.Expect(got).To(BeEmpty())
	w.promos[0].Name = "web-staging-retry-1"
	got, _, _ = w.reconcile(t0.Add(time.Minute))
	g.Expect(got).To(BeEmpty())
}
