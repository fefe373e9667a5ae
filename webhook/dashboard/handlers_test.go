package dashboard_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// browser is an HTTP client with a cookie jar, as a person's browser.
type browser struct {
	t    *testing.T
	d    *dash
	c    *http.Client
	csrf string
}

func newBrowser(t *testing.T, d *dash) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, d: d, c: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// get fetches path and answers the status and body; it keeps the form's
// CSRF token.
func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.d.URL + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if m := csrfField.FindSubmatch(body); m != nil {
		b.csrf = string(m[1])
	}
	return resp.StatusCode, string(body)
}

// post submits form to path as the dashboard's own page does (same-origin
// fetch metadata), with the kept CSRF token unless form sets csrf; edit
// changes the request before it is sent.
func (b *browser) post(path string, form url.Values, edit func(*http.Request)) (answer, string) {
	b.t.Helper()
	form = cloneValues(form)
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", b.csrf)
	}
	req, err := http.NewRequest(http.MethodPost, b.d.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.d.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if edit != nil {
		edit(req)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{StatusCode: resp.StatusCode, Header: resp.Header}, string(body)
}

// answer is what a response said, its body aside.
type answer struct {
	StatusCode int
	Header     http.Header
}

func TestPipelinesPage_showsEnvironmentsTargetsAndActivePromotion(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	b := newBrowser(t, serve(t, f.NS, "alice", false))

	code, body := b.get("/")
	g.Expect(code).To(Equal(http.StatusOK))
	for _, want := range []string{
		`<h3>dev</h3>`, `<h3>staging</h3>`, `<h3>production</h3>`,
		// targets: spoke (linked to its release), version, health, age
		`href="/releases/prod-1.apps.web"`, `1.3.0 <span class="small">rev 7</span>`, `>Current</span>`, `>2d</time>`,
		// the active promotion into production, its phase and gates
		`href="/promotions/web-production-1.4.0"`, `data-phase="WaitingApproval"`, `0 of 1 approval</span>`,
		// dev soaks 1.5.0 for an hour, 10 minutes in
		`soaking: <time data-until=`, `gates: soak 1h</span>`, `gates: soak 10m, approval`,
	} {
		g.Expect(body).To(ContainSubstring(want))
	}
	g.Expect(body).To(MatchRegexp(`>(49|50)m</time> left`))
}

func TestPipelinesPage_forbiddenWithoutRBAC(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	b := newBrowser(t, serve(t, f.NS, "mallory", false))
	code, body := b.get("/")
	g.Expect(code).To(Equal(http.StatusForbidden))
	g.Expect(body).To(ContainSubstring("you may not read pipelines in namespace " + f.NS))

	// Pages that show several kinds show what they may, and say what not.
	code, body = b.get("/fleet")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring("you may not read spokes in namespace " + f.NS))
	g.Expect(body).To(ContainSubstring("you may not read release histories in namespace " + f.NS))
	code, _ = b.get("/promotions/" + f.Waiting)
	g.Expect(code).To(Equal(http.StatusForbidden))
}

