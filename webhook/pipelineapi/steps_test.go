package pipelineapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/promotion"
	"tugboat.dev/tugboat/webhook/pipelineapi"
)

// Signing keys of the webhook steps of Pipeline "hooked": production's
// step qa (Secret qa-hook) and staging's step qa (Secret staging-hook).
var (
	qaKey      = []byte("qa-hook-signing-key-0123456789abc")
	stagingKey = []byte("staging-hook-key-0123456789abcdef")
)

// hookedPipeline is Pipeline "hooked" (request credential web-ci): staging
// and production each have a pre webhook step qa, signed with their own
// key.
func hookedPipeline(ns string) *tugboatv1alpha1.Pipeline {
	p := newPipeline(ns, "hooked", "web-ci")
	step := func(secret string) *tugboatv1alpha1.Steps {
		return &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{{Name: "qa", Type: tugboatv1alpha1.StepWebhook,
			Webhook: &tugboatv1alpha1.WebhookStep{URL: "https://qa.example/hook", SecretRef: &tugboatv1alpha1.LocalSecretReference{Name: secret}}}}}
	}
	p.Spec.Environments[1].Steps = step("staging-hook")
	p.Spec.Environments[2].Steps = step("qa-hook")
	return p
}

// waitingStep creates a Promotion of pipeline into production and records,
// as the hub would, that its step qa runs attempt attempts; with accepted,
// the attempt answered 202 and its LifecycleEvent exists.
func (f *fixture) waitingStep(g Gomega, pipeline, version string, attempts int32, accepted bool) *tugboatv1alpha1.Promotion {
	ctx := context.Background()
	rec := f.do(call{path: f.path(pipeline, "promotions"), auth: bearer(webToken), body: []byte(`{"environment":"production","version":"` + version + `"}`)})
	g.Expect(rec.Code).To(Equal(http.StatusCreated), rec.Body.String())
	pr := f.promotion(decode[pipelineapi.PromotionResponse](g, rec.Body.Bytes()).Promotion)
	orig := pr.DeepCopy()
	now := metav1.Now()
	pr.Status.Phase = tugboatv1alpha1.PromotionRunning
	pr.Status.Steps = []tugboatv1alpha1.StepStatus{{Name: "qa", Stage: tugboatv1alpha1.StepStagePre, Type: tugboatv1alpha1.StepWebhook,
		Phase: tugboatv1alpha1.StepRunning, Attempts: attempts, StartedAt: &now, Message: "waiting for its report"}}
	g.Expect(cluster.Client.Status().Patch(ctx, pr, client.MergeFrom(orig))).To(Succeed())
	if accepted {
		name := promotion.EventName(pr.Name, "qa", attempts)
		g.Expect(cluster.Client.Create(ctx, &tugboatv1alpha1.LifecycleEvent{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: tugboatv1alpha1.GroupVersion.String(), Kind: "Promotion", Name: pr.Name, UID: pr.UID, Controller: ptr.To(true)}}},
			Spec: tugboatv1alpha1.LifecycleEventSpec{Lifecycle: promotion.WebhookLifecycle, EventKey: promotion.WebhookLifecycle, Promotion: pr.Name,
				Pipeline: pipeline, Environment: "production", Version: version, Step: "qa", Stage: tugboatv1alpha1.StepStagePre, Attempt: attempts,
				Deadline: metav1.NewTime(now.Add(time.Hour))},
		})).To(Succeed())
	}
	return pr
}

func (f *fixture) lifecycleEvent(g Gomega, name string) *tugboatv1alpha1.LifecycleEvent {
	ev := &tugboatv1alpha1.LifecycleEvent{}
	g.Expect(cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, ev)).To(Succeed())
	return ev
}

