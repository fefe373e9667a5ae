package pipelineapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/webhook/pipelineapi"
)

// TestPipelineAPI_onTheHub runs the real hub in-process (receiver, Pipeline
// and Promotion reconcilers, with strategies that do nothing) and drives an
// approval gate over HTTP: CI asks for a promotion into production, the
// Promotion controller holds it in WaitingApproval, CI approves it with a
// request signed by its approval credential release-bot, and the
// controller counts the vote and starts it.
func TestPipelineAPI_onTheHub(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, "api-hub")
	noop := strategy.Func(func(context.Context, strategy.Request) (strategy.Result, error) {
		return strategy.Result{Message: "no-op"}, nil
	})
	opts := hubtest.Options()
	opts.Strategies = strategy.Registry{tugboatv1alpha1.StrategyNotification: noop}
	h, _ := hubtest.Start(t, cluster.RESTConfig, opts)
	g.Eventually(h.Receiver.Addr, 30*time.Second, 50*time.Millisecond).ShouldNot(BeNil())
	base := "http://" + h.Receiver.Addr().String()

	// post sends body to endpoint, signed with key, or with a bearer token
	// when key is empty.
	post := func(endpoint string, body []byte, key []byte) (int, []byte) {
		req, err := http.NewRequest(http.MethodPost, base+f.path("web", endpoint), bytes.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", "application/json")
		if key != nil {
			wire.SignRequest(req, key, body, time.Now())
		} else {
			req.Header.Set("Authorization", "Bearer "+webToken)
		}
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.Bytes()
	}

	code, body := post("promotions", []byte(`{"environment":"production","version":"3.1.0","requester":"pipeline #42"}`), nil)
	g.Expect(code).To(Equal(http.StatusCreated), string(body))
	var created pipelineapi.PromotionResponse
	g.Expect(json.Unmarshal(body, &created)).To(Succeed())
	phase := func() tugboatv1alpha1.PromotionPhase { return f.promotion(created.Promotion).Status.Phase }
	g.Eventually(phase, 30*time.Second, 100*time.Millisecond).Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))

	code, body = post("approvals", []byte(`{"promotion":"`+created.Promotion+`","approve":true}`), []byte(releaseBotToken))
	g.Expect(code).To(Equal(http.StatusOK), string(body))
	g.Eventually(phase, 30*time.Second, 100*time.Millisecond).Should(BeElementOf(tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.PromotionVerifying))
	pr := f.promotion(created.Promotion)
	g.Expect(pr.Status.Approval.ApprovedBy).To(Equal("release-bot"))
	g.Expect(pr.Status.StartedAt).NotTo(BeNil())

	resp, err := http.Get(base + "/healthz")
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "the receiver's own routes still answer")
}
