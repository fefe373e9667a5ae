package dashboard_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/bins"
)

// The browser tests drive a real headless Chromium (Debian's package,
// which TestMain installs when missing) with chromedp.

// newChrome starts a headless Chromium with a fresh profile for t, and
// answers its chromedp context.
func newChrome(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser: no timeout on it (it would bound
	// the browser's life), the test's own deadline bounds it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium %s: %v", chromium, err)
	}
	return ctx
}

// do runs actions in the browser, bounded.
func do(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression in the page, bounded.
func eval[T any](ctx context.Context, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// screenshot saves the whole page as docs/images/<name>.png when
// TUGBOAT_SCREENSHOTS names a directory (relative to the repository root),
// else in a temporary directory; it logs where.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("TUGBOAT_SCREENSHOTS")
	switch {
	case dir == "":
		dir = filepath.Join(os.TempDir(), "tugboat-dashboard-screenshots")
	case !filepath.IsAbs(dir):
		wd, _ := os.Getwd()
		root, err := bins.FindRepoRoot(wd)
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// waitLive waits until the page's event stream is open and the page
// fetched itself once (as it does whenever the stream opens), so that
// refresh does not replace what the test is about to use.
func waitLive(t *testing.T, ctx context.Context) {
	t.Helper()
	do(t, ctx, chromedp.WaitReady(chromedp.CSS(`body[data-live="open"][data-refreshed]`)))
}

// click clicks the element selector finds, from the page's own script: a
// page that refreshes itself between the test finding a node and clicking
// it would otherwise leave the test holding a stale node.
func click(t *testing.T, ctx context.Context, selector string) {
	t.Helper()
	ok, err := eval[bool](ctx, `(() => { const el = document.querySelector(`+strconv.Quote(selector)+`); if (!el) return false; el.click(); return true; })()`)
	if err != nil || !ok {
		t.Fatalf("clicking %s: found %v, %v", selector, ok, err)
	}
}

func TestBrowser_pipelinesPageShowsAPhaseChangeLive(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	d := serve(t, f.NS, "alice", false)
	ctx := newChrome(t)

	phase := `document.querySelector('a[data-promotion="` + f.Waiting + `"] + [data-phase]').dataset.phase`
	do(t, ctx, chromedp.Navigate(d.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`a[data-promotion="`+f.Waiting+`"]`)))
	waitLive(t, ctx)
	g.Expect(eval[string](ctx, phase)).To(Equal("WaitingApproval"))
	// A page that reloads loses this.
	g.Expect(eval[bool](ctx, `window.notReloaded = true`)).To(BeTrue())
	screenshot(t, ctx, "dashboard-pipelines")

	// The hub's controller moves the Promotion on; the page follows
	// without a reload (in about 0.2 s here; TestEvents_streamsAChange
	// holds the stream to a second, the bound here leaves room for a
	// loaded machine).
	changed := time.Now()
	setPhase(t, f.NS, f.Waiting, tugboatv1alpha1.PromotionRunning, "running the notification strategy")
	g.Eventually(func() (string, error) { return eval[string](ctx, phase) }, 3*time.Second, 20*time.Millisecond).Should(Equal("Running"))
	t.Logf("the page showed Running %s after the change", time.Since(changed))
	g.Expect(eval[bool](ctx, `window.notReloaded === true`)).To(BeTrue())

	setPhase(t, f.NS, f.Waiting, tugboatv1alpha1.PromotionVerifying, "waiting for prod-1/apps/web to report 1.4.0")
	g.Eventually(func() (string, error) { return eval[string](ctx, phase) }, 3*time.Second, 20*time.Millisecond).Should(Equal("Verifying"))
	g.Expect(eval[bool](ctx, `window.notReloaded === true`)).To(BeTrue())
}

func TestBrowser_approveRecordsTheUsersIdentity(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	d := serve(t, f.NS, "alice", false)
	ctx := newChrome(t)

	do(t, ctx, chromedp.Navigate(d.URL+"/promotions/"+f.Waiting), chromedp.WaitVisible(chromedp.ID("approve")))
	waitLive(t, ctx)
	g.Expect(eval[string](ctx, `document.getElementById("user").textContent`)).To(Equal("alice"))
	do(t, ctx, chromedp.SendKeys(chromedp.ID("message"), "canary is fine"))
	screenshot(t, ctx, "dashboard-promotion")
	click(t, ctx, "#approve")

	g.Eventually(func() []tugboatv1alpha1.ApprovalVote { return approvals(t, f.NS, f.Waiting) }, 10*time.Second, 50*time.Millisecond).
		Should(ConsistOf(And(
			HaveField("User", "alice"),
			HaveField("Source", tugboatv1alpha1.ApprovalSourceKubernetes),
			HaveField("Decision", tugboatv1alpha1.DecisionApprove),
			HaveField("Message", "canary is fine"),
		)))
	// The page the browser lands on records the vote.
	g.Eventually(func() (string, error) { return eval[string](ctx, `document.querySelector("ol.timeline").innerText`) }, 10*time.Second, 50*time.Millisecond).
		Should(ContainSubstring("alice approved (via Kubernetes)"))
	g.Expect(eval[string](ctx, `window.location.pathname`)).To(Equal("/promotions/" + f.Waiting))
}

func TestBrowser_noWorkingButtonWithoutApprovalRights(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	d := serve(t, f.NS, "bob", false)
	ctx := newChrome(t)

	do(t, ctx, chromedp.Navigate(d.URL+"/promotions/"+f.Waiting), chromedp.WaitVisible(chromedp.ID("no-decision")))
	g.Expect(eval[int](ctx, `document.querySelectorAll("button, form[method=post]").length`)).To(BeZero())
	g.Expect(eval[string](ctx, `document.getElementById("no-decision").textContent`)).To(ContainSubstring("You (bob) may not decide on promotions into web/production"))
	screenshot(t, ctx, "dashboard-promotion-no-rights")

	// A request bob's page makes by hand (with the cookie's token, which
	// the page cannot read: it sends a wrong one) is refused, and records
	// nothing.
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	status, err := chromedp.Run(ectx, chromedp.Evaluate[int](`fetch("/promotions/`+f.Waiting+`/decision", {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "decision=approve&csrf=0"}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(403))
	g.Consistently(func() []tugboatv1alpha1.ApprovalVote { return approvals(t, f.NS, f.Waiting) }, 500*time.Millisecond).Should(BeEmpty())

	// When the Promotion goes away, the open page says so.
	waitLive(t, ctx)
	pr := &tugboatv1alpha1.Promotion{}
	g.Expect(hub.Client.Get(context.Background(), key(f.NS, f.Waiting), pr)).To(Succeed())
	g.Expect(hub.Client.Delete(context.Background(), pr)).To(Succeed())
	g.Eventually(func() (string, error) { return eval[string](ctx, `document.getElementById("main").innerText`) }, 5*time.Second, 50*time.Millisecond).
		Should(ContainSubstring("promotion " + f.NS + "/" + f.Waiting + " not found"))
}

func TestBrowser_fleetAndReleasePagesByKeyboard(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	d := serve(t, f.NS, "alice", false)
	ctx := newChrome(t)

	do(t, ctx, chromedp.Navigate(d.URL+"/fleet"), chromedp.WaitVisible(chromedp.ID("chart")))
	waitLive(t, ctx)
	// The first Tab reaches the skip link; search by keyboard.
	do(t, ctx, chromedp.KeyEvent("\t"))
	g.Expect(eval[string](ctx, `document.activeElement.className`)).To(Equal("skip"))
	do(t, ctx, chromedp.Focus(chromedp.ID("chart")), chromedp.KeyEvent("web"), chromedp.Focus(chromedp.ID("version")), chromedp.KeyEvent("1.4\r"))
	g.Eventually(func() (string, error) { return eval[string](ctx, `window.location.search`) }, 10*time.Second, 50*time.Millisecond).Should(Equal("?chart=web&version=1.4"))
	do(t, ctx, chromedp.WaitVisible(chromedp.ID("releases")))
	g.Expect(eval[int](ctx, `document.querySelectorAll("#releases tbody tr").length`)).To(Equal(1))
	do(t, ctx, chromedp.Navigate(d.URL+"/fleet"), chromedp.WaitVisible(chromedp.ID("chart")))
	screenshot(t, ctx, "dashboard-fleet")

	do(t, ctx, chromedp.Navigate(d.URL+"/releases/staging-1.apps.web"), chromedp.WaitVisible(chromedp.ID("values-h")))
	g.Expect(eval[string](ctx, `document.querySelector("main").innerText`)).To(And(ContainSubstring("same values"), ContainSubstring("different values")))
	screenshot(t, ctx, "dashboard-release")
}

// auditJS lists, on the current page, text whose color contrast with its
// background is below WCAG AA (4.5:1), form fields without a label and
// buttons without text.
const auditJS = `(() => {
	const rgb = s => (s.match(/[\d.]+/g) || []).map(Number);
	const lin = c => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
	const lum = ([r, g, b]) => 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
	const bg = el => {
		for (; el; el = el.parentElement) {
			const v = rgb(getComputedStyle(el).backgroundColor);
			if (v.length < 4 || v[3] > 0) return v;
		}
		return [255, 255, 255];
	};
	const out = [];
	document.querySelectorAll("body *").forEach(el => {
		if (![...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())) return;
		const st = getComputedStyle(el);
		if (st.display === "none" || st.visibility === "hidden") return;
		const a = lum(rgb(st.color)), b = lum(bg(el));
		const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
		if (ratio < 4.5) out.push("contrast " + ratio.toFixed(2) + ": " + el.tagName + " " + el.textContent.trim().slice(0, 40));
	});
	document.querySelectorAll("input:not([type=hidden]), textarea, select").forEach(el => {
		if (!el.labels || el.labels.length === 0) out.push("no label: " + el.outerHTML.slice(0, 80));
	});
	document.querySelectorAll("button, a").forEach(el => {
		if (!el.textContent.trim()) out.push("no text: " + el.outerHTML.slice(0, 80));
	});
	return out;
})()`

func TestBrowser_pagesAreReadableAndLabelled(t *testing.T) {
	f := seed(t)
	d := serve(t, f.NS, "alice", false)
	ctx := newChrome(t)
	for _, path := range []string{"/", "/promotions/" + f.Waiting, "/promotions/" + f.Done, "/releases/staging-1.apps.web", "/fleet?chart=web", "/nowhere"} {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			do(t, ctx, chromedp.Navigate(d.URL+path), chromedp.WaitReady(chromedp.ID("main")))
			g.Expect(eval[[]string](ctx, auditJS)).To(BeEmpty())
		})
	}
}
