package pipelineapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/webhook/pipelineapi"
)

// from is an anonymous promotion request of Pipeline web in ns from addr.
func from(ns, addr string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://hub.example/v1/pipelines/"+ns+"/web/promotions",
		bytes.NewReader([]byte(`{"environment":"staging","version":"1.0.0"}`)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer not-the-token")
	r.RemoteAddr = addr
	return r
}

// TestPipelineAPI_rateLimitsEachClient is issue 12 Low 3: past its burst, a
// client gets 429 with Retry-After (before its body is read or checked),
// while another client is still served.
func TestPipelineAPI_rateLimitsEachClient(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, "api-ratelimit")
	now := time.Now()
	h := pipelineapi.New(cluster.Client, cluster.Client, pipelineapi.Options{
		RateLimit: 0.5, RateBurst: 3, Clock: func() time.Time { return now }, Registerer: f.reg,
	})
	serve := func(r *http.Request) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	for i := range 3 {
		g.Expect(serve(from(f.ns, "198.51.100.7:4000")).Code).To(Equal(http.StatusUnauthorized), "request %d", i)
	}
	rec := serve(from(f.ns, "198.51.100.7:4001")) // same client, another port
	g.Expect(rec.Code).To(Equal(http.StatusTooManyRequests), rec.Body.String())
	g.Expect(rec.Header().Get("Retry-After")).To(Equal("2"))
	g.Expect(rec.Body.String()).To(ContainSubstring("rate limit exceeded for this client"))
	g.Expect(f.counter("tugboat_pipelineapi_rate_limited_total", nil)).To(Equal(1.0))
	g.Expect(serve(from(f.ns, "203.0.113.9:4000")).Code).To(Equal(http.StatusUnauthorized), "another client")

	// Two seconds later the client has a token again.
	now = now.Add(2 * time.Second)
	g.Expect(serve(from(f.ns, "198.51.100.7:4000")).Code).To(Equal(http.StatusUnauthorized))
	g.Expect(f.promotions()).To(BeEmpty())
}

// TestPipelineAPI_anonymousRequestsAreServedFromTheCache is issue 12 Low 3:
// anonymous requests read the Pipeline through the cached client and its
// Secret from the handler's cache, so a flood of them costs the API server
// one Secret read per cache period, not one per request.
func TestPipelineAPI_anonymousRequestsAreServedFromTheCache(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, "api-cache")
	reader := harness.CountGets[*corev1.Secret](cluster.Client)
	h := pipelineapi.New(cluster.Client, reader, pipelineapi.Options{RateBurst: 1000, Registerer: f.reg})
	for range 50 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, from(f.ns, "198.51.100.7:4000"))
		g.Expect(rec.Code).To(Equal(http.StatusUnauthorized))
	}
	g.Expect(reader.Total()).To(BeEquivalentTo(1))
	// The token still works.
	rec := f.do(call{path: f.path("web", "promotions"), body: []byte(`{"environment":"staging","version":"1.0.0"}`), auth: bearer(webToken)})
	g.Expect(rec.Code).To(Equal(http.StatusCreated), rec.Body.String())
}