func TestPromotionPage_timeline(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	ctx := context.Background()
	// A vote and a strategy URL a person could not have written (the
	// hub's ServiceAccount could): neither renders as script.
	pr := &tugboatv1alpha1.Promotion{}
	g.Expect(hubc.Get(ctx, key(f.NS, f.Done), pr)).To(Succeed())
	// A Kubernetes voter's displayName is their own text: not shown.
	pr.Status.Approvals = []tugboatv1alpha1.ApprovalVote{
		{Decision: tugboatv1alpha1.DecisionApprove, User: "U024BE7LH", DisplayName: "erin", Source: tugboatv1alpha1.ApprovalSourceSlack, Time: *ago(3*time.Hour + 5*time.Minute), Message: "<script>alert(1)</script>"},
		{Decision: tugboatv1alpha1.DecisionApprove, User: "frank", DisplayName: "Release Manager", Source: tugboatv1alpha1.ApprovalSourceKubernetes, Time: *ago(3*time.Hour + 4*time.Minute)},
	}
	g.Expect(hubc.Status().Update(ctx, pr)).To(Succeed())
	b := newBrowser(t, serve(t, f.NS, "bob", false))

	code, body := b.get("/promotions/" + f.Done)
	g.Expect(code).To(Equal(http.StatusOK))
	for _, want := range []string{
		"<strong>Created</strong>", "1.4.0 from dev into staging, requested by auto",
		"erin (U024BE7LH) approved (via Slack)", "&lt;script&gt;alert(1)&lt;/script&gt;", "frank approved (via Kubernetes)",
		"Started (notification strategy)",
		"Strategy result: tugboat/web/staging/1.4.0", `href="https://git.example.com/fleet/web/pulls/42"`, "opened pull request #42",
		"staging-1/apps/web done", "reports 1.4.0 (revision 7, Current)",
		"Notice PromotionRunning via slack: Delivered", "Notice PromotionSucceeded via email: Delivered",
		`data-phase="Succeeded"`, "staging runs 1.4.0, healthy",
	} {
		g.Expect(body).To(ContainSubstring(want))
	}
	g.Expect(body).NotTo(ContainSubstring("<script>alert"))
	g.Expect(body).NotTo(ContainSubstring("Release Manager"))
	// In time order (the fixture's Promotion was created just now, its
	// status tells of hours ago): vote, started, target done.
	g.Expect(strings.Index(body, "approved (via Slack)")).To(BeNumerically("<", strings.Index(body, "Started (")))
	g.Expect(strings.Index(body, "Started (")).To(BeNumerically("<", strings.Index(body, "staging-1/apps/web done")))
	// A finished promotion takes no decision: no form.
	g.Expect(body).NotTo(ContainSubstring(`action="/promotions/`))

	// A URL that is not http(s) is not rendered as a link.
	g.Expect(hubc.Get(ctx, key(f.NS, f.Done), pr)).To(Succeed())
	pr.Status.StrategyResult.URL = "javascript:alert(document.cookie)"
	g.Expect(hubc.Status().Update(ctx, pr)).To(Succeed())
	_, body = b.get("/promotions/" + f.Done)
	g.Expect(body).NotTo(ContainSubstring(`href="javascript:`))

	code, body = b.get("/promotions/web-production-9.9.9")
	g.Expect(code).To(Equal(http.StatusNotFound))
	g.Expect(body).To(ContainSubstring("not found"))
	code, body = b.get("/promotions/Not_A_Name")
	g.Expect(code).To(Equal(http.StatusBadRequest))
	g.Expect(body).To(ContainSubstring("promotion: not a valid name"))
}

func TestPromotionPage_buttonsFollowRBAC(t *testing.T) {
	f := seed(t)
	requested := "web-production-1.4.0-r2"
	newPromotion(t, f.NS, requested, "staging", "production", tugboatv1alpha1.RequestedByUser, "dave")
	for _, tc := range []struct {
		name, user, promotion string
		readOnly              bool
		approve, reject       bool
		reason                string
	}{
		{name: "approver", user: "alice", promotion: f.Waiting, approve: true, reject: true},
		{name: "approver of web/*", user: "dave", promotion: f.Waiting, approve: true, reject: true},
		{name: "no verb approve", user: "bob", promotion: f.Waiting, reason: "You (bob) may not decide on promotions into web/production: RBAC must allow the verb approve"},
		{name: "requester", user: "dave", promotion: requested, reject: true, reason: "You (dave) requested this promotion: another person must approve it"},
		{name: "read-only", user: "alice", promotion: f.Waiting, readOnly: true, reason: "This dashboard is read-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := newBrowser(t, serve(t, f.NS, tc.user, tc.readOnly))
			code, body := b.get("/promotions/" + tc.promotion)
			g.Expect(code).To(Equal(http.StatusOK), body)
			g.Expect(strings.Contains(body, `id="approve"`)).To(Equal(tc.approve), "Approve button")
			g.Expect(strings.Contains(body, `id="reject"`)).To(Equal(tc.reject), "Reject button")
			g.Expect(strings.Contains(body, "<form method=\"post\"")).To(Equal(tc.approve || tc.reject), "form")
			if tc.reason != "" {
				g.Expect(body).To(ContainSubstring(tc.reason))
			}
			if tc.approve {
				g.Expect(body).To(ContainSubstring(`You decide as <strong id="user">` + tc.user + `</strong>`))
			}
		})
	}
}

