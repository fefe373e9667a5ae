package pipelineapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/netip"
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

// TestPipelineAPI_rateLimitsTheClientBehindATrustedProxy: behind an ingress
// every connection comes from the ingress. With the ingress among the
// trusted proxies, the client is the address X-Forwarded-For names, so an
// anonymous flood through the same ingress does not lock the real CI out;
// X-Forwarded-For from an untrusted peer is ignored, so a client cannot
// escape its own bucket by writing another address (security review 3, low 4).
func TestPipelineAPI_rateLimitsTheClientBehindATrustedProxy(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, "api-ratelimit-proxy")
	now := time.Now()
	h := pipelineapi.New(cluster.Client, cluster.Client, pipelineapi.Options{
		RateLimit: 0.5, RateBurst: 3, Clock: func() time.Time { return now }, Registerer: f.reg,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	})
	serve := func(r *http.Request) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	via := func(peer string, forwardedFor ...string) *http.Request {
		r := from(f.ns, peer)
		for _, v := range forwardedFor {
			r.Header.Add("X-Forwarded-For", v)
		}
		return r
	}
	// An attacker behind the ingress spends their own bucket...
	for range 3 {
		g.Expect(serve(via("10.1.2.3:443", "198.51.100.66"))).To(Equal(http.StatusUnauthorized))
	}
	g.Expect(serve(via("10.1.2.3:443", "198.51.100.66"))).To(Equal(http.StatusTooManyRequests))
	// ...not the CI's, behind the same ingress (two proxies deep, the
	// client's own claim on the left ignored).
	g.Expect(serve(via("10.1.2.3:443", "6.6.6.6, 203.0.113.9", "10.9.9.9"))).To(Equal(http.StatusUnauthorized))
	// An untrusted peer's X-Forwarded-For is ignored: its bucket is its own.
	for range 3 {
		g.Expect(serve(via("198.51.100.7:4000", "203.0.113.50"))).To(Equal(http.StatusUnauthorized))
	}
	g.Expect(serve(via("198.51.100.7:4000", "203.0.113.51"))).To(Equal(http.StatusTooManyRequests))
}
