package interactions_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	notifyslack "tugboat.dev/tugboat/controllers/notify/slack"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/webhook/interactions"
)

const (
	approver       = "UAPPROVER1"
	secondApprover = "UAPPROVER2"
	// requesterOnSlack is the Slack user of carol, who requests the
	// promotions (gates.approvers.people).
	requesterOnSlack = "UCAROL1"
)

func slackPipeline(ns string) *tugboatv1alpha1.Pipeline {
	return &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
			Environments: []tugboatv1alpha1.Environment{
				{Name: "dev", Targets: []tugboatv1alpha1.Target{{Spoke: "dev-1", Namespace: "apps"}}},
				{Name: "production", Targets: []tugboatv1alpha1.Target{{Spoke: "prod-1", Namespace: "apps"}},
					Gates: tugboatv1alpha1.Gates{RequireApproval: true, Approvers: &tugboatv1alpha1.Approvers{SlackUsers: []string{approver, secondApprover, requesterOnSlack},
						People: []tugboatv1alpha1.ApproverIdentity{{User: "carol", SlackUsers: []string{requesterOnSlack}}}}}},
			},
			Notify: []tugboatv1alpha1.Notifier{{
				Name: "slack", Type: tugboatv1alpha1.NotifierSlack,
				Slack: &tugboatv1alpha1.SlackNotifier{SecretRef: tugboatv1alpha1.LocalSecretReference{Name: "slack"}, Channel: "C0DEMO"},
			}},
		},
	}
}

