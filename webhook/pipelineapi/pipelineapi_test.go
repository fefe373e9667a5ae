package pipelineapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/webhook/pipelineapi"
)

func decode[T any](g Gomega, body []byte) T {
	var v T
	g.Expect(json.Unmarshal(body, &v)).To(Succeed(), string(body))
	return v
}

func TestPipelineAPI_createsACIPromotionWithABearerToken(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, "api-bearer")
	body := []byte(`{"environment":"production","version":"1.4.0","requester":"ci-job-123"}`)

	rec := f.do(call{path: f.path("web", "promotions"), body: body, auth: bearer(webToken)})
	g.Expect(rec.Code).To(Equal(http.StatusCreated), rec.Body.String())
	g.Expect(rec.Header().Get("Content-Type")).To(Equal("application/json"))
	resp := decode[pipelineapi.PromotionResponse](g, rec.Body.Bytes())
	g.Expect(resp.Promotion).To(Equal(pipeline.PromotionName("web", "production", "1.4.0")))

	pr := f.promotion(resp.Promotion)
	g.Expect(pr.Spec.RequestedBy).To(Equal(tugboatv1alpha1.RequestedByCI))
	g.Expect(pr.Spec.Requester).To(Equal("ci-job-123"))
	g.Expect(pr.Spec.From).To(Equal("staging"))
	g.Expect(pr.Spec.Version).To(Equal("1.4.0"))
	g.Expect(pr.OwnerReferences).To(HaveLen(1))

	again := f.do(call{path: f.path("web", "promotions"), body: body, auth: bearer(webToken)})
	g.Expect(again.Code).To(Equal(http.StatusOK), again.Body.String())
	g.Expect(decode[pipelineapi.PromotionResponse](g, again.Body.Bytes()).Promotion).To(Equal(resp.Promotion))
	g.Expect(f.promotions()).To(HaveLen(1))

	g.Expect(f.counter("tugboat_pipelineapi_requests_total", map[string]string{"endpoint": "promotions", "code": "201"})).To(Equal(1.0))
	g.Expect(f.counter("tugboat_pipelineapi_requests_total", map[string]string{"endpoint": "promotions", "code": "200"})).To(Equal(1.0))
	g.Expect(f.logged()).NotTo(ContainSubstring(webToken))
}

func TestPipelineAPI_createsACIPromotionWithAnHMACSignature(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, "api-hmac")
	body := []byte(`{"environment":"staging","version":"2.0.0-rc.1"}`)

	rec := f.do(call{path: f.path("web", "promotions"), body: body, auth: signed(webKey, time.Now().Add(-4*time.Minute))})
	g.Expect(rec.Code).To(Equal(http.StatusCreated), rec.Body.String())
	name := decode[pipelineapi.PromotionResponse](g, rec.Body.Bytes()).Promotion
	g.Expect(f.promotion(name).Spec.To).To(Equal("staging"))
	g.Expect(f.promotion(name).Spec.Requester).To(BeEmpty())
}

