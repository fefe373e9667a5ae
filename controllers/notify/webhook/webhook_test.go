package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/notify"
	"tugboat.dev/tugboat/controllers/notify/notifytest"
	"tugboat.dev/tugboat/controllers/notify/webhook"
)

var key = []byte("0123456789abcdef0123456789abcdef")

// receiver verifies requests the way a receiver following docs/notifiers.md
// does: wire.Verifier over the raw body, then the JSON schema.
type receiver struct {
	t        *testing.T
	verifier *wire.Verifier
	mu       sync.Mutex
	status   []int // answers to give, in order; 204 once exhausted
	bodies   [][]byte
	headers  []http.Header
	verified []error
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, body)
	r.headers = append(r.headers, req.Header.Clone())
	if err := r.verifier.VerifyRequest(req, body); err != nil {
		r.verified = append(r.verified, err)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	r.verified = append(r.verified, nil)
	status := http.StatusNoContent
	if len(r.status) > 0 {
		status, r.status = r.status[0], r.status[1:]
	}
	switch status {
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "7")
	}
	w.WriteHeader(status)
	if status >= 400 {
		_, _ = io.WriteString(w, "upstream \x1b[31mfailed\x00\n"+strings.Repeat("x", 1000))
	}
}

func newReceiver(t *testing.T, status ...int) (*receiver, *httptest.Server) {
	v, err := wire.NewVerifier(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, verifier: v, status: status}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func TestWebhook_signedSchemaRoundTrips(t *testing.T) {
	g := NewWithT(t)
	r, srv := newReceiver(t)
	w, err := webhook.New(webhook.Options{URL: srv.URL + "/hooks/tugboat?team=platform", Key: key})
	g.Expect(err).NotTo(HaveOccurred())

	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionSucceeded)
	d, err := w.Notify(context.Background(), n, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Reference).To(BeEmpty())

	g.Expect(r.verified).To(Equal([]error{nil}), "the signature verifies with api/wire's verifier")
	g.Expect(r.headers[0].Get("Content-Type")).To(Equal("application/json"))
	g.Expect(r.headers[0].Get(webhook.HeaderEvent)).To(Equal("PromotionSucceeded"))
	g.Expect(r.headers[0].Get(webhook.HeaderDelivery)).To(Equal(notify.ID(n)))

	// The body decodes into the documented type and equals what was built.
	var got webhook.Payload
	dec := json.NewDecoder(strings.NewReader(string(r.bodies[0])))
	dec.DisallowUnknownFields()
	g.Expect(dec.Decode(&got)).To(Succeed())
	g.Expect(got).To(Equal(webhook.NewPayload(n)))
	g.Expect(got.APIVersion).To(Equal("notify.tugboat.dev/v1"))
	g.Expect(got.Kind).To(Equal("Notice"))
	g.Expect(got.Timeline).To(HaveLen(len(n.Timeline)))
	g.Expect(got.Promotion.Votes).To(HaveLen(2))

	// The field names are the documented ones.
	var raw map[string]any
	g.Expect(json.Unmarshal(r.bodies[0], &raw)).To(Succeed())
	g.Expect(raw).To(HaveKeyWithValue("event", "PromotionSucceeded"))
	g.Expect(raw).To(HaveKeyWithValue("time", "2026-11-02T09:30:00Z"))
	g.Expect(raw).To(HaveKeyWithValue("severity", "info"))
	g.Expect(raw).To(HaveKeyWithValue("pipeline", map[string]any{"namespace": "apps", "name": "web", "release": "web"}))
	g.Expect(raw["promotion"]).To(HaveKeyWithValue("url", "https://git.example.com/org/fleet/pulls/42"))
	g.Expect(raw["promotion"]).To(HaveKeyWithValue("approvedBy", "U024BE7LH"))
	g.Expect(raw["targets"].([]any)[0]).To(HaveKeyWithValue("health", "Current"))
	g.Expect(raw["timeline"].([]any)[5]).To(Equal(map[string]any{
		"time": "2026-11-02T09:28:10Z", "source": "prod-eu/apps/web", "text": "Pod web-7d9f-x created",
	}))
}

func TestWebhook_tamperedBodyFailsVerification(t *testing.T) {
	g := NewWithT(t)
	v, err := wire.NewVerifier(key, nil)
	g.Expect(err).NotTo(HaveOccurred())
	var verr error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		verr = v.VerifyRequest(req, append(body, ' '))
	}))
	defer srv.Close()
	w, err := webhook.New(webhook.Options{URL: srv.URL, Key: key})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = w.Notify(context.Background(), notifytest.Deployment(tugboatv1alpha1.EventDeploymentHealthy), "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(verr).To(MatchError(wire.ErrSignatureMismatch), "the check above is able to fail")
}

