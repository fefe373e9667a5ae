package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/identity"
)

// rollingOut adds, to f's namespace, Promotion web-production-1.4.0-waves (1.4.0)
// rolling out in waves (Running, its canary in progress), as the hub
// writes it, and returns its name.
func rollingOut(t *testing.T, f fixture) string {
	t.Helper()
	const name = "web-production-1.4.0-waves"
	newPromotion(t, f.NS, name, "staging", "production", tugboatv1alpha1.RequestedByAuto, "")
	setPhase(t, f.NS, name, tugboatv1alpha1.PromotionRunning, "rolling 1.4.0 out into production: wave canary (1 of 2)")
	writeRollout(t, f.NS, name, func(pr *tugboatv1alpha1.Promotion) {
		pr.Status.Strategy = &tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification}
		pr.Status.Rollout = &tugboatv1alpha1.RolloutStatus{
			Phase:    tugboatv1alpha1.RolloutProgressing,
			Resolved: &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Spokes: []string{"prod-1"}}},
			Waves:    []tugboatv1alpha1.WaveStatus{{Name: "canary", Targets: 1, InProgress: 1, StartedAt: ago(0)}, {Name: "final", Targets: 3, Pending: 3}},
		}
	})
	return name
}

// writeRollout changes a Promotion's status as the hub's ServiceAccount.
func writeRollout(t *testing.T, ns, name string, change func(*tugboatv1alpha1.Promotion)) {
	t.Helper()
	ctx := context.Background()
	pr := &tugboatv1alpha1.Promotion{}
	if err := hubc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pr); err != nil {
		t.Fatal(err)
	}
	orig := pr.DeepCopy()
	change(pr)
	if err := hubc.Status().Patch(ctx, pr, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func promotionStatus(t *testing.T, ns, name string) tugboatv1alpha1.PromotionStatus {
	t.Helper()
	pr := &tugboatv1alpha1.Promotion{}
	if err := hub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pr); err != nil {
		t.Fatal(err)
	}
	return pr.Status
}

// TestBrowser_pausesResumesAndAbortsARolloutAsTheUser: alice (verbs pause,
// resume and abort on web/*) pauses the rollout from its page in real
// Chromium; the request names her (the API server's name); once the hub
// honored it, the page shows who paused and offers Resume, which she
// clicks, then Abort. Each is the request `tugboat rollout` writes.
func TestBrowser_pausesResumesAndAbortsARolloutAsTheUser(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := seed(t)
	for _, verb := range []string{"pause", "resume", "abort"} {
		g.Expect(identity.GrantVerb(ctx, hub.Client, f.NS, "alice", verb, "web/*")).To(Succeed())
	}
	name := rollingOut(t, f)
	d := serve(t, f.NS, "alice", false)
	bctx := newChrome(t)

	do(t, bctx, chromedp.Navigate(d.URL+"/promotions/"+name), chromedp.WaitVisible(chromedp.ID("pause")))
	waitLive(t, bctx)
	g.Expect(eval[string](bctx, `document.getElementById("steer-user").textContent`)).To(Equal("alice"))
	g.Expect(eval[bool](bctx, `document.getElementById("resume") === null`)).To(BeTrue(), "a running rollout offers no Resume")
	g.Expect(eval[[]string](bctx, auditJS)).To(BeEmpty(), "readable and labeled")
	do(t, bctx, chromedp.SendKeys(chromedp.ID("steer-message"), "checking the dashboards"))
	screenshot(t, bctx, "dashboard-rollout-steer")
	click(t, bctx, "#pause")
	g.Eventually(func() *tugboatv1alpha1.RolloutRequest { return promotionStatus(t, f.NS, name).RolloutRequest }, 10*time.Second, 50*time.Millisecond).
		Should(And(Not(BeNil()), HaveValue(And(
			HaveField("Action", tugboatv1alpha1.RolloutActionPause), HaveField("Sequence", int64(1)),
			HaveField("User", "alice"), HaveField("Message", "checking the dashboards")))))

	// The hub honors it; the page follows live and offers Resume.
	do(t, bctx, chromedp.WaitVisible(chromedp.ID("resume")))
	waitLive(t, bctx)
	writeRollout(t, f.NS, name, func(pr *tugboatv1alpha1.Promotion) {
		pr.Status.Phase = tugboatv1alpha1.PromotionPaused
		pr.Status.Rollout.Phase, pr.Status.Rollout.PausedBy, pr.Status.Rollout.ObservedRequest = tugboatv1alpha1.RolloutPaused, "alice", 1
	})
	g.Eventually(func() (string, error) {
		return eval[string](bctx, `document.getElementById("rollout-progress").textContent`)
	}, 5*time.Second, 50*time.Millisecond).
		Should(HavePrefix("Paused by alice: wave 1/2 (canary)"))
	g.Expect(eval[bool](bctx, `document.getElementById("pause") === null`)).To(BeTrue(), "a paused rollout offers no Pause")
	click(t, bctx, "#resume")
	g.Eventually(func() *tugboatv1alpha1.RolloutRequest { return promotionStatus(t, f.NS, name).RolloutRequest }, 10*time.Second, 50*time.Millisecond).
		Should(HaveValue(And(HaveField("Action", tugboatv1alpha1.RolloutActionResume), HaveField("Sequence", int64(2)), HaveField("User", "alice"))))

	do(t, bctx, chromedp.WaitVisible(chromedp.ID("abort")))
	waitLive(t, bctx)
	click(t, bctx, "#abort")
	g.Eventually(func() *tugboatv1alpha1.AbortRequest { return promotionStatus(t, f.NS, name).AbortRequest }, 10*time.Second, 50*time.Millisecond).
		Should(HaveValue(HaveField("User", "alice")))
}