func TestPipelineAPI_approvesAndRejectsWithAnApprovalCredential(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, "api-approvals")
	create := func(version string) string {
		rec := f.do(call{path: f.path("web", "promotions"), auth: bearer(webToken),
			body: []byte(`{"environment":"production","version":"` + version + `"}`)})
		g.Expect(rec.Code).To(Equal(http.StatusCreated), rec.Body.String())
		return decode[pipelineapi.PromotionResponse](g, rec.Body.Bytes()).Promotion
	}
	decide := func(name string, approve bool, auth authFunc) (int, string) {
		b, _ := json.Marshal(map[string]any{"promotion": name, "approve": approve, "message": "gate passed"})
		rec := f.do(call{path: f.path("web", "approvals"), body: b, auth: auth})
		return rec.Code, rec.Body.String()
	}

	approved := create("1.4.0")
	f.setPhase(approved, tugboatv1alpha1.PromotionWaitingApproval)
	code, body := decide(approved, true, signed([]byte(releaseBotToken), time.Now()))
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(decode[pipelineapi.ApprovalResponse](g, []byte(body))).To(Equal(pipelineapi.ApprovalResponse{
		Promotion: approved, Decision: "approved", DecidedBy: "release-bot", Gate: "1 of 1 approval (release-bot)"}))
	pr := f.promotion(approved)
	g.Expect(pr.Status.Approvals).To(HaveLen(1))
	v := pr.Status.Approvals[0]
	g.Expect(v.User).To(Equal("release-bot"), "recorded under the credential's name")
	g.Expect(v.Source).To(Equal(tugboatv1alpha1.ApprovalSourceCI))
	g.Expect(v.Decision).To(Equal(tugboatv1alpha1.DecisionApprove))
	g.Expect(v.Message).To(Equal("gate passed"))
	g.Expect(pr.Status.Approval).To(BeNil(), "the hub's controller writes the outcome")

	code, body = decide(approved, true, bearer(releaseBotToken))
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(f.promotion(approved).Status.Approvals).To(HaveLen(1), "the same vote again changes nothing")

	code, body = decide(approved, false, bearer(releaseBotToken))
	g.Expect(code).To(Equal(http.StatusConflict), body)
	g.Expect(body).To(ContainSubstring("was already approved by release-bot: a decision cannot be changed"))

	rejected := create("1.5.0") // Pending, gated: a decision may come early
	code, body = decide(rejected, false, bearer(releaseBotToken))
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(decode[pipelineapi.ApprovalResponse](g, []byte(body)).Decision).To(Equal("rejected"))
	g.Expect(f.promotion(rejected).Status.Approvals[0].Decision).To(Equal(tugboatv1alpha1.DecisionReject))

	running := create("1.6.0")
	f.setPhase(running, tugboatv1alpha1.PromotionRunning)
	code, body = decide(running, true, bearer(releaseBotToken))
	g.Expect(code).To(Equal(http.StatusConflict), body)
	g.Expect(decode[wire.ErrorResponse](g, []byte(body)).Error).To(Equal("promotion " + running + " is Running, not waiting for approval"))
	g.Expect(f.promotion(running).Status.Approvals).To(BeEmpty())

	g.Expect(f.counter("tugboat_pipelineapi_requests_total", map[string]string{"endpoint": "approvals", "code": "200"})).To(Equal(3.0))
	g.Expect(f.counter("tugboat_pipelineapi_requests_total", map[string]string{"endpoint": "approvals", "code": "409"})).To(Equal(2.0))
	g.Expect(f.logged()).NotTo(ContainSubstring(releaseBotToken))
}

// TestPipelineAPI_approvalsNeedAListedApprovalCredential: the token that
// requests promotions cannot approve them (403 saying so), a credential
// not listed for the environment gets 403, and nothing changes.
func TestPipelineAPI_approvalsNeedAListedApprovalCredential(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, "api-approval-auth")
	rec := f.do(call{path: f.path("web", "promotions"), auth: bearer(webToken), body: []byte(`{"environment":"production","version":"1.4.0"}`)})
	g.Expect(rec.Code).To(Equal(http.StatusCreated), rec.Body.String())
	name := decode[pipelineapi.PromotionResponse](g, rec.Body.Bytes()).Promotion
	f.setPhase(name, tugboatv1alpha1.PromotionWaitingApproval)
	body := []byte(`{"promotion":"` + name + `","approve":true}`)

	for _, tc := range []struct {
		name  string
		path  string
		auth  authFunc
		code  int
		error string
	}{
		{"the request token", f.path("web", "approvals"), bearer(webToken), 403, "this credential requests promotions and cannot approve them"},
		{"signed with the request key", f.path("web", "approvals"), signed(webKey, time.Now()), 403, "authenticate approvals with an approval credential of the Pipeline's spec.approvalSecretRef"},
		{"a request token where no approval credential exists", f.path("other", "approvals"), bearer(otherToken), 403, "cannot approve them"},
		{"an unlisted approval credential", f.path("web", "approvals"), bearer(deployBotToken), 403, "CI identity deploy-bot is not an approver of production"},
		{"an unlisted approval credential, signed", f.path("web", "approvals"), signed([]byte(deployBotToken), time.Now()), 403, "not an approver"},
		{"an unknown token", f.path("web", "approvals"), bearer("release-bot"), 401, "request not authenticated"},
		{"an approval credential, stale", f.path("web", "approvals"), signed([]byte(releaseBotToken), time.Now().Add(-10*time.Minute)), 401, "request not authenticated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			before := f.promotions()
			rec := f.do(call{path: tc.path, body: body, auth: tc.auth})
			g.Expect(rec.Code).To(Equal(tc.code), rec.Body.String())
			g.Expect(decode[wire.ErrorResponse](g, rec.Body.Bytes()).Error).To(ContainSubstring(tc.error))
			g.Expect(f.promotions()).To(Equal(before), "nothing changed")
		})
	}
	g.Expect(f.promotion(name).Status.Approvals).To(BeEmpty())
	g.Expect(f.counter("tugboat_pipelineapi_auth_failures_total", map[string]string{"reason": "request_credential_cannot_approve"})).To(Equal(3.0))

	// An approval credential cannot request promotions either.
	rec = f.do(call{path: f.path("web", "promotions"), auth: bearer(releaseBotToken), body: []byte(`{"environment":"staging","version":"1.4.0"}`)})
	g.Expect(rec.Code).To(Equal(http.StatusUnauthorized), rec.Body.String())
}

