package interactions_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"time"

	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	notifyslack "tugboat.dev/tugboat/controllers/notify/slack"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/webhook/interactions"
)

// TestInteractions_forgedClicksCostOneSecretReadAndAnswerAlike: anonymous
// clicks that name a real Pipeline's Slack notifier, signed with anything
// but its secret, cost the API server one Secret read per cache TTL, not
// one each; and the answer to a click naming a namespace or Pipeline
// without a Slack notifier is the same as to one naming a real notifier,
// so the endpoint does not tell which namespaces have one (security review
// 3, low 1).
func TestInteractions_forgedClicksCostOneSecretReadAndAnswerAlike(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "slack-reads"
	c := cluster.Client
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slack"},
		Data: map[string][]byte{"token": []byte("xoxb-test-token"), "signingSecret": []byte(signingSecret)}})).To(Succeed())
	g.Expect(c.Create(ctx, slackPipeline(ns))).To(Succeed())
	reads := harness.CountGets[*corev1.Secret](c)
	h := interactions.New(c, reads, request.Decide, request.MayApprove, interactions.Options{})

	post := func(value string) (int, string) {
		body := click(notifyslack.ActionApprove, value, approver, "pat", "")
		req := httptest.NewRequest(http.MethodPost, interactions.Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		sign(req, "not-the-signing-secret-of-anyone", body, time.Now())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	// The cached client may not have the Pipeline yet.
	var real string
	g.Eventually(func() int {
		code, body := post(notifyslack.ActionValue(ns, "web", "web-production-1.0.0", "slack"))
		real = body
		return code
	}).WithTimeout(30 * time.Second).Should(Equal(http.StatusUnauthorized))
	for range 30 {
		code, body := post(notifyslack.ActionValue(ns, "web", "web-production-1.0.0", "slack"))
		g.Expect(code).To(Equal(http.StatusUnauthorized))
		g.Expect(body).To(Equal(real))
	}
	g.Expect(reads.Total()).To(BeEquivalentTo(1), "one Secret read for 31 forged clicks")

	for _, value := range []string{
		notifyslack.ActionValue("no-such-namespace", "web", "web-production-1.0.0", "slack"),
		notifyslack.ActionValue(ns, "no-such-pipeline", "web-production-1.0.0", "slack"),
		notifyslack.ActionValue(ns, "web", "web-production-1.0.0", "no-such-notifier"),
	} {
		code, body := post(value)
		g.Expect(code).To(Equal(http.StatusUnauthorized), value)
		g.Expect(body).To(Equal(real), value)
	}
}