// TestPipelineAPI_stepReportsBadInput: every refusal of POST .../steps, in
// the order of the checks (path, method, content type, size,
// authentication, body naming the field, then the step: unknown 404, a
// key of another step 403, a stale delivery or a step not waiting 409),
// leaves the attempt's event unfinished; then a good report with the
// Pipeline's request credential finishes it, recording the credential's
// name, and a second report is refused.
func TestPipelineAPI_stepReportsBadInput(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, "api-steps")
	for _, o := range []client.Object{
		hookedPipeline(f.ns),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "qa-hook"}, Data: map[string][]byte{pipelineapi.HMACKey: qaKey}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "staging-hook"}, Data: map[string][]byte{pipelineapi.HMACKey: stagingKey}},
	} {
		g.Expect(cluster.Client.Create(ctx, o)).To(Succeed())
	}
	pr := f.waitingStep(g, "hooked", "2.0.0", 2, true)
	unaccepted := f.waitingStep(g, "hooked", "2.1.0", 1, false)
	webPromotion := f.waitingStep(g, "web", "2.0.0", 1, false)
	current, stale := promotion.DeliveryID(pr, "qa", 2), promotion.DeliveryID(pr, "qa", 1)
	report := func(promotionName, delivery string) []byte {
		return []byte(`{"promotion":"` + promotionName + `","step":"qa","delivery":"` + delivery + `","result":"succeeded","message":"ok"}`)
	}
	good := report(pr.Name, current)
	path := f.path("hooked", "steps")

	for _, tc := range []struct {
		name  string
		c     call
		code  int
		error string
	}{
		{"an unknown endpoint", call{path: f.path("hooked", "step"), body: good, auth: signed(qaKey, time.Now())}, 404, "no such endpoint: use POST /v1/pipelines/{namespace}/{name}/promotions, .../approvals or .../steps"},
		{"GET", call{method: http.MethodGet, path: path, auth: signed(qaKey, time.Now())}, 405, "method GET not allowed"},
		{"text/plain", call{path: path, contentType: "text/plain", body: good, auth: signed(qaKey, time.Now())}, 415, "Content-Type must be application/json"},
		{"a body too large", call{path: path, body: []byte(`{"message":"` + strings.Repeat("x", 70<<10) + `"}`), auth: signed(qaKey, time.Now())}, 413, "body larger than 65536 bytes"},
		{"no credentials", call{path: path, body: good}, 401, "request not authenticated"},
		{"a wrong key", call{path: path, body: good, auth: signed([]byte("not-the-key-0123456789abcdefghij"), time.Now())}, 401, "request not authenticated"},
		{"a stale signature", call{path: path, body: good, auth: signed(qaKey, time.Now().Add(-time.Hour))}, 401, "request not authenticated"},
		{"another Pipeline's token", call{path: path, body: good, auth: bearer(otherToken)}, 401, "request not authenticated"},
		{"an approval credential", call{path: path, body: good, auth: bearer(releaseBotToken)}, 401, "request not authenticated"},
		{"the key signed over another body", call{path: path, body: good, auth: func(r *http.Request, _ []byte) {
			wire.SignRequest(r, qaKey, report(pr.Name, stale), time.Now())
		}}, 401, "request not authenticated"},
		{"not JSON", call{path: path, body: []byte(`result=succeeded`), auth: bearer(webToken)}, 400, "body must be a JSON object"},
		{"an unknown field", call{path: path, body: []byte(`{"promotion":"` + pr.Name + `","step":"qa","delivery":"` + current + `","result":"succeeded","reporter":"me"}`), auth: bearer(webToken)}, 400, `"field":"reporter","detail":"unknown field"`},
		{"no promotion", call{path: path, body: []byte(`{"step":"qa","delivery":"` + current + `","result":"succeeded"}`), auth: bearer(webToken)}, 400, `"field":"promotion","detail":"required"`},
		{"a bad step name", call{path: path, body: []byte(`{"promotion":"` + pr.Name + `","step":"QA!","delivery":"` + current + `","result":"succeeded"}`), auth: bearer(webToken)}, 400, `"field":"step"`},
		{"no delivery", call{path: path, body: []byte(`{"promotion":"` + pr.Name + `","step":"qa","result":"succeeded"}`), auth: bearer(webToken)}, 400, `"field":"delivery","detail":"required`},
		{"a short delivery", call{path: path, body: []byte(`{"promotion":"` + pr.Name + `","step":"qa","delivery":"abc","result":"succeeded"}`), auth: bearer(webToken)}, 400, `"field":"delivery","detail":"must be the 32 hexadecimal digits`},
		{"a result not known", call{path: path, body: []byte(`{"promotion":"` + pr.Name + `","step":"qa","delivery":"` + current + `","result":"passed"}`), auth: bearer(webToken)}, 400, `"field":"result"`},
		{"a result not a string", call{path: path, body: []byte(`{"promotion":"` + pr.Name + `","step":"qa","delivery":"` + current + `","result":true}`), auth: bearer(webToken)}, 400, `"field":"result","detail":"must be a string"`},
		{"a message too long", call{path: path, body: []byte(`{"promotion":"` + pr.Name + `","step":"qa","delivery":"` + current + `","result":"failed","message":"` + strings.Repeat("m", 513) + `"}`), auth: bearer(webToken)}, 400, `"field":"message","detail":"longer than 512 bytes"`},
		{"an unknown promotion", call{path: path, body: report("hooked-production-9.9.9", current), auth: bearer(webToken)}, 404, "promotion api-steps/hooked-production-9.9.9 not found"},
		{"another Pipeline's promotion", call{path: path, body: report(webPromotion.Name, current), auth: bearer(webToken)}, 404, "not found"},
		{"an unknown step", call{path: path, body: []byte(`{"promotion":"` + pr.Name + `","step":"smoke","delivery":"` + current + `","result":"succeeded"}`), auth: bearer(webToken)}, 404, "webhook step api-steps/" + pr.Name + "/smoke not found"},
		{"the key of staging's step", call{path: path, body: good, auth: signed(stagingKey, time.Now())}, 403, "the key of Secret staging-hook does not sign step qa of environment production"},
		{"the Pipeline's credential on a signed step", call{path: path, body: good, auth: bearer(webToken)}, 403,
			"step qa of environment production is signed with the key of Secret qa-hook: only that key reports it"},
		{"a stale delivery", call{path: path, body: report(pr.Name, stale), auth: signed(qaKey, time.Now())}, 409, "delivery " + stale + " is attempt 1's; step qa is at attempt 2"},
		{"another delivery", call{path: path, body: report(pr.Name, strings.Repeat("0", 32)), auth: signed(qaKey, time.Now())}, 409, "is not the current attempt's of step qa"},
		{"an attempt that did not answer 202", call{path: path, body: report(unaccepted.Name, promotion.DeliveryID(unaccepted, "qa", 1)), auth: signed(qaKey, time.Now())}, 409, "attempt 1 of step qa did not answer 202 Accepted"},
	} {
		rec := f.do(tc.c)
		g.Expect(rec.Code).To(Equal(tc.code), "%s: %s", tc.name, rec.Body)
		g.Expect(rec.Body.String()).To(ContainSubstring(tc.error), tc.name)
	}
	ev := f.lifecycleEvent(g, promotion.EventName(pr.Name, "qa", 2))
	g.Expect(ev.Status.Phase).To(BeEmpty(), "no refused report finished the event")

	rec := f.do(call{path: path, body: good, auth: signed(qaKey, time.Now())})
	g.Expect(rec.Code).To(Equal(http.StatusOK), rec.Body.String())
	g.Expect(decode[pipelineapi.StepReportResponse](g, rec.Body.Bytes())).To(Equal(pipelineapi.StepReportResponse{
		Promotion: pr.Name, Step: "qa", Result: "succeeded", ReportedBy: "the webhook key of Secret qa-hook", LifecycleEvent: ev.Name}))
	ev = f.lifecycleEvent(g, ev.Name)
	g.Expect(ev.Status.Phase).To(Equal(tugboatv1alpha1.EventDone))
	g.Expect(ev.Status.Message).To(Equal("the webhook key of Secret qa-hook reported succeeded: ok"))
	g.Expect(ev.Status.FinishedBy).NotTo(BeEmpty(), "the user the API server authenticated the handler's client as")

	rec = f.do(call{path: path, body: good, auth: signed(qaKey, time.Now())})
	g.Expect(rec.Code).To(Equal(http.StatusConflict), rec.Body.String())
	g.Expect(rec.Body.String()).To(ContainSubstring("is Done"))
	g.Expect(f.counter("tugboat_pipelineapi_requests_total", map[string]string{"endpoint": "steps", "code": "200"})).To(Equal(1.0))
	g.Expect(f.logged()).NotTo(ContainSubstring(webToken))
}