// TestPipelineAPI_refusesBadRequestsAndChangesNothing sends one bad request
// per row and checks the status, the body and that no Promotion changed.
func TestPipelineAPI_refusesBadRequestsAndChangesNothing(t *testing.T) {
	f := newFixture(t, "api-bad")
	g := NewWithT(t)
	// A Promotion of "web" waiting for approval, one running, and one of
	// "other" waiting: targets for the approval rows.
	mk := func(pipe, token, version string, phase tugboatv1alpha1.PromotionPhase) string {
		rec := f.do(call{path: f.path(pipe, "promotions"), auth: bearer(token),
			body: []byte(`{"environment":"production","version":"` + version + `"}`)})
		g.Expect(rec.Code).To(Equal(http.StatusCreated), rec.Body.String())
		name := decode[pipelineapi.PromotionResponse](g, rec.Body.Bytes()).Promotion
		f.setPhase(name, phase)
		return name
	}
	waiting := mk("web", webToken, "1.0.0", tugboatv1alpha1.PromotionWaitingApproval)
	running := mk("web", webToken, "1.1.0", tugboatv1alpha1.PromotionRunning)
	othersWaiting := mk("other", otherToken, "1.0.0", tugboatv1alpha1.PromotionWaitingApproval)

	promotions := f.path("web", "promotions")
	approvals := f.path("web", "approvals")
	good := []byte(`{"environment":"staging","version":"1.2.0"}`)
	approve := func(name string) []byte {
		return []byte(`{"promotion":"` + name + `","approve":true}`)
	}
	now := time.Now()
	tok := bearer(webToken)
	atok := bearer(releaseBotToken)

	for _, tc := range []struct {
		name  string
		call  call
		code  int
		field string // for 400: the field named
		error string // substring of the error
	}{
		{name: "GET", call: call{method: http.MethodGet, path: promotions, auth: tok}, code: 405, error: "use POST"},
		{name: "PUT approvals", call: call{method: http.MethodPut, path: approvals, body: approve(waiting), auth: tok}, code: 405},
		{name: "unknown endpoint", call: call{path: f.path("web", "rollbacks"), body: good, auth: tok}, code: 404, error: "no such endpoint"},
		{name: "no endpoint", call: call{path: "/v1/pipelines/" + f.ns + "/web", body: good, auth: tok}, code: 404, error: "no such endpoint"},
		{name: "extra segment", call: call{path: promotions + "/x", body: good, auth: tok}, code: 404, error: "no such endpoint"},
		{name: "text/plain", call: call{path: promotions, contentType: "text/plain", body: good, auth: tok}, code: 415},
		{name: "form", call: call{path: promotions, contentType: "application/x-www-form-urlencoded", body: good, auth: tok}, code: 415},
		{name: "no Content-Type", call: call{path: promotions, contentType: "-", body: good, auth: tok}, code: 415},
		{name: "gzip", call: call{path: promotions, encoding: "gzip", body: good, auth: tok}, code: 415},
		{name: "body over 64 KiB", call: call{path: promotions, body: []byte(`{"requester":"` + strings.Repeat("x", 64<<10) + `"}`), auth: tok}, code: 413},

		{name: "no credentials", call: call{path: promotions, body: good}, code: 401},
		{name: "wrong token", call: call{path: promotions, body: good, auth: bearer("nope")}, code: 401},
		{name: "token with a suffix", call: call{path: promotions, body: good, auth: bearer(webToken + "x")}, code: 401},
		{name: "another pipeline's token", call: call{path: promotions, body: good, auth: bearer(otherToken)}, code: 401},
		{name: "basic auth", call: call{path: promotions, body: good, auth: func(r *http.Request, _ []byte) { r.SetBasicAuth("ci", webToken) }}, code: 401},
		{name: "a stored token shorter than 32 bytes", call: call{path: f.path("short", "promotions"), body: good, auth: bearer(shortToken)}, code: 401},
		{name: "bearer without token", call: call{path: promotions, body: good, auth: func(r *http.Request, _ []byte) { r.Header.Set("Authorization", "Bearer ") }}, code: 401},
		{name: "wrong bearer wins over a good signature", call: call{path: promotions, body: good, auth: func(r *http.Request, b []byte) {
			wire.SignRequest(r, webKey, b, now)
			r.Header.Set("Authorization", "Bearer nope")
		}}, code: 401},
		{name: "unknown pipeline", call: call{path: f.path("ghost", "promotions"), body: good, auth: tok}, code: 401},
		{name: "unknown namespace", call: call{path: "/v1/pipelines/nowhere/web/promotions", body: good, auth: tok}, code: 401},
		{name: "invalid pipeline name", call: call{path: "/v1/pipelines/" + f.ns + "/We%2Fb/promotions", body: good, auth: tok}, code: 401},
		{name: "pipeline whose Secret is missing", call: call{path: f.path("dangling", "promotions"), body: good, auth: tok}, code: 401},
		{name: "signed for a pipeline without HMAC key", call: call{path: f.path("other", "promotions"), body: good, auth: signed(webKey, now)}, code: 401},
		{name: "pipeline without secretRef", call: call{path: f.path("open", "promotions"), body: good, auth: tok}, code: 401},
		{name: "signed with the wrong key", call: call{path: promotions, body: good, auth: signed([]byte("another-key-0123456789abcdef"), now)}, code: 401},
		{name: "signature 6 minutes old", call: call{path: promotions, body: good, auth: signed(webKey, now.Add(-6*time.Minute))}, code: 401},
		{name: "signature from the future", call: call{path: promotions, body: good, auth: signed(webKey, now.Add(6*time.Minute))}, code: 401},
		{name: "signature for another path", call: call{path: promotions, body: good, auth: func(r *http.Request, b []byte) {
			r.Header.Set(wire.HeaderTimestamp, strconvUnix(now))
			r.Header.Set(wire.HeaderSignature, wire.Sign(webKey, now, http.MethodPost, approvals, b))
		}}, code: 401},
		{name: "signature over another body", call: call{path: promotions, body: good, auth: func(r *http.Request, _ []byte) {
			wire.SignRequest(r, webKey, []byte(`{"environment":"dev","version":"1.2.0"}`), now)
		}}, code: 401},
		{name: "timestamp without signature", call: call{path: promotions, body: good, auth: func(r *http.Request, _ []byte) {
			r.Header.Set(wire.HeaderTimestamp, strconvUnix(now))
		}}, code: 401},

		{name: "malformed JSON", call: call{path: promotions, body: []byte(`{"environment":`), auth: tok}, code: 400, error: "malformed JSON"},
		{name: "empty body", call: call{path: promotions, auth: tok}, code: 400, error: "JSON object"},
		{name: "array body", call: call{path: promotions, body: []byte(`[{"environment":"staging"}]`), auth: tok}, code: 400, error: "JSON object"},
		{name: "null body", call: call{path: promotions, body: []byte(`null`), auth: tok}, code: 400, error: "JSON object"},
		{name: "trailing data", call: call{path: promotions, body: append(append([]byte{}, good...), `{}`...), auth: tok}, code: 400, error: "malformed JSON"},
		{name: "unknown field", call: call{path: promotions, body: []byte(`{"environment":"staging","version":"1.2.0","branch":"main"}`), auth: tok}, code: 400, field: "branch", error: "unknown field"},
		{name: "field in another case", call: call{path: promotions, body: []byte(`{"Environment":"staging","version":"1.2.0"}`), auth: tok}, code: 400, field: "Environment", error: "unknown field"},
		{name: "duplicate field", call: call{path: promotions, body: []byte(`{"environment":"staging","environment":"production","version":"1.2.0"}`), auth: tok}, code: 400, field: "environment", error: "duplicate field"},
		{name: "version as a number", call: call{path: promotions, body: []byte(`{"environment":"staging","version":1.2}`), auth: tok}, code: 400, field: "version", error: "must be a string"},
		{name: "no environment", call: call{path: promotions, body: []byte(`{"version":"1.2.0"}`), auth: tok}, code: 400, field: "environment", error: "required"},
		{name: "unknown environment", call: call{path: promotions, body: []byte(`{"environment":"qa","version":"1.2.0"}`), auth: tok}, code: 400, field: "environment", error: `no environment "qa"`},
		{name: "no version", call: call{path: promotions, body: []byte(`{"environment":"staging"}`), auth: tok}, code: 400, field: "version", error: "required"},
		{name: "bad version", call: call{path: promotions, body: []byte(`{"environment":"staging","version":"1.2.0; rm -rf /"}`), auth: tok}, code: 400, field: "version", error: "not a chart version"},
		{name: "version too long", call: call{path: promotions, body: []byte(`{"environment":"staging","version":"` + strings.Repeat("9", 65) + `"}`), auth: tok}, code: 400, field: "version", error: "at most 64"},
		{name: "requester too long", call: call{path: promotions, body: []byte(`{"environment":"staging","version":"1.2.0","requester":"` + strings.Repeat("r", 257) + `"}`), auth: tok}, code: 400, field: "requester"},

		{name: "approval without promotion", call: call{path: approvals, body: []byte(`{"approve":true}`), auth: atok}, code: 400, field: "promotion", error: "required"},
		{name: "approval of an invalid name", call: call{path: approvals, body: []byte(`{"promotion":"../x","approve":true}`), auth: atok}, code: 400, field: "promotion"},
		{name: "approval without approve", call: call{path: approvals, body: []byte(`{"promotion":"` + waiting + `"}`), auth: atok}, code: 400, field: "approve", error: "required"},
		{name: "approve as a string", call: call{path: approvals, body: []byte(`{"promotion":"` + waiting + `","approve":"yes"}`), auth: atok}, code: 400, field: "approve", error: "must be a boolean"},
		{name: "approval naming an approver", call: call{path: approvals, body: []byte(`{"promotion":"` + waiting + `","approve":true,"approver":"alice"}`), auth: atok}, code: 400, field: "approver", error: "no longer accepted: the decision is recorded under the name of the approval credential"},
		{name: "approval message too long", call: call{path: approvals, body: []byte(`{"promotion":"` + waiting + `","approve":true,"message":"` + strings.Repeat("m", 1025) + `"}`), auth: atok}, code: 400, field: "message"},
		{name: "approval with a promotion's field", call: call{path: approvals, body: []byte(`{"promotion":"` + waiting + `","approve":true,"version":"1"}`), auth: atok}, code: 400, field: "version", error: "unknown field"},
		{name: "approval of an unknown promotion", call: call{path: approvals, body: approve("web-production-9.9.9"), auth: atok}, code: 404, error: "promotion " + f.ns + "/web-production-9.9.9 not found"},
		{name: "approval of another pipeline's promotion", call: call{path: approvals, body: approve(othersWaiting), auth: atok}, code: 404, error: "not found"},
		{name: "approval of a running promotion", call: call{path: approvals, body: approve(running), auth: atok}, code: 409, error: "is Running, not waiting for approval"},
		{name: "approval without credentials", call: call{path: approvals, body: approve(waiting)}, code: 401},
		{name: "approval with the other pipeline's token", call: call{path: f.path("other", "approvals"), body: approve(waiting), auth: tok}, code: 401},
		{name: "approval with an approval credential on another pipeline", call: call{path: f.path("other", "approvals"), body: approve(othersWaiting), auth: atok}, code: 401},
		{name: "approval with the request token", call: call{path: approvals, body: approve(waiting), auth: tok}, code: 403, error: "this credential requests promotions and cannot approve them"},
		{name: "approval by an unlisted credential", call: call{path: approvals, body: approve(waiting), auth: bearer(deployBotToken)}, code: 403, error: "deploy-bot is not an approver of production"},
		{name: "promotion with an approval credential", call: call{path: promotions, body: good, auth: atok}, code: 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			before := f.promotions()
			rec := f.do(tc.call)
			g.Expect(rec.Code).To(Equal(tc.code), rec.Body.String())
			g.Expect(rec.Header().Get("Content-Type")).To(Equal("application/json"))
			resp := decode[wire.ErrorResponse](g, rec.Body.Bytes())
			switch tc.code {
			case http.StatusUnauthorized:
				g.Expect(rec.Body.String()).To(Equal(`{"error":"request not authenticated"}`+"\n"), "every 401 looks alike")
			case http.StatusMethodNotAllowed:
				g.Expect(rec.Header().Get("Allow")).To(Equal("POST"))
			case http.StatusBadRequest:
				if tc.field != "" {
					g.Expect(resp.Fields).To(HaveLen(1))
					g.Expect(resp.Fields[0].Field).To(Equal(tc.field))
				}
			}
			g.Expect(resp.Error).To(ContainSubstring(tc.error))
			g.Expect(f.promotions()).To(Equal(before), "nothing changed")
		})
	}
	g.Expect(f.logged()).NotTo(ContainSubstring(webToken))
	g.Expect(f.logged()).NotTo(ContainSubstring(otherToken))
	g.Expect(f.counter("tugboat_pipelineapi_auth_failures_total", map[string]string{"reason": "unknown_pipeline"})).To(Equal(3.0))
	g.Expect(f.counter("tugboat_pipelineapi_auth_failures_total", map[string]string{"reason": "stale_timestamp"})).To(Equal(2.0))
	g.Expect(f.counter("tugboat_pipelineapi_requests_total", map[string]string{"endpoint": "other", "code": "404"})).To(Equal(3.0))
}

func strconvUnix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