// TestPromotionPage_offersOnlyTheRolloutButtonsTheUsersVerbsAllow: bob
// may write promotions/status and has the verb abort only: the page offers
// Abort, no Pause, and says which verb he lacks; a pause he posts anyway is
// refused by the API server (403) and records nothing; bad input is a 400,
// a resume of a running rollout a 409.
func TestPromotionPage_offersOnlyTheRolloutButtonsTheUsersVerbsAllow(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	g.Expect(identity.GrantVerb(context.Background(), hub.Client, f.NS, "bob", "abort", "web/production")).To(Succeed())
	name := rollingOut(t, f)
	b := newBrowser(t, serve(t, f.NS, "bob", false))

	code, body := b.get("/promotions/" + name)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`id="abort"`))
	g.Expect(body).NotTo(ContainSubstring(`id="pause"`))
	g.Expect(body).To(ContainSubstring("You (bob) may not pause rollouts into web/production: RBAC must allow the verb pause on environments.tugboat.dev named web/production or web/*"))

	for _, tc := range []struct {
		form url.Values
		code int
		want string
	}{
		{url.Values{"action": {"pause"}}, http.StatusForbidden, "user bob may not pause rollouts into web/production"},
		{url.Values{"action": {"stop"}}, http.StatusBadRequest, `action: must be pause, resume or abort, got &#34;stop&#34;`},
		{url.Values{"action": {"resume"}}, http.StatusConflict, "is not paused (Running): there is nothing to resume"},
	} {
		a, body := b.post("/promotions/"+name+"/rollout", tc.form, nil)
		g.Expect(a.StatusCode).To(Equal(tc.code), body)
		g.Expect(body).To(ContainSubstring(tc.want))
	}
	a, _ := b.post("/promotions/"+f.Done+"/rollout", url.Values{"action": {"pause"}}, nil)
	g.Expect(a.StatusCode).To(Equal(http.StatusConflict), "a finished promotion has no rollout to pause")
	g.Expect(promotionStatus(t, f.NS, name).RolloutRequest).To(BeNil())

	// Without a rollout, no rollout buttons.
	_, body = b.get("/promotions/" + f.Waiting)
	g.Expect(body).NotTo(ContainSubstring(`id="steer"`))
	g.Expect(body).NotTo(ContainSubstring("rollouts into"))
}
