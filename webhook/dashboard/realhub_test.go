package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/e2e/identity"
)

// report writes a ReleaseHistory's status as the hub's recorder would
// after the spoke's agent reported version, healthy; it creates the
// ReleaseHistory first when needed.
func report(t *testing.T, ns, spoke, version string) {
	t.Helper()
	ctx := context.Background()
	h := &tugboatv1alpha1.ReleaseHistory{}
	key := client.ObjectKey{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName(spoke, "apps", "web")}
	if err := hub.Client.Get(ctx, key, h); err != nil {
		h = &tugboatv1alpha1.ReleaseHistory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name},
			Spec: tugboatv1alpha1.ReleaseHistorySpec{Spoke: spoke, Namespace: "apps", Release: "web"}}
		if err := hubc.Create(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	rev := int32(1)
	if h.Status.Current != nil {
		rev = h.Status.Current.Revision + 1
	}
	cur := tugboatv1alpha1.RevisionSummary{Revision: rev, Chart: "web", ChartVersion: version, ValuesDigest: digestA,
		Status: tugboatv1alpha1.ReleaseStatusDeployed, Health: tugboatv1alpha1.HealthCurrent, FirstDeployed: ago(time.Hour), LastDeployed: ago(0)}
	h.Status.Current = &cur
	h.Status.Revisions = append([]tugboatv1alpha1.Revision{{RevisionSummary: cur}}, h.Status.Revisions...)
	if err := hubc.Status().Update(ctx, h); err != nil {
		t.Fatal(err)
	}
}

// TestBrowser_watchesAndApprovesARealPromotion runs the hub's controllers
// (as its ServiceAccount, with a strategy that does nothing): staging runs
// 1.4.0, so the Pipeline controller promotes it into production, which
// requires approval. The pipelines page shows the promotion appear, alice
// approves it in the browser, and the promotion page follows it to
// Succeeded once production reports 1.4.0, all without a reload.
func TestBrowser_watchesAndApprovesARealPromotion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	people(t, ns)
	for _, spoke := range []string{"staging-1", "prod-1"} {
		sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: spoke},
			Spec: tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: "spoke-keys"}}}
		g.Expect(hub.Client.Create(ctx, sp)).To(Succeed())
	}
	g.Expect(hub.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spoke-keys"}, StringData: map[string]string{"key": secretValue}})).To(Succeed())
	report(t, ns, "staging-1", "1.3.0")
	report(t, ns, "prod-1", "1.3.0")
	target := func(spoke string) []tugboatv1alpha1.Target {
		return []tugboatv1alpha1.Target{{Spoke: spoke, Namespace: "apps"}}
	}
	g.Expect(hub.Client.Create(ctx, &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
			Environments: []tugboatv1alpha1.Environment{
				{Name: "staging", Targets: target("staging-1")},
				{Name: "production", Targets: target("prod-1"), Gates: tugboatv1alpha1.Gates{RequireApproval: true}},
			},
		},
	})).To(Succeed())

	noop := strategy.Func(func(context.Context, strategy.Request) (strategy.Result, error) {
		return strategy.Result{Message: "nothing to do: the test reports the version itself"}, nil
	})
	opts := hubtest.Options()
	opts.Strategies = strategy.Registry{tugboatv1alpha1.StrategyNotification: noop}
	hubtest.Start(t, identity.HubConfig(hub.RESTConfig), opts)

	d := serve(t, ns, "alice", false)
	browser := newChrome(t)
	do(t, browser, chromedp.Navigate(d.URL+"/"), chromedp.WaitVisible(chromedp.ID("pl-web")))
	waitLive(t, browser)
	g.Expect(eval[bool](browser, `window.notReloaded = true`)).To(BeTrue())

	// staging now runs 1.4.0: the hub promotes it, and the page shows it.
	report(t, ns, "staging-1", "1.4.0")
	promo := `a[data-promotion="web-production-1.4.0"]`
	phase := `(document.querySelector('` + promo + ` + [data-phase]') || {dataset: {}}).dataset.phase || ""`
	g.Eventually(func() (string, error) { return eval[string](browser, phase) }, 30*time.Second, 50*time.Millisecond).Should(Equal("WaitingApproval"))
	g.Expect(eval[bool](browser, `window.notReloaded === true`)).To(BeTrue())

	// alice follows the arrow and approves.
	click(t, browser, promo)
	do(t, browser, chromedp.WaitVisible(chromedp.ID("approve")))
	waitLive(t, browser)
	// The hub keeps writing: the page may refresh at any time, so the test
	// types through the page's script (what was typed survives a refresh).
	g.Expect(eval[string](browser, `document.getElementById("message").value = "staging looks good"`)).To(Equal("staging looks good"))
	g.Expect(eval[bool](browser, `window.beforeApproval = true`)).To(BeTrue())
	click(t, browser, "#approve")
	g.Eventually(func() []tugboatv1alpha1.ApprovalVote { return approvals(t, ns, "web-production-1.4.0") }, 10*time.Second, 50*time.Millisecond).
		Should(ConsistOf(And(HaveField("User", "alice"), HaveField("Source", tugboatv1alpha1.ApprovalSourceKubernetes), HaveField("Decision", tugboatv1alpha1.DecisionApprove))))

	// The hub starts it; once production reports 1.4.0 it succeeds, and
	// the promotion page shows each step as it happens.
	// The form's answer is the promotion's page again: a new document.
	g.Eventually(func() (bool, error) { return eval[bool](browser, `window.beforeApproval === undefined`) }, 10*time.Second, 50*time.Millisecond).Should(BeTrue())
	do(t, browser, chromedp.WaitVisible(chromedp.ID("phase")))
	waitLive(t, browser)
	g.Expect(eval[bool](browser, `window.notReloaded = true`)).To(BeTrue())
	pagePhase := `document.getElementById("phase").dataset.phase`
	g.Eventually(func() (string, error) { return eval[string](browser, pagePhase) }, 30*time.Second, 50*time.Millisecond).Should(Equal("Verifying"))
	report(t, ns, "prod-1", "1.4.0")
	g.Eventually(func() (string, error) { return eval[string](browser, pagePhase) }, 30*time.Second, 50*time.Millisecond).Should(Equal("Succeeded"))
	g.Expect(eval[bool](browser, `window.notReloaded === true`)).To(BeTrue())
	g.Expect(eval[string](browser, `document.querySelector("ol.timeline").innerText`)).To(And(
		ContainSubstring("alice approved (via Kubernetes)"),
		ContainSubstring("Approved by alice"),
		ContainSubstring("Started (notification strategy)"),
		ContainSubstring("prod-1/apps/web done"),
	))
	screenshot(t, browser, "dashboard-promotion-succeeded")
}