// FuzzDecodeStepReport feeds arbitrary bodies to the step report decoder:
// it never panics; a refusal names what is wrong; an accepted body has
// every field valid and decodes again, once encoded, to the same report.
func FuzzDecodeStepReport(f *testing.F) {
	f.Add([]byte(`{"promotion":"web-production-2.0.0","step":"qa","delivery":"0123456789abcdef0123456789abcdef","result":"succeeded","message":"ok"}`))
	f.Add([]byte(`{"promotion":"web-production-2.0.0","step":"qa","delivery":"0123456789ABCDEF0123456789ABCDEF","result":"failed"}`))
	f.Add([]byte(`{"promotion":"p","step":"qa","delivery":"0123456789abcdef0123456789abcdef","result":"succeeded","result":"failed"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, fe := pipelineapi.DecodeStepReport(body)
		if fe != nil {
			if fe.Detail == "" {
				t.Fatalf("a refusal that says nothing: %+v", fe)
			}
			if req != (pipelineapi.StepReportRequest{}) {
				t.Fatalf("a refused body decoded to %+v", req)
			}
			return
		}
		if req.Promotion == "" || req.Step == "" || len(req.Delivery) != 32 || (req.Result != "succeeded" && req.Result != "failed") || len(req.Message) > promotion.MaxReportMessage {
			t.Fatalf("accepted %+v", req)
		}
		again, fe := pipelineapi.DecodeStepReport(mustJSON(t, req))
		if fe != nil || again != req {
			t.Fatalf("%+v encoded and decoded again: %+v, %v", req, again, fe)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
