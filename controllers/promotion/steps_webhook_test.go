package promotion_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/promotion"
)

// stepReceiver is a real loopback HTTP server standing for a team's QA
// endpoint: it verifies each request's signature with wire.Verifier (as a
// receiver would), records the requests it verified, and answers status
// with body.
type stepReceiver struct {
	*httptest.Server
	mu         sync.Mutex
	got        []promotion.StepRequest
	deliveries []string
	unverified int
}

func newStepReceiver(t *testing.T, key []byte, status int, body string) *stepReceiver {
	v, err := wire.NewVerifier(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &stepReceiver{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := v.VerifyRequest(r, raw); err != nil {
			s.unverified++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var req promotion.StepRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.got = append(s.got, req)
		s.deliveries = append(s.deliveries, r.Header.Get("X-Tugboat-Delivery"))
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *stepReceiver) requests() []promotion.StepRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]promotion.StepRequest(nil), s.got...)
}

// seen returns the X-Tugboat-Delivery headers of the verified requests, and
// how many requests failed verification.
func (s *stepReceiver) seen() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.deliveries...), s.unverified
}

var stepKey = []byte("0123456789abcdef0123456789abcdef")

func webhookStep(name, url string, retries int32) tugboatv1alpha1.Step {
	return tugboatv1alpha1.Step{Name: name, Type: tugboatv1alpha1.StepWebhook, Retries: retries,
		Webhook: &tugboatv1alpha1.WebhookStep{URL: url, SecretRef: &tugboatv1alpha1.LocalSecretReference{Name: "qa-hook"}}}
}

// TestSteps_aSignedWebhookStepThatAnswers2xxPasses: the post step POSTs a
// StepRequest signed with the key of Secret qa-hook, which a real
// receiver verifies; its 200 passes the step and the Promotion succeeds.
func TestSteps_aSignedWebhookStepThatAnswers2xxPasses(t *testing.T) {
	g := NewWithT(t)
	srv := newStepReceiver(t, stepKey, http.StatusOK, "ok")
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Post: []tugboatv1alpha1.Step{webhookStep("qa", srv.URL+"/hook", 0)}})
	newSecret(g, f.ns, "qa-hook", map[string][]byte{"key": stepKey})
	f.startHub()
	name := f.promote("2.0.0")
	g.Eventually(f.strategyCalls).WithTimeout(30 * time.Second).Should(Equal(1))
	g.Expect(srv.requests()).To(BeEmpty(), "a post step waits for the targets")
	f.report("2.0.0", 2)
	g.Eventually(f.state(name)).WithTimeout(30 * time.Second).Should(Equal("Succeeded Succeeded: every target of production runs 2.0.0, healthy"))
	got := srv.requests()
	g.Expect(got).To(HaveLen(1))
	r := got[0]
	g.Expect(r.APIVersion + " " + r.Kind).To(Equal("lifecycle.tugboat.dev/v1 StepRequest"))
	g.Expect([]any{r.Namespace, r.Pipeline, r.Promotion, r.Environment, r.Version, r.Step, r.Stage, r.Attempt, r.TargetCount}).To(
		Equal([]any{f.ns, "web", name, "production", "2.0.0", "qa", "Post", int32(1), 1}))
	g.Expect(r.Targets).To(Equal([]tugboatv1alpha1.EventTarget{{Spoke: "prod-1", Namespace: "apps", Release: "web"}}))
	deliveries, unverified := srv.seen()
	g.Expect(deliveries).To(Equal([]string{r.ID}))
	g.Expect(unverified).To(BeZero())
	g.Expect(f.steps(name)()).To(Equal([]string{"qa Succeeded 1: webhook " + srv.URL + "/hook answered 200 OK to delivery " + r.ID}))
}

// TestSteps_aWebhookStepThatAnswersAnErrorFails: the receiver answers 500
// twice (the step has one retry, a new delivery id each): the step and
// the Promotion fail with the answer's status and an excerpt of its body;
// the strategy never ran.
func TestSteps_aWebhookStepThatAnswersAnErrorFails(t *testing.T) {
	g := NewWithT(t)
	srv := newStepReceiver(t, stepKey, http.StatusInternalServerError, "migration broken")
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{webhookStep("qa", srv.URL+"/hook", 1)}})
	newSecret(g, f.ns, "qa-hook", map[string][]byte{"key": stepKey})
	f.startHub()
	name := f.promote("2.0.0")
	g.Eventually(f.state(name)).WithTimeout(60 * time.Second).Should(Equal("Failed StepFailed: pre step qa (webhook) failed after 2 attempt(s): webhook " +
		srv.URL + "/hook answered 500 Internal Server Error, not 2xx: migration broken"))
	got := srv.requests()
	g.Expect(got).To(HaveLen(2))
	g.Expect([]int32{got[0].Attempt, got[1].Attempt}).To(Equal([]int32{1, 2}))
	g.Expect(got[0].ID).NotTo(Equal(got[1].ID))
	g.Expect(f.strategyCalls()).To(BeZero())
}

// TestSteps_aWebhookStepObeysTheEgressPolicy: a hub that refuses loopback
// destinations (the default) fails the step before any request leaves,
// saying why; and a Secret whose key is too short fails it too.
func TestSteps_aWebhookStepObeysTheEgressPolicy(t *testing.T) {
	g := NewWithT(t)
	srv := newStepReceiver(t, stepKey, http.StatusOK, "ok")
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{webhookStep("qa", srv.URL+"/hook", 0)}})
	newSecret(g, f.ns, "qa-hook", map[string][]byte{"key": stepKey})
	f.startHub(func(o *hub.Options) { o.Egress.AllowLoopback = false })
	name := f.promote("2.0.0")
	g.Eventually(f.state(name)).WithTimeout(30 * time.Second).Should(And(
		HavePrefix("Failed StepFailed: pre step qa (webhook) failed after 1 attempt(s): webhook "+srv.URL+"/hook: "),
		ContainSubstring("destination 127.0.0.1 is a loopback address (the hub's --egress-allow-loopback allows it)")))
	deliveries, unverified := srv.seen()
	g.Expect(deliveries).To(BeEmpty(), "no request left the hub")
	g.Expect(unverified).To(BeZero(), "no request left the hub")

	short := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{webhookStep("qa", srv.URL+"/hook", 0)}})
	newSecret(g, short.ns, "qa-hook", map[string][]byte{"key": []byte("short")})
	short.startHub()
	name = short.promote("2.0.0")
	g.Eventually(short.state(name)).WithTimeout(30 * time.Second).Should(Equal("Failed StepFailed: pre step qa (webhook) failed after 1 attempt(s): " +
		"webhook signing key: key \"key\" of Secret " + short.ns + "/qa-hook holds 5 bytes; at least 32 are required"))
}