func TestDecision_approveRecordsTheAuthenticatedUser(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	b := newBrowser(t, serve(t, f.NS, "alice", false))
	b.get("/promotions/" + f.Waiting)

	resp, body := b.post("/promotions/"+f.Waiting+"/decision", url.Values{"decision": {"approve"}, "message": {"canary is fine"}}, nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther), body)
	g.Expect(resp.Header.Get("Location")).To(Equal("/promotions/" + f.Waiting))
	votes := approvals(t, f.NS, f.Waiting)
	g.Expect(votes).To(HaveLen(1))
	g.Expect(votes[0].User).To(Equal("alice"))
	g.Expect(votes[0].Source).To(Equal(tugboatv1alpha1.ApprovalSourceKubernetes))
	g.Expect(votes[0].Decision).To(Equal(tugboatv1alpha1.DecisionApprove))
	g.Expect(votes[0].Message).To(Equal("canary is fine"))

	_, page := b.get("/promotions/" + f.Waiting)
	g.Expect(page).To(ContainSubstring("alice approved (via Kubernetes)"))
	g.Expect(page).To(ContainSubstring("1 of 1 approval (alice)"))
}

func TestDecision_rejectByTheRequester(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	requested := "web-production-1.4.0-r2"
	newPromotion(t, f.NS, requested, "staging", "production", tugboatv1alpha1.RequestedByUser, "dave")
	b := newBrowser(t, serve(t, f.NS, "dave", false))
	b.get("/promotions/" + requested)
	resp, body := b.post("/promotions/"+requested+"/decision", url.Values{"decision": {"reject"}, "message": {"wrong version"}}, nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther), body)
	votes := approvals(t, f.NS, requested)
	g.Expect(votes).To(HaveLen(1))
	g.Expect(votes[0]).To(And(HaveField("User", "dave"), HaveField("Decision", tugboatv1alpha1.DecisionReject)))
}