// TestInteractions_onTheHub runs the real hub in-process with its Slack
// notifier pointed at a stand-in for Slack's API: a promotion into an
// environment that requires approval is announced with Approve and Reject
// buttons, a signed click approves it under the verified Slack user, the
// message is updated through response_url, and the promotion starts. Every
// bad request is answered with its code and leaves the Promotion as it
// was.
func TestInteractions_onTheHub(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "slack-hub"
	c := cluster.Client
	slack := newSlackStandIn(t)
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slack"},
		Data: map[string][]byte{"token": []byte("xoxb-test-token"), "signingSecret": []byte(signingSecret)}})).To(Succeed())
	p := slackPipeline(ns)
	g.Expect(c.Create(ctx, p)).To(Succeed())
	// Another Pipeline of the namespace, whose Slack notifier has a
	// signing secret its author knows: it must not sign clicks for web.
	const otherSecret = "0ther-pipeline-signing-secret-123"
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-slack"},
		Data: map[string][]byte{"token": []byte("xoxb-test-token"), "signingSecret": []byte(otherSecret)}})).To(Succeed())
	other := slackPipeline(ns)
	other.Name = "other"
	other.Spec.Notify[0].Slack.SecretRef.Name = "other-slack"
	g.Expect(c.Create(ctx, other)).To(Succeed())

	noop := strategy.Func(func(context.Context, strategy.Request) (strategy.Result, error) {
		return strategy.Result{Message: "no-op"}, nil
	})
	opts := hubtest.Options()
	opts.Strategies = strategy.Registry{tugboatv1alpha1.StrategyNotification: noop}
	opts.SlackAPIURL = slack.srv.URL + "/api/"
	opts.Egress.AllowLoopback = true
	opts.ResponseURLAllowed = func(u *url.URL) bool { return u.Host == strings.TrimPrefix(slack.srv.URL, "http://") }
	h, _ := hubtest.Start(t, cluster.RESTConfig, opts)
	g.Eventually(h.Receiver.Addr, 30*time.Second, 50*time.Millisecond).ShouldNot(BeNil())
	endpoint := "http://" + h.Receiver.Addr().String() + interactions.Path

	post := func(body []byte, contentType string, at time.Time, secret string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", contentType)
		if secret != "" {
			sign(req, secret, body, at)
		}
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const form = "application/x-www-form-urlencoded"
	promotion := func(name string) *tugboatv1alpha1.Promotion {
		pr := &tugboatv1alpha1.Promotion{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pr)).To(Succeed())
		return pr
	}

	first, err := request.Create(ctx, c, p, "production", "1.4.0", tugboatv1alpha1.RequestedByUser, "carol")
	g.Expect(err).NotTo(HaveOccurred())
	second, err := request.Create(ctx, c, p, "production", "1.5.0", tugboatv1alpha1.RequestedByUser, "carol")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return promotion(first.Name).Status.Phase }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))
	// The notifier announced it with buttons (each of the two promotions
	// gets its own message, in whichever order).
	g.Eventually(func() int { return slack.postsContaining(notifyslack.ActionApprove) }, 30*time.Second, 100*time.Millisecond).Should(BeNumerically(">=", 1))
	g.Eventually(func() int { return slack.postsContaining(notifyslack.ActionValue(ns, "web", first.Name, "slack")) }, 30*time.Second, 100*time.Millisecond).
		Should(BeNumerically(">=", 1))

	responseURL := slack.srv.URL + "/response/1"
	approve := click(notifyslack.ActionApprove, notifyslack.ActionValue(ns, "web", first.Name, "slack"), approver, "pat", responseURL)
	approvedAt := time.Now()
	code, body := post(approve, form, approvedAt, signingSecret)
	g.Expect(code).To(Equal(http.StatusOK), body)
	pr := promotion(first.Name)
	g.Expect(pr.Status.Approvals).To(HaveLen(1))
	g.Expect(pr.Status.Approvals[0].User).To(Equal(approver))
	g.Expect(pr.Status.Approvals[0].DisplayName).To(Equal("pat"))
	g.Expect(pr.Status.Approvals[0].Source).To(Equal(tugboatv1alpha1.ApprovalSourceSlack))
	g.Expect(pr.Status.Approvals[0].Decision).To(Equal(tugboatv1alpha1.DecisionApprove))
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return promotion(first.Name).Status.Phase }, 30*time.Second, 100*time.Millisecond).
		ShouldNot(Equal(tugboatv1alpha1.PromotionWaitingApproval))
	g.Eventually(slack.responseTexts, 10*time.Second, 50*time.Millisecond).Should(ContainElement(And(HavePrefix("[replace]"), ContainSubstring("Approved by <@"+approver+">"))))

	// Bad requests, each against the second Promotion (still waiting)
	// unless it says otherwise: none may change it.
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return promotion(second.Name).Status.Phase }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))
	onSecond := notifyslack.ActionValue(ns, "web", second.Name, "slack")
	// legacy is the value of a message posted before values named the
	// Pipeline.
	legacy := func(promotion string) string { return ns + "/" + promotion + "/slack" }
	big := append([]byte("payload="), bytes.Repeat([]byte("a"), 70<<10)...)
	for _, tc := range []struct {
		name        string
		body        []byte
		contentType string
		at          time.Time
		secret      string
		code        int
		says        string
	}{
		{"signed with another pipeline's secret", click(notifyslack.ActionApprove, onSecond, approver, "pat", responseURL), form, time.Now(), otherSecret, 401, "unauthenticated"},
		{"signed with another pipeline's secret, naming that pipeline", click(notifyslack.ActionApprove, notifyslack.ActionValue(ns, "other", second.Name, "slack"), approver, "pat", responseURL), form, time.Now(), otherSecret, 403, "belongs to pipeline web"},
		{"signed with another pipeline's secret, value without the pipeline", click(notifyslack.ActionApprove, legacy(second.Name), approver, "pat", responseURL), form, time.Now(), otherSecret, 401, "unauthenticated"},
		{"a notifier that is not the pipeline's", click(notifyslack.ActionApprove, notifyslack.ActionValue(ns, "web", second.Name, "other-slack"), approver, "pat", responseURL), form, time.Now(), otherSecret, 401, "unauthenticated"},
		{"unknown pipeline", click(notifyslack.ActionApprove, notifyslack.ActionValue(ns, "nope", second.Name, "slack"), approver, "pat", responseURL), form, time.Now(), signingSecret, 401, "unauthenticated"},
		{"unknown promotion, value without the pipeline", click(notifyslack.ActionApprove, legacy("web-production-9.9.9"), approver, "pat", responseURL), form, time.Now(), signingSecret, 401, "unauthenticated"},
		{"bad signature", click(notifyslack.ActionApprove, onSecond, approver, "pat", responseURL), form, time.Now(), "not-the-signing-secret", 401, "unauthenticated"},
		{"no signature", click(notifyslack.ActionApprove, onSecond, approver, "pat", responseURL), form, time.Now(), "", 401, "unauthenticated"},
		{"stale timestamp", click(notifyslack.ActionApprove, onSecond, approver, "pat", responseURL), form, time.Now().Add(-6 * time.Minute), signingSecret, 401, "5 minutes"},
		{"replayed click", approve, form, approvedAt, signingSecret, 409, "replayed"},
		{"unknown promotion", click(notifyslack.ActionApprove, notifyslack.ActionValue(ns, "web", "web-production-9.9.9", "slack"), approver, "pat", responseURL), form, time.Now(), signingSecret, 404, "not found"},
		{"the requester, through Slack", click(notifyslack.ActionApprove, onSecond, requesterOnSlack, "carol", responseURL), form, time.Now(), signingSecret, 403, "carol (Slack UCAROL1) requested this promotion"},
		{"not an approver", click(notifyslack.ActionApprove, onSecond, "UINTRUDER", "mallory", responseURL), form, time.Now(), signingSecret, 403, "may not approve"},
		{"no longer waiting", click(notifyslack.ActionReject, notifyslack.ActionValue(ns, "web", first.Name, "slack"), secondApprover, "sam", responseURL), form, time.Now(), signingSecret, 409, "no longer waits"},
		{"not a form", []byte(`{"payload":{}}`), "application/json", time.Now(), signingSecret, 400, "content type"},
		{"no payload", []byte("foo=bar"), form, time.Now(), signingSecret, 400, "payload: required"},
		{"malformed payload", []byte("payload=%7Bnot-json"), form, time.Now(), signingSecret, 400, "malformed JSON"},
		{"bad action value", click(notifyslack.ActionApprove, "only/two", approver, "pat", responseURL), form, time.Now(), signingSecret, 400, "namespace/pipeline/promotion/notifier"},
		{"too large", big, form, time.Now(), signingSecret, 413, "larger than"},
	} {
		before := promotion(second.Name)
		firstBefore := promotion(first.Name)
		code, resp := post(tc.body, tc.contentType, tc.at, tc.secret)
		g.Expect(code).To(Equal(tc.code), "%s: %s", tc.name, resp)
		g.Expect(resp).To(ContainSubstring(tc.says), tc.name)
		g.Expect(promotion(second.Name).ResourceVersion).To(Equal(before.ResourceVersion), "%s changed the waiting promotion", tc.name)
		g.Expect(promotion(first.Name).Status.Approvals).To(Equal(firstBefore.Status.Approvals), "%s changed the approved promotion's votes", tc.name)
	}

	// The same click again, its signature written in upper case (hex
	// decodes to the same bytes, so it verifies): still a replay.
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(approve))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", form)
	sign(req, signingSecret, approve, approvedAt)
	req.Header.Set("X-Slack-Signature", "v0="+strings.ToUpper(strings.TrimPrefix(req.Header.Get("X-Slack-Signature"), "v0=")))
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusConflict), string(b))
	g.Expect(string(b)).To(ContainSubstring("replayed"))

	// A click on a message posted before values named the Pipeline is
	// still taken, verified with that Pipeline's notifier.
	old := click(notifyslack.ActionApprove, legacy(second.Name), secondApprover, "sam", responseURL)
	code, body = post(old, form, time.Now(), signingSecret)
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(promotion(second.Name).Status.Approvals).To(ConsistOf(HaveField("User", secondApprover)))

	req, _ = http.NewRequest(http.MethodGet, endpoint, nil)
	resp, err = http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusMethodNotAllowed))
}
