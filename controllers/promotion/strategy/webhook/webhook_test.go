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

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/controllers/promotion/strategy/webhook"
)

var key = []byte("0123456789abcdef0123456789abcdef")

// hub stores the Secrets the strategy reads. controller-runtime's fake
// client is enough here: Secret storage is not what these tests are about,
// and the strategy only Gets a Secret by name (the kubernetes strategy's
// tests read Secrets from a real API server).
func hub(secrets ...*corev1.Secret) client.Reader {
	objs := make([]client.Object, 0, len(secrets))
	for _, s := range secrets {
		objs = append(objs, s)
	}
	return fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build()
}

func keySecret(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "ci-hook"}, Data: data}
}

func request(url string, secretRef bool, reader client.Reader) strategy.Request {
	cfg := &tugboatv1alpha1.WebhookStrategy{URL: url}
	if secretRef {
		cfg.SecretRef = &tugboatv1alpha1.LocalSecretReference{Name: "ci-hook"}
	}
	return strategy.Request{
		Promotion: &tugboatv1alpha1.Promotion{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-production-1-4-0"},
			Spec: tugboatv1alpha1.PromotionSpec{
				Pipeline: "web", From: "staging", To: "production", Version: "1.4.0",
				RequestedBy: tugboatv1alpha1.RequestedByAuto,
			},
		},
		Pipeline: &tugboatv1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"},
			Spec:       tugboatv1alpha1.PipelineSpec{Release: "web"},
		},
		Environment: &tugboatv1alpha1.Environment{Name: "production"},
		Targets: []strategy.Target{
			{SpokeName: "prod-eu", Namespace: "web", Release: "web", HelmRelease: &tugboatv1alpha1.ObjectReference{Name: "web"}},
			{SpokeName: "prod-us", Namespace: "web"},
		},
		Version:  "1.4.0",
		Strategy: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyWebhook, Webhook: cfg},
		Hub:      reader,
	}
}

// receiver is a CI endpoint that verifies what it receives the way a
// tugboat-aware receiver would, then answers with the next status.
type receiver struct {
	t        *testing.T
	verifier *wire.Verifier // nil: expect an unsigned request
	statuses []int
	respond  func(w http.ResponseWriter)

	mu         sync.Mutex
	calls      int
	bodies     []string
	deliveries []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.calls++
	n := rc.calls
	rc.bodies = append(rc.bodies, string(body))
	rc.deliveries = append(rc.deliveries, r.Header.Get(webhook.HeaderDelivery))
	rc.mu.Unlock()
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "want a JSON POST", http.StatusMethodNotAllowed)
		return
	}
	if rc.verifier != nil {
		if err := rc.verifier.VerifyRequest(r, body); err != nil {
			var ve *wire.VerifyError
			_ = errors.As(err, &ve)
			http.Error(w, "signature: "+ve.Reason(), http.StatusUnauthorized)
			return
		}
	} else if r.Header.Get(wire.HeaderSignature) != "" {
		http.Error(w, "unexpected signature", http.StatusBadRequest)
		return
	}
	status := http.StatusOK
	if n <= len(rc.statuses) {
		status = rc.statuses[n-1]
	}
	if status == http.StatusOK && rc.respond != nil {
		rc.respond(w)
		return
	}
	w.WriteHeader(status)
}

func newReceiver(t *testing.T, signed bool) *receiver {
	rc := &receiver{t: t}
	if signed {
		v, err := wire.NewVerifier(key, nil)
		if err != nil {
			t.Fatal(err)
		}
		rc.verifier = v
	}
	return rc
}

func TestWebhook_postsSignedPromotion(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, true)
	rc.respond = func(w http.ResponseWriter) {
		w.Header().Set("X-Request-Id", "run-42")
		w.WriteHeader(http.StatusAccepted)
	}
	srv := httptest.NewServer(rc)
	defer srv.Close()

	res, err := webhook.New(nil).Promote(context.Background(),
		request(srv.URL+"/hooks/promote?token=s3cr3t", true, hub(keySecret(map[string][]byte{"key": key}))))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reference).To(Equal("run-42"))
	g.Expect(res.Message).To(Equal("webhook " + srv.URL + "/hooks/promote answered 202 Accepted to delivery web-production-1-4-0"))
	g.Expect(res.Message).NotTo(ContainSubstring("s3cr3t"))

	g.Expect(rc.calls).To(Equal(1))
	g.Expect(rc.deliveries).To(Equal([]string{"web-production-1-4-0"}))
	g.Expect(rc.bodies[0]).To(MatchJSON(`{
		"pipeline": "apps/web",
		"promotion": "web-production-1-4-0",
		"from": "staging",
		"environment": "production",
		"version": "1.4.0",
		"targets": [
			{"spoke": "prod-eu", "namespace": "web", "release": "web", "helmRelease": {"namespace": "web", "name": "web"}},
			{"spoke": "prod-us", "namespace": "web", "release": "web"}
		],
		"requestedBy": "auto"
	}`))
}