// TestDecision_badInput: every refused decision answers its code and a
// message, and changes nothing.
func TestDecision_badInput(t *testing.T) {
	f := seed(t)
	requested := "web-production-1.4.0-r2"
	newPromotion(t, f.NS, requested, "staging", "production", tugboatv1alpha1.RequestedByUser, "dave")
	alice := serve(t, f.NS, "alice", false)
	approve := url.Values{"decision": {"approve"}}
	for _, tc := range []struct {
		name      string
		user      string
		readOnly  bool
		promotion string
		form      url.Values
		edit      func(*http.Request)
		noPage    bool // no page visited first: no cookie
		code      int
		message   string
	}{
		{name: "cross-site fetch metadata", form: approve, edit: func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, code: 403, message: "cross-site request refused"},
		{name: "foreign origin", form: approve, edit: func(r *http.Request) { r.Header.Del("Sec-Fetch-Site"); r.Header.Set("Origin", "http://evil.example") }, code: 403, message: "cross-site request refused"},
		{name: "no cookie", form: approve, noPage: true, code: 403, message: "CSRF token is missing or stale"},
		{name: "wrong token", form: url.Values{"decision": {"approve"}, "csrf": {strings.Repeat("0", 64)}}, code: 403, message: "CSRF token is missing or stale"},
		{name: "no token", form: url.Values{"decision": {"approve"}, "csrf": {""}}, code: 403, message: "CSRF token is missing or stale"},
		{name: "unknown decision", form: url.Values{"decision": {"maybe"}}, code: 400, message: `decision: must be approve or reject, got &#34;maybe&#34;`},
		{name: "no decision", form: url.Values{}, code: 400, message: "decision: must be approve or reject"},
		{name: "message too long", form: url.Values{"decision": {"approve"}, "message": {strings.Repeat("x", 1025)}}, code: 400, message: "message: at most 1024 characters, got 1025"},
		{name: "form too large", form: url.Values{"decision": {"approve"}, "message": {strings.Repeat("x", 20000)}}, code: 400, message: "the form could not be read"},
		{name: "invalid name", promotion: "Not_A_Name", form: approve, code: 400, message: "promotion: not a valid name"},
		{name: "unknown promotion", promotion: "web-production-9.9.9", form: approve, code: 404, message: "promotion " + f.NS + "/web-production-9.9.9 not found"},
		{name: "finished promotion", promotion: f.Done, form: approve, code: 409, message: "promotion web-staging-1.4.0 is Succeeded, not waiting for approval"},
		{name: "no verb approve", user: "bob", form: approve, code: 403, message: "user bob may not approve promotions into web/production"},
		{name: "requester approves", user: "dave", promotion: requested, form: approve, code: 403, message: "dave requested this promotion: another person must approve it"},
		{name: "read-only", readOnly: true, form: approve, code: 403, message: "this dashboard is read-only"},
		{name: "DNS rebinding host", form: approve, edit: func(r *http.Request) { r.Host = "attacker.example:80" }, code: 421, message: "not served as host attacker.example:80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d := alice
			if tc.user != "" || tc.readOnly {
				user := tc.user
				if user == "" {
					user = "alice"
				}
				d = serve(t, f.NS, user, tc.readOnly)
			}
			name := tc.promotion
			if name == "" {
				name = f.Waiting
			}
			b := newBrowser(t, d)
			if !tc.noPage {
				code, _ := b.get("/promotions/" + f.Waiting)
				g.Expect(code).To(Equal(http.StatusOK))
				if b.csrf == "" {
					// No form for this user: send the cookie's token, as
					// a hand-made request would.
					u, _ := url.Parse(d.URL)
					for _, c := range b.c.Jar.Cookies(u) {
						if strings.HasPrefix(c.Name, "tugboat_csrf_") {
							b.csrf = c.Value
						}
					}
				}
			} else {
				// A valid token from the form, but no cookie.
				other := newBrowser(t, d)
				other.get("/promotions/" + f.Waiting)
				b.csrf = other.csrf
			}
			before := map[string]int{}
			for _, n := range []string{f.Waiting, f.Done, requested} {
				before[n] = len(approvals(t, f.NS, n))
			}
			resp, body := b.post("/promotions/"+name+"/decision", tc.form, tc.edit)
			g.Expect(resp.StatusCode).To(Equal(tc.code), body)
			g.Expect(body).To(ContainSubstring(tc.message))
			g.Expect(resp.Header.Get("Content-Security-Policy")).To(ContainSubstring("script-src 'self'"))
			for n, count := range before {
				g.Expect(approvals(t, f.NS, n)).To(HaveLen(count), "votes of %s", n)
			}
		})
	}

	t.Run("GET is not an action", func(t *testing.T) {
		g := NewWithT(t)
		resp, err := http.Get(alice.URL + "/promotions/" + f.Waiting + "/decision")
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusMethodNotAllowed))
		g.Expect(approvals(t, f.NS, f.Waiting)).To(BeEmpty())
	})
}

