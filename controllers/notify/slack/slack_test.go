package slack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	slackapi "github.com/slack-go/slack"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
	"tugboat.dev/tugboat/controllers/notify/notifytest"
	"tugboat.dev/tugboat/controllers/notify/slack"
)

const (
	token    = "xoxb-1111-2222-s3cr3tT0k3n"
	hookPath = "/services/T000/B000/s3cr3tH00kPath"
)

// call is one request the stand-in received.
type call struct {
	Method  string // "webhook", "chat.postMessage", "chat.update"
	Channel string
	TS      string // chat.update: the message; chat.postMessage: thread_ts
	Text    string
	Blocks  []map[string]any
	Time    time.Time
}

// fakeSlack stands in for hooks.slack.com and the Web API (chat.postMessage,
// chat.update). It checks what Slack requires of a request (authentication,
// channel, a fallback text, valid Block Kit) and records what it accepts;
// forced answers (a status code, a Retry-After, a Slack error) come first.
type fakeSlack struct {
	t *testing.T

	mu       sync.Mutex
	calls    []call
	problems []string
	forced   []answer
	nextTS   int
	messages map[string]bool // channel/ts of messages that exist
}

type answer struct {
	status     int
	retryAfter string
	slackError string // ok:false with this error
}

func newFakeSlack(t *testing.T) (*fakeSlack, *httptest.Server) {
	f := &fakeSlack{t: t, messages: map[string]bool{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeSlack) force(a ...answer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forced = append(f.forced, a...)
}

func (f *fakeSlack) snapshot() ([]call, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...), append([]string(nil), f.problems...)
}

func (f *fakeSlack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method != http.MethodPost {
		http.Error(w, "method", http.StatusMethodNotAllowed)
		return
	}
	if len(f.forced) > 0 {
		a := f.forced[0]
		f.forced = f.forced[1:]
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		if a.slackError != "" {
			writeJSON(w, map[string]any{"ok": false, "error": a.slackError})
			return
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, "forced")
		return
	}
	switch r.URL.Path {
	case hookPath:
		f.webhook(w, r)
	case "/api/chat.postMessage", "/api/chat.update":
		f.api(w, r, strings.TrimPrefix(r.URL.Path, "/api/"))
	default:
		// Slack answers an unknown incoming webhook 404 no_service.
		http.Error(w, "no_service", http.StatusNotFound)
	}
}

func (f *fakeSlack) webhook(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		f.problem(w, http.StatusBadRequest, "invalid_payload", "webhook content type %q", ct)
		return
	}
	var msg struct {
		Text            string           `json:"text"`
		Blocks          []map[string]any `json:"blocks"`
		ReplaceOriginal bool             `json:"replace_original"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		f.problem(w, http.StatusBadRequest, "invalid_payload", "webhook body: %v", err)
		return
	}
	if p := validateMessage(msg.Text, msg.Blocks); len(p) > 0 {
		f.problem(w, http.StatusBadRequest, "invalid_blocks", "%s", strings.Join(p, "; "))
		return
	}
	f.calls = append(f.calls, call{Method: "webhook", Text: msg.Text, Blocks: msg.Blocks, Time: time.Now()})
	_, _ = io.WriteString(w, "ok")
}

func (f *fakeSlack) api(w http.ResponseWriter, r *http.Request, method string) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_form_data"})
		return
	}
	// Slack takes the token from the Authorization header or the POST body.
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if got == "" {
		got = r.PostForm.Get("token")
	}
	if got == "" {
		writeJSON(w, map[string]any{"ok": false, "error": "not_authed"})
		return
	}
	if got != token {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	channel := r.PostForm.Get("channel")
	if channel == "" {
		writeJSON(w, map[string]any{"ok": false, "error": "channel_not_found"})
		return
	}
	var blocks []map[string]any
	if b := r.PostForm.Get("blocks"); b != "" {
		if err := json.Unmarshal([]byte(b), &blocks); err != nil {
			writeJSON(w, map[string]any{"ok": false, "error": "invalid_blocks_format"})
			return
		}
	}
	text := r.PostForm.Get("text")
	if p := validateMessage(text, blocks); len(p) > 0 {
		f.problems = append(f.problems, p...)
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_blocks", "errors": p})
		return
	}
	if strings.HasPrefix(channel, "#") {
		channel = "C0DEPLOYS" // Slack answers with the channel's id
	}
	c := call{Method: method, Channel: channel, Text: text, Blocks: blocks, Time: time.Now()}
	switch method {
	case "chat.update":
		c.TS = r.PostForm.Get("ts")
		if !f.messages[channel+"/"+c.TS] {
			writeJSON(w, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		f.calls = append(f.calls, c)
		writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": c.TS, "text": text})
	default:
		c.TS = r.PostForm.Get("thread_ts")
		if c.TS != "" && !f.messages[channel+"/"+c.TS] {
			writeJSON(w, map[string]any{"ok": false, "error": "thread_not_found"})
			return
		}
		f.nextTS++
		ts := fmt.Sprintf("1700000000.%06d", f.nextTS)
		f.messages[channel+"/"+ts] = true
		f.calls = append(f.calls, c)
		writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": ts})
	}
}

func (f *fakeSlack) problem(w http.ResponseWriter, status int, body, format string, args ...any) {
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
	http.Error(w, body, status)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// validateMessage checks a message against Slack's Block Kit rules.
func validateMessage(text string, blocks []map[string]any) []string {
	var p []string
	bad := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if text == "" && len(blocks) == 0 {
		bad("no text and no blocks")
	}
	if text == "" {
		bad("no fallback text")
	}
	if len(blocks) > 50 {
		bad("%d blocks, at most 50", len(blocks))
	}
	blockIDs, actionIDs := map[string]bool{}, map[string]bool{}
	textObj := func(where string, v any, max int, types ...string) {
		o, ok := v.(map[string]any)
		if !ok {
			bad("%s: not a text object", where)
			return
		}
		typ, _ := o["type"].(string)
		if !contains(types, typ) {
			bad("%s: text type %q, want %v", where, typ, types)
		}
		s, _ := o["text"].(string)
		if s == "" || utf8.RuneCountInString(s) > max {
			bad("%s: text of %d characters, want 1 to %d", where, utf8.RuneCountInString(s), max)
		}
	}
	for i, b := range blocks {
		where := fmt.Sprintf("block %d", i)
		if id, ok := b["block_id"].(string); ok && id != "" {
			if blockIDs[id] || len(id) > 255 {
				bad("%s: block_id %q duplicated or too long", where, id)
			}
			blockIDs[id] = true
		}
		switch b["type"] {
		case "header":
			textObj(where, b["text"], 150, "plain_text")
		case "section":
			fields, _ := b["fields"].([]any)
			if b["text"] == nil && len(fields) == 0 {
				bad("%s: section without text or fields", where)
			}
			if b["text"] != nil {
				textObj(where, b["text"], 3000, "mrkdwn", "plain_text")
			}
			if len(fields) > 10 {
				bad("%s: %d fields, at most 10", where, len(fields))
			}
			for j, f := range fields {
				textObj(fmt.Sprintf("%s field %d", where, j), f, 2000, "mrkdwn", "plain_text")
			}
		case "context":
			els, _ := b["elements"].([]any)
			if len(els) == 0 || len(els) > 10 {
				bad("%s: %d context elements, want 1 to 10", where, len(els))
			}
			for j, e := range els {
				textObj(fmt.Sprintf("%s element %d", where, j), e, 3000, "mrkdwn", "plain_text")
			}
		case "divider":
		case "actions":
			els, _ := b["elements"].([]any)
			if len(els) == 0 || len(els) > 25 {
				bad("%s: %d action elements, want 1 to 25", where, len(els))
			}
			for j, e := range els {
				el, _ := e.(map[string]any)
				ew := fmt.Sprintf("%s element %d", where, j)
				if el["type"] != "button" {
					bad("%s: type %v, want button", ew, el["type"])
					continue
				}
				id, _ := el["action_id"].(string)
				if id == "" || len(id) > 255 || actionIDs[id] {
					bad("%s: action_id %q empty, too long or not unique", ew, id)
				}
				actionIDs[id] = true
				if v, _ := el["value"].(string); len(v) > 2000 {
					bad("%s: value of %d characters, at most 2000", ew, len(v))
				}
				textObj(ew, el["text"], 75, "plain_text")
				if u, ok := el["url"].(string); ok {
					if pu, err := url.Parse(u); err != nil || len(u) > 3000 || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
						bad("%s: url of %d characters, want an absolute http(s) URL of at most 3000", ew, len(u))
					}
				}
				if s, ok := el["style"]; ok && s != "primary" && s != "danger" {
					bad("%s: style %v", ew, s)
				}
				if c, ok := el["confirm"].(map[string]any); ok {
					textObj(ew+" confirm title", c["title"], 100, "plain_text")
					textObj(ew+" confirm text", c["text"], 300, "plain_text", "mrkdwn")
					textObj(ew+" confirm button", c["confirm"], 30, "plain_text")
					textObj(ew+" deny button", c["deny"], 30, "plain_text")
				}
			}
		default:
			bad("%s: unknown block type %v", where, b["type"])
		}
	}
	return p
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func blocksOfType(blocks []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, b := range blocks {
		if b["type"] == typ {
			out = append(out, b)
		}
	}
	return out
}

// allText is every text in the blocks, joined.
func allText(blocks []map[string]any) string {
	b, _ := json.Marshal(blocks)
	var sb strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if s, ok := x["text"].(string); ok {
				sb.WriteString(s + "\n")
			}
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	var v any
	_ = json.Unmarshal(b, &v)
	walk(v)
	return sb.String()
}

func webhookNotifier(t *testing.T, srv *httptest.Server, signingSecret string) *slack.Notifier {
	t.Helper()
	n, err := slack.New(slack.Options{WebhookURL: srv.URL + hookPath, SigningSecret: signingSecret})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func botNotifier(t *testing.T, srv *httptest.Server, tok, signingSecret string) *slack.Notifier {
	t.Helper()
	n, err := slack.New(slack.Options{Token: tok, Channel: "#deploys", APIURL: srv.URL + "/api/", SigningSecret: signingSecret})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSlack_incomingWebhookMessage(t *testing.T) {
	g := NewWithT(t)
	fs, srv := newFakeSlack(t)
	s := webhookNotifier(t, srv, "signing-secret")

	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionFailed)
	d, err := s.Notify(context.Background(), n, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Reference).To(BeEmpty())
	calls, problems := fs.snapshot()
	g.Expect(problems).To(BeEmpty())
	g.Expect(calls).To(HaveLen(1))
	c := calls[0]
	g.Expect(c.Text).To(Equal("web 1.4.0 → production: Failed"))
	g.Expect(c.Blocks[0]["type"]).To(Equal("header"))
	text := allText(c.Blocks)
	for _, want := range []string{
		"*Pipeline*\napps/web", "*Version*\n1.4.0", "*From → To*\nstaging → production",
		"*Reason*\n>timed out after 30m: prod-us/apps/web is Failed",
		"prod-eu/apps/web: 1.4.0 revision 12, Current, done", ":red_circle: production prod-us/apps/web",
		"*Approvals* 2 of 2", "alice@example.com", "<@U024BE7LH>",
		"<https://git.example.com/org/fleet/pulls/42|https://git.example.com/org/fleet/pulls/42>",
	} {
		g.Expect(text).To(ContainSubstring(want))
	}
	g.Expect(blocksOfType(c.Blocks, "actions")).To(BeEmpty(), "no approval requested, no buttons")
}

func TestSlack_buttonsOnlyWithApprovalAndSigningSecret(t *testing.T) {
	ctx := context.Background()
	waiting := notifytest.Promotion(tugboatv1alpha1.EventPromotionWaitingApproval)
	running := notifytest.Promotion(tugboatv1alpha1.EventPromotionRunning)

	for _, tc := range []struct {
		name          string
		n             notify.Notice
		signingSecret string
		buttons       bool
	}{
		{"approval and signing secret", waiting, "signing-secret", true},
		{"approval without signing secret", waiting, "", false},
		{"signing secret without approval", running, "signing-secret", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fs, srv := newFakeSlack(t)
			_, err := webhookNotifier(t, srv, tc.signingSecret).Notify(ctx, tc.n, "")
			g.Expect(err).NotTo(HaveOccurred())
			calls, problems := fs.snapshot()
			g.Expect(problems).To(BeEmpty())
			actions := blocksOfType(calls[0].Blocks, "actions")
			if !tc.buttons {
				g.Expect(actions).To(BeEmpty())
				return
			}
			g.Expect(actions).To(HaveLen(1))
			g.Expect(actions[0]["block_id"]).To(Equal(slack.DecisionBlockID))
			els := actions[0]["elements"].([]any)
			g.Expect(els).To(HaveLen(2))
			approve, reject := els[0].(map[string]any), els[1].(map[string]any)
			g.Expect(approve["action_id"]).To(Equal(slack.ActionApprove))
			g.Expect(reject["action_id"]).To(Equal(slack.ActionReject))
			g.Expect(approve["value"]).To(Equal("apps/web/web-production-1.4.0/team-slack"), "the value names the Pipeline and the notifier whose secret signs a click")
			g.Expect(reject["value"]).To(Equal(approve["value"]))
			g.Expect(approve["style"]).To(Equal("primary"))
			g.Expect(reject["style"]).To(Equal("danger"))
			g.Expect(approve).NotTo(HaveKey("confirm"))
			g.Expect(reject).To(HaveKey("confirm"), "Reject asks for confirmation")

			a, err := slack.ParseActionValue(approve["value"].(string))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).To(Equal(slack.Action{Namespace: "apps", Pipeline: "web", Promotion: "web-production-1.4.0", Notifier: "team-slack"}))
		})
	}
}

func TestSlack_limits(t *testing.T) {
	g := NewWithT(t)
	fs, srv := newFakeSlack(t)
	s := webhookNotifier(t, srv, "signing-secret")

	n := notifytest.LongTimeline(notifytest.Promotion(tugboatv1alpha1.EventPromotionWaitingApproval), 400)
	n.Pipeline = strings.Repeat("p", 200)
	n.Promotion.Message = strings.Repeat("<@channel> & ", 400)
	for i := range 60 {
		n.Targets = append(n.Targets, notify.Target{Environment: "production", Spoke: fmt.Sprintf("edge-%03d", i), Namespace: "apps", Release: "web", Version: "1.4.0"})
	}
	_, err := s.Notify(context.Background(), n, "")
	g.Expect(err).NotTo(HaveOccurred())
	calls, problems := fs.snapshot()
	g.Expect(problems).To(BeEmpty())
	text := allText(calls[0].Blocks)
	g.Expect(text).To(MatchRegexp(`… \d+ more`), "the timeline is cut with a count of what was left out")
	g.Expect(text).To(ContainSubstring("Pod web-7d9f-0000 created"), "the cut keeps the start")
	g.Expect(text).NotTo(ContainSubstring("<@channel>"), "user text cannot mention")
	g.Expect(text).To(ContainSubstring("&lt;@channel&gt; &amp;"))
	g.Expect(blocksOfType(calls[0].Blocks, "actions")).To(HaveLen(1), "the buttons survive the cuts")
}

func TestSlack_rateLimitedThenDelivered(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fs, srv := newFakeSlack(t)
	s := webhookNotifier(t, srv, "")
	n := notifytest.Deployment(tugboatv1alpha1.EventDeploymentStarted)

	fs.force(answer{status: http.StatusTooManyRequests, retryAfter: "30"})
	_, err := s.Notify(ctx, n, "")
	after, ok := notify.RetryAfter(err)
	g.Expect(ok).To(BeTrue(), "got %v", err)
	g.Expect(after).To(Equal(30 * time.Second))

	// The channel is held back: no request until the wait is over.
	_, err = s.Notify(ctx, n, "")
	after, ok = notify.RetryAfter(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(after).To(BeNumerically(">", 25*time.Second))
	calls, _ := fs.snapshot()
	g.Expect(calls).To(BeEmpty())

	slack.ForgetLimits(s) // the 30 s have passed
	_, err = s.Notify(ctx, n, "")
	g.Expect(err).NotTo(HaveOccurred())
	calls, problems := fs.snapshot()
	g.Expect(problems).To(BeEmpty())
	g.Expect(calls).To(HaveLen(1))
}

// sendTimes records when each request leaves the client.
type sendTimes struct {
	mu    sync.Mutex
	times []time.Time
}

func (st *sendTimes) RoundTrip(r *http.Request) (*http.Response, error) {
	st.mu.Lock()
	st.times = append(st.times, time.Now())
	st.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func TestSlack_onePerSecondPerChannel(t *testing.T) {
	g := NewWithT(t)
	fs, srv := newFakeSlack(t)
	const interval = 150 * time.Millisecond
	st := &sendTimes{}
	s, err := slack.New(slack.Options{WebhookURL: srv.URL + hookPath, PerChannelInterval: interval, HTTPClient: &http.Client{Transport: st}})
	g.Expect(err).NotTo(HaveOccurred())

	start := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Notify(context.Background(), notifytest.Deployment(tugboatv1alpha1.EventDeploymentHealthy), "")
			g.Expect(err).NotTo(HaveOccurred())
		}()
	}
	wg.Wait()
	calls, _ := fs.snapshot()
	g.Expect(calls).To(HaveLen(3))
	// The k-th message may not leave before k intervals have passed (timers
	// never fire early, so this cannot flake).
	slices.SortFunc(st.times, func(a, b time.Time) int { return a.Compare(b) })
	for k, at := range st.times {
		g.Expect(at.Sub(start)).To(BeNumerically(">=", time.Duration(k)*interval), "message %d", k)
	}
}

func TestSlack_botThreadsAndUpdates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fs, srv := newFakeSlack(t)
	s := botNotifier(t, srv, token, "signing-secret")

	d, err := s.Notify(ctx, notifytest.Promotion(tugboatv1alpha1.EventPromotionCreated), "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Reference).To(Equal("C0DEPLOYS/1700000000.000001"))
	ref := d.Reference

	d, err = s.Notify(ctx, notifytest.Promotion(tugboatv1alpha1.EventPromotionWaitingApproval), ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Reference).To(Equal(ref), "later notices keep the first message's reference")

	d, err = s.Notify(ctx, notifytest.Promotion(tugboatv1alpha1.EventPromotionSucceeded), ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Reference).To(Equal(ref))

	calls, problems := fs.snapshot()
	g.Expect(problems).To(BeEmpty())
	var got []string
	for _, c := range calls {
		got = append(got, c.Method+" "+c.Channel+" "+c.TS+" "+c.Text)
	}
	g.Expect(got).To(Equal([]string{
		"chat.postMessage C0DEPLOYS  web 1.4.0 → production: Created",
		"chat.update C0DEPLOYS 1700000000.000001 web 1.4.0 → production: Waiting for approval",
		"chat.postMessage C0DEPLOYS 1700000000.000001 web 1.4.0 → production: Waiting for approval",
		"chat.update C0DEPLOYS 1700000000.000001 web 1.4.0 → production: Succeeded",
		"chat.postMessage C0DEPLOYS 1700000000.000001 web 1.4.0 → production: Succeeded",
	}))
	g.Expect(blocksOfType(calls[1].Blocks, "actions")).To(HaveLen(1), "the first message offers the decision")
	g.Expect(blocksOfType(calls[2].Blocks, "actions")).To(BeEmpty(), "replies in the thread carry no buttons")
	g.Expect(blocksOfType(calls[3].Blocks, "actions")).To(BeEmpty(), "once decided, the buttons go")
	g.Expect(allText(calls[4].Blocks)).To(ContainSubstring("promotion succeeded"), "the summary's timeline")
}

func TestSlack_botRepostsWhenTheFirstMessageIsGone(t *testing.T) {
	g := NewWithT(t)
	fs, srv := newFakeSlack(t)
	s := botNotifier(t, srv, token, "")
	d, err := s.Notify(context.Background(), notifytest.Promotion(tugboatv1alpha1.EventPromotionRunning), "C0DEPLOYS/1600000000.000009")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Reference).To(Equal("C0DEPLOYS/1700000000.000001"))
	calls, _ := fs.snapshot()
	g.Expect(calls).To(HaveLen(1))
	g.Expect(calls[0].TS).To(BeEmpty(), "a new top-level message")
}

func TestSlack_errors(t *testing.T) {
	ctx := context.Background()
	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionRunning)

	t.Run("bad token is permanent", func(t *testing.T) {
		g := NewWithT(t)
		_, srv := newFakeSlack(t)
		_, err := botNotifier(t, srv, "xoxb-wrong-token", "").Notify(ctx, n, "")
		g.Expect(notify.IsPermanent(err)).To(BeTrue())
		g.Expect(err).To(MatchError(ContainSubstring("invalid_auth")))
		g.Expect(err.Error()).NotTo(ContainSubstring("wrong-token"))
	})

	for _, tc := range []struct {
		name      string
		a         answer
		permanent bool
	}{
		{"5xx is retried", answer{status: http.StatusServiceUnavailable}, false},
		{"Slack's internal_error is retried", answer{slackError: "internal_error"}, false},
		{"channel_not_found is permanent", answer{slackError: "channel_not_found"}, true},
		{"4xx is permanent", answer{status: http.StatusForbidden}, true},
	} {
		t.Run("bot: "+tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fs, srv := newFakeSlack(t)
			fs.force(tc.a)
			_, err := botNotifier(t, srv, token, "").Notify(ctx, n, "")
			g.Expect(err).To(HaveOccurred())
			g.Expect(notify.IsPermanent(err)).To(Equal(tc.permanent), "%v", err)
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3tT0k3n"))
		})
	}

	t.Run("bot: 429 asks to come back after Retry-After", func(t *testing.T) {
		g := NewWithT(t)
		fs, srv := newFakeSlack(t)
		fs.force(answer{status: http.StatusTooManyRequests, retryAfter: "2"})
		s := botNotifier(t, srv, token, "")
		_, err := s.Notify(ctx, n, "")
		after, ok := notify.RetryAfter(err)
		g.Expect(ok).To(BeTrue(), "%v", err)
		g.Expect(after).To(Equal(2 * time.Second))
		slack.ForgetLimits(s)
		d, err := s.Notify(ctx, n, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Reference).NotTo(BeEmpty())
	})

	t.Run("webhook: unknown hook is permanent, its address never shown", func(t *testing.T) {
		g := NewWithT(t)
		_, srv := newFakeSlack(t)
		s, err := slack.New(slack.Options{WebhookURL: srv.URL + "/services/T000/B000/0therS3cr3t"})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = s.Notify(ctx, n, "")
		g.Expect(notify.IsPermanent(err)).To(BeTrue())
		g.Expect(err.Error()).NotTo(ContainSubstring("0therS3cr3t"))
	})

	t.Run("webhook: unreachable is retried, its address never shown", func(t *testing.T) {
		g := NewWithT(t)
		srv := httptest.NewServer(http.NotFoundHandler())
		addr := srv.URL
		srv.Close()
		s, err := slack.New(slack.Options{WebhookURL: addr + hookPath})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = s.Notify(ctx, n, "")
		g.Expect(err).To(HaveOccurred())
		g.Expect(notify.IsPermanent(err)).To(BeFalse())
		g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3tH00kPath"))
	})

	t.Run("configuration", func(t *testing.T) {
		g := NewWithT(t)
		_, err := slack.New(slack.Options{})
		g.Expect(notify.IsPermanent(err)).To(BeTrue())
		_, err = slack.New(slack.Options{Token: token})
		g.Expect(notify.IsPermanent(err)).To(BeTrue(), "a token needs a channel")
		_, err = slack.New(slack.Options{WebhookURL: "hooks.slack.com/services/x"})
		g.Expect(notify.IsPermanent(err)).To(BeTrue())
	})
}

// The decision message replaces the clicked message through response_url:
// built from the blocks the interaction payload carries.
func TestSlack_decisionMessage(t *testing.T) {
	g := NewWithT(t)
	fs, srv := newFakeSlack(t)
	_, err := webhookNotifier(t, srv, "signing-secret").Notify(context.Background(), notifytest.Promotion(tugboatv1alpha1.EventPromotionWaitingApproval), "")
	g.Expect(err).NotTo(HaveOccurred())
	calls, _ := fs.snapshot()

	// What the hub gets back in the interaction payload's message.blocks.
	raw, _ := json.Marshal(calls[0].Blocks)
	var original slackapi.Blocks
	g.Expect(json.Unmarshal(raw, &original)).To(Succeed())

	post := func(msg *slackapi.WebhookMessage) call {
		g.Expect(msg.ReplaceOriginal).To(BeTrue())
		b, err := json.Marshal(msg)
		g.Expect(err).NotTo(HaveOccurred())
		var m struct {
			Text   string           `json:"text"`
			Blocks []map[string]any `json:"blocks"`
		}
		g.Expect(json.Unmarshal(b, &m)).To(Succeed())
		g.Expect(validateMessage(m.Text, m.Blocks)).To(BeEmpty())
		return call{Text: m.Text, Blocks: m.Blocks}
	}

	voted := post(slack.DecisionMessage(original.BlockSet, slack.Outcome{Kind: slack.OutcomeVoted, UserID: "U0CAROL", UserName: "carol", Message: "2 of 2 needed"}))
	g.Expect(blocksOfType(voted.Blocks, "actions")).To(HaveLen(1), "more approvals needed: the buttons stay")
	g.Expect(allText(voted.Blocks)).To(ContainSubstring("Approval by <@U0CAROL> recorded: 2 of 2 needed"))

	raw, _ = json.Marshal(voted.Blocks)
	var again slackapi.Blocks
	g.Expect(json.Unmarshal(raw, &again)).To(Succeed())
	approved := post(slack.DecisionMessage(again.BlockSet, slack.Outcome{Kind: slack.OutcomeApproved, UserID: "U0CAROL", UserName: "carol"}))
	g.Expect(blocksOfType(approved.Blocks, "actions")).To(BeEmpty(), "decided: the buttons go")
	text := allText(approved.Blocks)
	g.Expect(text).To(ContainSubstring(":white_check_mark: Approved by <@U0CAROL>"))
	g.Expect(text).NotTo(ContainSubstring("recorded"), "the earlier outcome is replaced")
	g.Expect(text).To(ContainSubstring("*Version*\n1.4.0"), "the notice itself stays")

	refused := post(slack.DecisionMessage(original.BlockSet, slack.Outcome{Kind: slack.OutcomeRefused, UserID: "U0MALLORY", Message: "not an approver of production"}))
	g.Expect(blocksOfType(refused.Blocks, "actions")).To(HaveLen(1), "a refused click leaves the buttons for an approver")
	g.Expect(allText(refused.Blocks)).To(ContainSubstring("refused: not an approver of production"))

	rejected := post(slack.DecisionMessage(original.BlockSet, slack.Outcome{Kind: slack.OutcomeRejected, UserID: "not-a-slack-id", UserName: "<!channel>"}))
	g.Expect(allText(rejected.Blocks)).To(ContainSubstring(":x: Rejected by &lt;!channel&gt;"))
}

func TestParseActionValue(t *testing.T) {
	g := NewWithT(t)
	v := slack.ActionValue("apps", "web", "web-production-1.4.0", "team-slack")
	a, err := slack.ParseActionValue(v)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).To(Equal(slack.Action{Namespace: "apps", Pipeline: "web", Promotion: "web-production-1.4.0", Notifier: "team-slack"}))
	// A message posted before the value named the Pipeline.
	a, err = slack.ParseActionValue("apps/web-production-1.4.0/team-slack")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).To(Equal(slack.Action{Namespace: "apps", Promotion: "web-production-1.4.0", Notifier: "team-slack"}))
	for _, bad := range []string{
		"", "apps/web", "apps/web/web-1/team/extra", "/web/team", "apps//team", "apps/web/",
		"Apps/web/team", "apps/web_1/team", "apps/web/team\n", strings.Repeat("a", 2001),
		"apps/" + url.PathEscape("../x") + "/team", "apps//web-1/team", "apps/Web/web-1/team",
	} {
		_, err := slack.ParseActionValue(bad)
		g.Expect(err).To(HaveOccurred(), "%q", bad)
	}
}

// TestSlack_repliesPerWaveInThePromotionsThread: with a bot token, each
// wave of a rollout that qualifies is a reply in the thread of the
// promotion's first message (thread_ts is its ts), naming the wave and the
// rollout's progress; the first message shows the latest state.
func TestSlack_repliesPerWaveInThePromotionsThread(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fs, srv := newFakeSlack(t)
	s := botNotifier(t, srv, token, "")

	d, err := s.Notify(ctx, notifytest.Promotion(tugboatv1alpha1.EventPromotionRunning), "")
	g.Expect(err).NotTo(HaveOccurred())
	ref := d.Reference
	for i, wave := range []string{"canary (1 of 3)", "wave-1 (2 of 3)"} {
		n := notifytest.Promotion(tugboatv1alpha1.EventPromotionWaveCompleted)
		n.Promotion.Wave = wave
		n.Promotion.Rollout = fmt.Sprintf("wave %d/3, %d/10 succeeded, 0 failed of 1 allowed", i+2, 1+4*i)
		d, err = s.Notify(ctx, n, ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Reference).To(Equal(ref))
	}
	paused := notifytest.Promotion(tugboatv1alpha1.EventPromotionPaused)
	paused.Promotion.Message = "rollout of 1.4.0 into production paused by alice in wave final"
	_, err = s.Notify(ctx, paused, ref)
	g.Expect(err).NotTo(HaveOccurred())

	calls, problems := fs.snapshot()
	g.Expect(problems).To(BeEmpty())
	var replies []call
	for _, c := range calls {
		if c.Method == "chat.postMessage" && c.TS != "" {
			replies = append(replies, c)
		}
	}
	g.Expect(replies).To(HaveLen(3), "one reply per notice, none per target")
	for _, c := range replies {
		g.Expect(c.Channel+"/"+c.TS).To(Equal(ref), "thread_ts is the promotion's first message")
	}
	g.Expect(replies[0].Text).To(Equal("web 1.4.0 → production: wave canary (1 of 3) completed"))
	g.Expect(replies[1].Text).To(Equal("web 1.4.0 → production: wave wave-1 (2 of 3) completed"))
	g.Expect(allText(replies[1].Blocks)).To(And(ContainSubstring("wave-1 (2 of 3)"), ContainSubstring("wave 3/3, 5/10 succeeded")))
	g.Expect(replies[2].Text).To(Equal("web 1.4.0 → production: Paused"))
	g.Expect(allText(replies[2].Blocks)).To(ContainSubstring("paused by alice"))
}
