package dashboard_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// writeSteps writes a Promotion's phase and steps as the hub's controller
// would.
func writeSteps(t *testing.T, ns, name string, phase tugboatv1alpha1.PromotionPhase, steps []tugboatv1alpha1.StepStatus) {
	t.Helper()
	ctx := context.Background()
	pr := &tugboatv1alpha1.Promotion{}
	if err := hubc.Get(ctx, key(ns, name), pr); err != nil {
		t.Fatal(err)
	}
	pr.Status.Phase, pr.Status.Steps = phase, steps
	if pr.Status.StartedAt == nil {
		pr.Status.StartedAt = ago(5 * time.Minute)
	}
	if err := hubc.Status().Update(ctx, pr); err != nil {
		t.Fatal(err)
	}
}

// measured is a metrics step's measurement taken d ago.
func measured(d time.Duration, value string, passed bool, msg string) tugboatv1alpha1.Measurement {
	return tugboatv1alpha1.Measurement{At: metav1.NewMicroTime(time.Now().Add(-d).Truncate(time.Second)), Value: value, Passed: passed, Message: msg}
}

// Issue 25: the Promotion page shows each lifecycle step (stage, name,
// type, phase, attempts, start, end, message), a metrics step's latest
// measurements, and follows a step's change live: here the helmTest step
// failing with its test Pod's log excerpt, its lines kept.
func TestBrowser_promotionPageShowsItsSteps(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	steps := []tugboatv1alpha1.StepStatus{
		{Name: "migrate", Stage: tugboatv1alpha1.StepStagePre, Type: tugboatv1alpha1.StepExternal, Phase: tugboatv1alpha1.StepSucceeded, Attempts: 2,
			StartedAt: ago(4 * time.Minute), CompletedAt: ago(3 * time.Minute), LifecycleEvent: "web-production-1.4.0-migrate-2",
			Message: "LifecycleEvent web-production-1.4.0-migrate-2 done by system:serviceaccount:fleet:migrator: schema v42"},
		{Name: "error-rate", Stage: tugboatv1alpha1.StepStagePost, Type: tugboatv1alpha1.StepMetrics, Phase: tugboatv1alpha1.StepRunning, Attempts: 1,
			StartedAt: ago(time.Minute), Message: "measurement 3 of 5 due at 12:03:00 UTC",
			Metrics: &tugboatv1alpha1.MetricsStepStatus{Taken: 3, Failed: 1, Measurements: []tugboatv1alpha1.Measurement{
				measured(60*time.Second, "0.004", true, ""),
				measured(40*time.Second, "0.031", false, "0.031 is not LessThan 0.01"),
				measured(20*time.Second, "0.006", true, ""),
			}}},
		{Name: "smoke", Stage: tugboatv1alpha1.StepStagePost, Type: tugboatv1alpha1.StepHelmTest, Phase: tugboatv1alpha1.StepPending, Message: "not started"},
	}
	writeSteps(t, f.NS, f.Waiting, tugboatv1alpha1.PromotionVerifying, steps)
	d := serve(t, f.NS, "bob", false)
	ctx := newChrome(t)

	do(t, ctx, chromedp.Navigate(d.URL+"/promotions/"+f.Waiting), chromedp.WaitVisible(chromedp.ID("steps")))
	waitLive(t, ctx)
	g.Expect(eval[bool](ctx, `window.notReloaded = true`)).To(BeTrue())
	rows := `[...document.querySelectorAll("#steps > table > tbody > tr")].map(tr => [...tr.children].slice(0, 5).map(c => c.innerText.trim()).join(" | "))`
	g.Expect(eval[[]string](ctx, rows)).To(Equal([]string{
		"migrate | Pre | external | Succeeded | 2",
		"error-rate | Post | metrics | Running | 1",
		"smoke | Post | helmTest | Pending | 0",
	}))
	migrate, err := eval[string](ctx, `document.getElementById("step-migrate").innerText`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(migrate).To(And(
		ContainSubstring("done by system:serviceaccount:fleet:migrator: schema v42"),
		ContainSubstring("LifecycleEvent web-production-1.4.0-migrate-2"),
		MatchRegexp(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`), // started and finished
	))
	g.Expect(eval[[]string](ctx, `[...document.querySelectorAll("#step-error-rate table.measurements tbody tr")].map(tr => tr.innerText.replace(/^\S+ \S+ UTC\s+/, "").replace(/\s+/g, " ").trim())`)).To(Equal([]string{
		"0.006 passed", "0.031 failed 0.031 is not LessThan 0.01", "0.004 passed",
	}), "the latest first")
	g.Expect(eval[string](ctx, `document.querySelector("#step-error-rate caption").innerText`)).To(Equal("3 measurement(s) taken, 1 failed; the latest first"))
	screenshot(t, ctx, "dashboard-promotion-steps")

	// The helmTest step fails: the open page follows, without a reload,
	// and shows the log excerpt as text, its lines kept.
	steps[1].Phase, steps[1].CompletedAt, steps[1].Message = tugboatv1alpha1.StepSucceeded, ago(0), "3 measurement(s), 1 failed (failure limit 1)"
	steps[2].Phase, steps[2].Attempts, steps[2].StartedAt, steps[2].CompletedAt = tugboatv1alpha1.StepFailed, 1, ago(0), ago(0)
	steps[2].Message = "helm test failed on prod-1/apps/web: helm test of release apps/web (revision 7): test pod web-smoke failed: log (last lines):\n<b>connecting</b>\nwget: can't connect to remote host: Connection refused"
	writeSteps(t, f.NS, f.Waiting, tugboatv1alpha1.PromotionVerifying, steps)
	g.Eventually(func() (string, error) {
		return eval[string](ctx, `document.getElementById("step-smoke").dataset.stepPhase`)
	}, 5*time.Second, 20*time.Millisecond).Should(Equal("Failed"))
	g.Expect(eval[bool](ctx, `window.notReloaded === true`)).To(BeTrue())
	g.Expect(eval[string](ctx, `document.querySelector("#step-smoke .step-message").innerText`)).To(Equal(
		"helm test failed on prod-1/apps/web: helm test of release apps/web (revision 7): test pod web-smoke failed: log (last lines):\n<b>connecting</b>\nwget: can't connect to remote host: Connection refused"))
	g.Expect(eval[int](ctx, `document.querySelectorAll("#step-smoke b").length`)).To(BeZero(), "the log is text, never markup")
	g.Expect(eval[string](ctx, `document.querySelector("#step-smoke .badge").className`)).To(Equal("badge bad"))
	g.Expect(eval[[]string](ctx, auditJS)).To(BeEmpty())

	// A Promotion without steps has no steps section.
	code, body := newBrowser(t, d).get("/promotions/" + f.Done)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).NotTo(ContainSubstring(`id="steps"`))
}