func TestWebhook_referenceFromJSONBodyAndUnsignedWithoutSecret(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, false)
	rc.respond = func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": 1234, "url": "https://ci.example.com/runs/1234"})
	}
	srv := httptest.NewServer(rc)
	defer srv.Close()

	res, err := webhook.New(nil).Promote(context.Background(), request(srv.URL, false, hub()))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reference).To(Equal("1234"))
	g.Expect(res.URL).To(Equal("https://ci.example.com/runs/1234"))
}

func TestWebhook_retries5xxThenSucceeds(t *testing.T) {
	g := NewWithT(t)
	rc := newReceiver(t, true)
	rc.statuses = []int{http.StatusInternalServerError, http.StatusBadGateway}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := webhook.New(nil)
	req := request(srv.URL, true, hub(keySecret(map[string][]byte{"key": key})))

	for range 2 {
		_, err := s.Promote(context.Background(), req)
		g.Expect(err).To(HaveOccurred())
		g.Expect(strategy.IsTerminal(err)).To(BeFalse(), "%v", err)
	}
	_, err := s.Promote(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc.calls).To(Equal(3))
	g.Expect(rc.deliveries).To(HaveEach("web-production-1-4-0"), "one delivery id for every attempt")
}

func TestWebhook_4xxIsTerminalWithTheResponse(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, "unknown environment production;"+strings.Repeat("x", 600)+"TAIL")
	}))
	defer srv.Close()

	_, err := webhook.New(nil).Promote(context.Background(), request(srv.URL, false, hub()))
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring("answered 400 Bad Request: unknown environment production;xxx")))
	g.Expect(err.Error()).NotTo(ContainSubstring("TAIL"), "at most 512 bytes of the body")

	// Too many requests and timeouts are worth retrying.
	srv429 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv429.Close()
	_, err = webhook.New(nil).Promote(context.Background(), request(srv429.URL, false, hub()))
	g.Expect(err).To(HaveOccurred())
	g.Expect(strategy.IsTerminal(err)).To(BeFalse())
}

func TestWebhook_redirectIsNotFollowed(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/new" {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.Redirect(w, r, "/new", http.StatusPermanentRedirect)
	}))
	defer srv.Close()

	_, err := webhook.New(nil).Promote(context.Background(), request(srv.URL+"/old", false, hub()))
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring(`redirect to "/new", not followed`)))
}

func TestWebhook_connectionRefusedIsRetryable(t *testing.T) {
	g := NewWithT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())

	_, err = webhook.New(nil).Promote(context.Background(), request("http://"+addr+"/hook?token=s3cr3t", false, hub()))
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3t"))
	g.Expect(strategy.IsTerminal(err)).To(BeFalse())
}

func TestWebhook_secretErrors(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	rc := newReceiver(t, true)
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := webhook.New(nil)

	_, err := s.Promote(ctx, request(srv.URL, true, hub(keySecret(map[string][]byte{"token": key}))))
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
	g.Expect(err).To(MatchError(`webhook signing key: Secret apps/ci-hook has no key "key"`))

	_, err = s.Promote(ctx, request(srv.URL, true, hub(keySecret(map[string][]byte{"key": []byte("short")}))))
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())

	_, err = s.Promote(ctx, request(srv.URL, true, hub()))
	g.Expect(err).To(MatchError(ContainSubstring("Secret apps/ci-hook not found")))
	g.Expect(strategy.IsTerminal(err)).To(BeFalse(), "the Secret may yet be created")

	g.Expect(rc.calls).To(BeZero(), "nothing is sent without the key")
}

func TestWebhook_onlyHTTPURLs(t *testing.T) {
	g := NewWithT(t)
	for _, u := range []string{"ftp://ci.example.com/hook", "file:///etc/passwd", "/relative", "http://"} {
		_, err := webhook.New(nil).Promote(context.Background(), request(u, false, hub()))
		g.Expect(strategy.IsTerminal(err)).To(BeTrue(), u)
	}
}