func TestReleasePage_revisionsEventsAndValuesAcrossEnvironments(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	b := newBrowser(t, serve(t, f.NS, "alice", false))
	code, body := b.get("/releases/staging-1.apps.web")
	g.Expect(code).To(Equal(http.StatusOK), body)
	for _, want := range []string{
		"<dd>web 1.4.0</dd>", "<dd>2.2.0</dd>", "<dd>7 (deployed)</dd>", `<code title="` + digestA + `">1111aaaa0000</code>`,
		"Revision 7: web 1.4.0 (app 2.2.0) · deployed", "Revision 6: web 1.2.0",
		"Created ×2", "Pod/web-7d9f-x", "rollout complete",
		// dev has the same values, production different ones
		`href="/releases/dev-1.apps.web"`, "same values", "different values", "this release",
	} {
		g.Expect(body).To(ContainSubstring(want))
	}
	code, body = b.get("/releases/nowhere.apps.web")
	g.Expect(code).To(Equal(http.StatusNotFound))
	g.Expect(body).To(ContainSubstring("nowhere.apps.web"))
	code, _ = b.get("/releases/..%2F..")
	g.Expect(code).To(Equal(http.StatusBadRequest))
}

func TestFleetPage_spokesAndSearch(t *testing.T) {
	f := seed(t)
	b := newBrowser(t, serve(t, f.NS, "alice", false))
	t.Run("spokes", func(t *testing.T) {
		g := NewWithT(t)
		code, body := b.get("/fleet")
		g.Expect(code).To(Equal(http.StatusOK))
		for _, want := range []string{"<th scope=\"row\">dev-1", "v0.4.1", "v1.36.3", "<td>5</td>", "s ago</time>", ">True</span>"} {
			g.Expect(body).To(ContainSubstring(want))
		}
		g.Expect(strings.Count(body, `href="/releases/`)).To(Equal(3))
	})
	for _, tc := range []struct {
		query string
		code  int
		want  []string
		not   []string
	}{
		{query: "chart=WEB&version=1.4", code: 200, want: []string{`href="/releases/staging-1.apps.web"`}, not: []string{"dev-1.apps.web", "prod-1.apps.web"}},
		{query: "version=1.", code: 200, want: []string{"dev-1.apps.web", "staging-1.apps.web", "prod-1.apps.web"}},
		{query: "chart=nginx", code: 200, want: []string{"0 release(s)"}, not: []string{`href="/releases/`}},
		{query: "chart=" + strings.Repeat("a", 65), code: 400, want: []string{"chart: at most 64 characters, got 65"}},
		{query: "version=" + strings.Repeat("1", 65), code: 400, want: []string{"version: at most 64 characters, got 65"}},
	} {
		t.Run(tc.query[:min(len(tc.query), 20)], func(t *testing.T) {
			g := NewWithT(t)
			code, body := b.get("/fleet?" + tc.query)
			g.Expect(code).To(Equal(tc.code))
			for _, w := range tc.want {
				g.Expect(body).To(ContainSubstring(w))
			}
			for _, n := range tc.not {
				g.Expect(body).NotTo(ContainSubstring(n))
			}
		})
	}
}

// TestPages_safe: every page carries the strict CSP and no inline script
// or style, and no page renders a Secret's value.
func TestPages_safe(t *testing.T) {
	f := seed(t)
	d := serve(t, f.NS, "alice", false)
	inline := regexp.MustCompile(`(?i)<script>|<script [^>]*>[^<]|\son[a-z]+=|\sstyle=|javascript:`)
	for _, path := range []string{"/", "/promotions/" + f.Waiting, "/promotions/" + f.Done, "/releases/prod-1.apps.web", "/fleet", "/fleet?chart=web", "/nowhere"} {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			resp, err := http.Get(d.URL + path)
			g.Expect(err).NotTo(HaveOccurred())
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			h := resp.Header
			g.Expect(h.Get("Content-Security-Policy")).To(Equal("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"))
			g.Expect(h.Get("X-Frame-Options")).To(Equal("DENY"))
			g.Expect(h.Get("X-Content-Type-Options")).To(Equal("nosniff"))
			g.Expect(string(body)).NotTo(MatchRegexp(inline.String()))
			g.Expect(string(body)).NotTo(ContainSubstring(secretValue))
			g.Expect(string(body)).To(ContainSubstring(`<html lang="en">`))
		})
	}
	t.Run("unknown page", func(t *testing.T) {
		g := NewWithT(t)
		resp, err := http.Get(d.URL + "/nowhere")
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
	})
	t.Run("static", func(t *testing.T) {
		g := NewWithT(t)
		for _, p := range []string{"/static/live.js", "/static/style.css"} {
			resp, err := http.Get(d.URL + p)
			g.Expect(err).NotTo(HaveOccurred())
			resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK), p)
		}
	})
}

