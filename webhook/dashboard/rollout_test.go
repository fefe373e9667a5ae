package dashboard_test

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Issue 24, item 4: a Promotion rolling out in waves shows its progress,
// its waves (the current one marked) and the targets that failed.
func TestPromotionPage_showsTheRolloutsProgress(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	ctx := context.Background()
	pr := &tugboatv1alpha1.Promotion{}
	g.Expect(hubc.Get(ctx, key(f.NS, f.Waiting), pr)).To(Succeed())
	pr.Status.Rollout = &tugboatv1alpha1.RolloutStatus{
		Phase: tugboatv1alpha1.RolloutPaused, CurrentWave: 0,
		Waves: []tugboatv1alpha1.WaveStatus{
			{Name: "canary", Targets: 1, Failed: 1, StartedAt: ago(0)},
			{Name: "final", Targets: 3, Pending: 3},
		},
		Failed: 1,
		FailedTargets: []tugboatv1alpha1.FailedTarget{{
			Spoke: "prod-canary", Namespace: "apps", Release: "web", Wave: "canary",
			Reason: tugboatv1alpha1.TargetReleaseFailed, Revision: 4, Message: "<b>revision 4 failed</b>", Since: ago(0),
		}},
		Message: "the failure budget is spent (a canary target failed, and the canary tolerates none)",
	}
	g.Expect(hubc.Status().Update(ctx, pr)).To(Succeed())
	b := newBrowser(t, serve(t, f.NS, "bob", false))

	code, body := b.get("/promotions/" + f.Waiting)
	g.Expect(code).To(Equal(http.StatusOK))
	for _, want := range []string{
		`<progress max="4" value="0"></progress> <span id="rollout-progress">Paused: wave 1/2 (canary), 0/4 succeeded, 1 failed of 0 allowed</span>`,
		"the failure budget is spent (a canary target failed, and the canary tolerates none)",
		`<tr class="current" aria-current="step">`,
		"prod-canary", "ReleaseFailed", "&lt;b&gt;revision 4 failed&lt;/b&gt;",
	} {
		g.Expect(body).To(ContainSubstring(want))
	}
	g.Expect(body).NotTo(ContainSubstring("<b>revision 4"))

	// Without a rollout, no rollout section.
	_, body = b.get("/promotions/" + f.Done)
	g.Expect(body).NotTo(ContainSubstring(`id="rollout"`))
}