func TestWebhook_answers(t *testing.T) {
	ctx := context.Background()
	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionFailed)

	t.Run("5xx is retried", func(t *testing.T) {
		g := NewWithT(t)
		_, srv := newReceiver(t, http.StatusInternalServerError)
		w, _ := webhook.New(webhook.Options{URL: srv.URL, Key: key})
		_, err := w.Notify(ctx, n, "")
		g.Expect(err).To(HaveOccurred())
		g.Expect(notify.IsPermanent(err)).To(BeFalse())
		_, isRetryAfter := notify.RetryAfter(err)
		g.Expect(isRetryAfter).To(BeFalse())
		g.Expect(err.Error()).To(HavePrefix("webhook " + srv.URL + " answered 500 Internal Server Error: upstream [31mfailed"))
		excerpt := err.Error()[strings.Index(err.Error(), ": ")+2:]
		g.Expect(len([]rune(excerpt))).To(BeNumerically("<=", 200))
		g.Expect(excerpt).NotTo(ContainSubstring("\x1b"))
		g.Expect(excerpt).NotTo(ContainSubstring("\x00"))
	})

	t.Run("4xx is permanent", func(t *testing.T) {
		g := NewWithT(t)
		_, srv := newReceiver(t, http.StatusNotFound)
		w, _ := webhook.New(webhook.Options{URL: srv.URL, Key: key})
		_, err := w.Notify(ctx, n, "")
		g.Expect(notify.IsPermanent(err)).To(BeTrue())
	})

	t.Run("a bad signature is permanent", func(t *testing.T) {
		g := NewWithT(t)
		_, srv := newReceiver(t)
		w, _ := webhook.New(webhook.Options{URL: srv.URL, Key: []byte("another key of 32 bytes, at that")})
		_, err := w.Notify(ctx, n, "")
		g.Expect(notify.IsPermanent(err)).To(BeTrue())
		g.Expect(err).To(MatchError(ContainSubstring("401 Unauthorized")))
	})

	t.Run("429 asks to come back", func(t *testing.T) {
		g := NewWithT(t)
		r, srv := newReceiver(t, http.StatusTooManyRequests)
		w, _ := webhook.New(webhook.Options{URL: srv.URL, Key: key})
		_, err := w.Notify(ctx, n, "")
		after, ok := notify.RetryAfter(err)
		g.Expect(ok).To(BeTrue())
		g.Expect(after).To(Equal(7 * time.Second))
		g.Expect(notify.IsPermanent(err)).To(BeFalse())

		_, err = w.Notify(ctx, n, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.bodies[0]).To(Equal(r.bodies[1]), "a redelivery is the same notice")
	})

	t.Run("a redirect is permanent and not followed", func(t *testing.T) {
		g := NewWithT(t)
		r, target := newReceiver(t)
		srv := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
		defer srv.Close()
		w, _ := webhook.New(webhook.Options{URL: srv.URL, Key: key})
		_, err := w.Notify(ctx, n, "")
		g.Expect(notify.IsPermanent(err)).To(BeTrue())
		g.Expect(r.bodies).To(BeEmpty())
	})
}

func TestWebhook_errorsHideTheQuery(t *testing.T) {
	g := NewWithT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())

	w, err := webhook.New(webhook.Options{URL: "http://user:pw@" + addr + "/hook?token=s3cr3t-t0ken&x=1"})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = w.Notify(context.Background(), notifytest.Deployment(tugboatv1alpha1.EventDeploymentStarted), "")
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
	g.Expect(notify.IsPermanent(err)).To(BeFalse())
	g.Expect(err.Error()).To(ContainSubstring("http://" + addr + "/hook"))
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3t"))
	g.Expect(err.Error()).NotTo(ContainSubstring("pw"))

	_, err = webhook.New(webhook.Options{URL: "ftp://example.com/?token=s3cr3t"})
	g.Expect(notify.IsPermanent(err)).To(BeTrue())
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3t"))
}

func TestWebhook_unsignedWithoutKey(t *testing.T) {
	g := NewWithT(t)
	var h http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { h = req.Header.Clone() }))
	defer srv.Close()
	w, err := webhook.New(webhook.Options{URL: srv.URL})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = w.Notify(context.Background(), notifytest.Deployment(tugboatv1alpha1.EventDeploymentStarted), "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.Get(wire.HeaderSignature)).To(BeEmpty())
}

func TestWebhook_refusesAShortKey(t *testing.T) {
	g := NewWithT(t)
	_, err := webhook.New(webhook.Options{URL: "https://ci.example.com/hook", Key: []byte("a key of twenty bytes")})
	g.Expect(err).To(MatchError(ContainSubstring("webhook key holds 21 bytes; at least 32 are required")))
	var perm *notify.PermanentError
	g.Expect(errors.As(err, &perm)).To(BeTrue(), "a configuration error, not retried")
}