// stream opens d's event stream for kinds and answers its lines.
func stream(t *testing.T, d *dash, kinds string) <-chan string {
	t.Helper()
	return streamAt(t, d.URL+"/events?kinds="+kinds)
}

// streamAt opens the event stream at url and answers its lines.
func streamAt(t *testing.T, url string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// TestEvents_streamsAChange: a change on the hub reaches an open event
// stream of its kind within a second, and no stream of other kinds.
func TestEvents_streamsAChange(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	d := serve(t, f.NS, "alice", false)
	promotions := stream(t, d, "promotion,pipeline")
	spokes := stream(t, d, "spoke")
	g.Eventually(promotions).Should(Receive(Equal(": connected")))
	g.Eventually(spokes).Should(Receive(Equal(": connected")))
	// The watches may publish while they start: wait for the streams to
	// go quiet, then change a Promotion's phase.
	g.Consistently(promotions, 500*time.Millisecond).ShouldNot(Receive(HavePrefix("event:")))
	changed := time.Now()
	setPhase(t, f.NS, f.Waiting, tugboatv1alpha1.PromotionRunning, "running")
	g.Eventually(promotions, time.Second, 10*time.Millisecond).Should(Receive(Equal("event: change")))
	g.Eventually(promotions).Should(Receive(Equal("data: promotion")))
	t.Logf("change streamed after %s", time.Since(changed))
	g.Consistently(spokes, 300*time.Millisecond).ShouldNot(Receive(HavePrefix("event:")))

	resp, err := http.Get(d.URL + "/events?kinds=secret")
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
	g.Expect(string(body)).To(ContainSubstring(`kinds: unknown kind &#34;secret&#34;`))
}

func key(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// A target that selects spokes by label shows the spokes the hub resolved
// (the Pipeline's status), each linked to its release.
func TestPipelinesPage_showsTheSpokesASelectorResolved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	people(t, ns)
	pl := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
			Environments: []tugboatv1alpha1.Environment{
				{Name: "staging", Targets: []tugboatv1alpha1.Target{{Spoke: "staging-1", Namespace: "apps"}}},
				{Name: "production", Targets: []tugboatv1alpha1.Target{{
					SpokeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}}, Namespace: "apps"}}},
			},
		},
	}
	g.Expect(hub.Client.Create(ctx, pl)).To(Succeed())
	pl.Status.Environments = []tugboatv1alpha1.EnvironmentStatus{
		{Name: "production", Versions: []string{"1.4.0"}, Targets: []tugboatv1alpha1.TargetStatus{
			{Spoke: "edge-1", Namespace: "apps", Release: "web", Version: "1.4.0", Revision: 3, Health: tugboatv1alpha1.HealthCurrent, Selector: "env=production"},
			{Spoke: "edge-2", Namespace: "apps", Release: "web", Version: "1.4.0", Revision: 2, Health: tugboatv1alpha1.HealthCurrent, Selector: "env=production"},
		}},
	}
	g.Expect(hub.Client.Status().Update(ctx, pl)).To(Succeed())

	code, body := newBrowser(t, serve(t, ns, "alice", false)).get("/")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`href="/releases/edge-1.apps.web"`))
	g.Expect(body).To(ContainSubstring(`href="/releases/edge-2.apps.web"`))
	g.Expect(body).To(ContainSubstring(`href="/releases/staging-1.apps.web"`), "a named target before the hub reported it")
	g.Expect(body).NotTo(ContainSubstring(`href="/releases/.apps.web"`))
}
