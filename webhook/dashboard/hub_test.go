package dashboard_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/e2e/identity"
	"tugboat.dev/tugboat/webhook/dashboard"
)

// TestHub_servesTheDashboardReadOnly: with --dashboard-namespace the hub,
// as its ServiceAccount, serves the pages under /ui/ with no buttons, and
// refuses every decision.
func TestHub_servesTheDashboardReadOnly(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	opts := hubtest.Options()
	opts.DashboardNamespace = f.NS
	h, _ := hubtest.Start(t, identity.HubConfig(hub.RESTConfig), opts)
	g.Eventually(h.Receiver.Addr, 30*time.Second, 50*time.Millisecond).ShouldNot(BeNil())
	base := "http://" + h.Receiver.Addr().String() + dashboard.HubPath

	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("")
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(body).To(ContainSubstring(`href="/ui/promotions/web-production-1.4.0"`))
	g.Expect(body).To(ContainSubstring(`<link rel="stylesheet" href="/ui/static/style.css">`))
	g.Expect(body).To(ContainSubstring("read-only"))
	for _, p := range []string{"fleet", "releases/prod-1.apps.web", "static/live.js"} {
		code, body := get(p)
		g.Expect(code).To(Equal(http.StatusOK), p+": "+body)
	}
	code, body = get("promotions/" + f.Waiting)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring("This dashboard is read-only"))
	g.Expect(body).NotTo(ContainSubstring("<button"))

	// The preview's diffs, read through the hub's cache with its
	// ServiceAccount's RBAC.
	seedPreview(t, f.NS, f.Waiting, tugboatv1alpha1.PreviewReady, "")
	g.Eventually(func() string { _, body := get("promotions/" + f.Waiting); return body }, 10*time.Second, 100*time.Millisecond).
		Should(And(ContainSubstring(`id="pv-1"`), ContainSubstring("&#43;      tolerations:"), Not(ContainSubstring(`id="preview-unread"`))))

	// The page's event stream passes through the receiver.
	events := streamAt(t, base+"events?kinds=promotion")
	g.Eventually(events).Should(Receive(Equal(": connected")))
	setPhase(t, f.NS, f.Done, tugboatv1alpha1.PromotionFailed, "rewritten by the test")
	g.Eventually(events, 5*time.Second).Should(Receive(Equal("event: change")))

	req, _ := http.NewRequest(http.MethodPost, base+"promotions/"+f.Waiting+"/decision", strings.NewReader(url.Values{"decision": {"approve"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden))
	g.Expect(approvals(t, f.NS, f.Waiting)).To(BeEmpty())
}
