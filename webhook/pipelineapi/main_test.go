package pipelineapi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/webhook/pipelineapi"
)

// cluster is a real API server (etcd and kube-apiserver) with tugboat's CRDs.
var cluster *harness.Cluster

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(harness.Main(harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true}, func(c *harness.Cluster) int {
		cluster = c
		return m.Run()
	}))
}

// Credentials of Pipeline "web" (Secret "web-ci") and of Pipeline "other".
const (
	webToken   = "web-ci-token-6f1e2d-0123456789abcdef"
	otherToken = "other-ci-token-99a0-0123456789abcdef"
)

var webKey = []byte("web-ci-hmac-key-0123456789abcdef")

// Approval credentials of Pipeline "web" (Secret "web-approvals"):
// release-bot may approve production, deploy-bot nothing. Each value is a
// bearer token and an HMAC key alike.
const (
	releaseBotToken = "release-bot-approval-token-5c3e-0123"
	deployBotToken  = "deploy-bot-approval-token-77d1-01234"
)

// shortToken is the token of Pipeline "short" (Secret "short-ci"): 31
// bytes, one too few to be a credential.
const shortToken = "short-ci-token-0123456789abcdef"

// fixture is a namespace with three Pipelines and the API's handler:
//   - web: dev → staging → production (approval required), Secret web-ci
//     with a bearer token (stored with a trailing newline) and an HMAC key;
//     approval credentials in Secret web-approvals, of which release-bot
//     may approve production;
//   - open: no secretRef;
//   - other: Secret other-ci with another token and no HMAC key;
//   - dangling: names a Secret that does not exist.
type fixture struct {
	t       testing.TB
	ns      string
	handler *pipelineapi.Handler
	reg     *prometheus.Registry

	mu   sync.Mutex
	logs strings.Builder
}

func newFixture(t testing.TB, ns string) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{t: t, ns: ns, reg: prometheus.NewRegistry()}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-ci"},
			Data: map[string][]byte{pipelineapi.TokenKey: []byte(webToken + "\n"), pipelineapi.HMACKey: webKey}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-ci"},
			Data: map[string][]byte{pipelineapi.TokenKey: []byte(otherToken)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "short-ci"},
			Data: map[string][]byte{pipelineapi.TokenKey: []byte(shortToken)}},
		newPipeline(ns, "short", "short-ci"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-approvals"},
			Data: map[string][]byte{"release-bot": []byte(releaseBotToken), "deploy-bot": []byte(deployBotToken)}},
		withApprovals(newPipeline(ns, "web", "web-ci"), "web-approvals", "release-bot"),
		newPipeline(ns, "open", ""),
		newPipeline(ns, "other", "other-ci"),
		newPipeline(ns, "dangling", "gone-ci"),
	}
	for _, o := range objs {
		if err := cluster.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	log := funcr.New(func(prefix, args string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.logs.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 10})
	// One client sends every request of a test: a burst far above the
	// default (ratelimit_test.go tests the limit).
	f.handler = pipelineapi.New(cluster.Client, cluster.Client, pipelineapi.Options{Logger: log, Registerer: f.reg, RateBurst: 10_000})
	return f
}

func newPipeline(ns, name, secret string) *tugboatv1alpha1.Pipeline {
	target := func(spoke string) []tugboatv1alpha1.Target {
		return []tugboatv1alpha1.Target{{Spoke: spoke, Namespace: "apps"}}
	}
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
			Environments: []tugboatv1alpha1.Environment{
				{Name: "dev", Targets: target("dev-1")},
				{Name: "staging", Targets: target("staging-1")},
				{Name: "production", Targets: target("prod-1"), Gates: tugboatv1alpha1.Gates{RequireApproval: true}},
			},
		},
	}
	if secret != "" {
		p.Spec.SecretRef = &tugboatv1alpha1.LocalSecretReference{Name: secret}
	}
	return p
}

// withApprovals sets p's approval Secret and lets credentials approve its
// last environment.
func withApprovals(p *tugboatv1alpha1.Pipeline, secret string, credentials ...string) *tugboatv1alpha1.Pipeline {
	p.Spec.ApprovalSecretRef = &tugboatv1alpha1.LocalSecretReference{Name: secret}
	last := &p.Spec.Environments[len(p.Spec.Environments)-1]
	last.Gates.Approvers = &tugboatv1alpha1.Approvers{CICredentials: credentials}
	return p
}

func (f *fixture) logged() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logs.String()
}

// authFunc adds credentials to a request for its body.
type authFunc func(r *http.Request, body []byte)

func bearer(token string) authFunc {
	return func(r *http.Request, _ []byte) { r.Header.Set("Authorization", "Bearer "+token) }
}

func signed(key []byte, at time.Time) authFunc {
	return func(r *http.Request, body []byte) { wire.SignRequest(r, key, body, at) }
}

// call is one HTTP request to the handler.
type call struct {
	method, path, contentType, encoding string
	body                                []byte
	auth                                authFunc
}

// do serves c in process and returns the recorded response.
func (f *fixture) do(c call) *httptest.ResponseRecorder {
	f.t.Helper()
	if c.method == "" {
		c.method = http.MethodPost
	}
	if c.contentType == "" {
		c.contentType = "application/json"
	}
	r := httptest.NewRequest(c.method, "http://hub.example"+c.path, bytes.NewReader(c.body))
	if c.contentType != "-" {
		r.Header.Set("Content-Type", c.contentType)
	}
	if c.encoding != "" {
		r.Header.Set("Content-Encoding", c.encoding)
	}
	if c.auth != nil {
		c.auth(r, c.body)
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, r)
	return rec
}

func (f *fixture) path(pipeline, endpoint string) string {
	return "/v1/pipelines/" + f.ns + "/" + pipeline + "/" + endpoint
}

// promotions returns each Promotion's name and resourceVersion: any change
// to any of them changes the map.
func (f *fixture) promotions() map[string]string {
	f.t.Helper()
	var list tugboatv1alpha1.PromotionList
	if err := cluster.Client.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		f.t.Fatal(err)
	}
	out := map[string]string{}
	for _, pr := range list.Items {
		out[pr.Name] = pr.ResourceVersion
	}
	return out
}

func (f *fixture) promotion(name string) *tugboatv1alpha1.Promotion {
	f.t.Helper()
	pr := &tugboatv1alpha1.Promotion{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, pr); err != nil {
		f.t.Fatal(err)
	}
	return pr
}

// setPhase writes a Promotion's status.phase, as the controller would.
func (f *fixture) setPhase(name string, phase tugboatv1alpha1.PromotionPhase) {
	f.t.Helper()
	pr := f.promotion(name)
	orig := pr.DeepCopy()
	pr.Status.Phase = phase
	if err := cluster.Client.Status().Patch(context.Background(), pr, client.MergeFrom(orig)); err != nil {
		f.t.Fatal(err)
	}
}

// counter returns the value of a counter with exactly these labels.
func (f *fixture) counter(name string, labels map[string]string) float64 {
	f.t.Helper()
	fams, err := f.reg.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	for _, fam := range fams {
		if fam.GetName() != name {
			continue
		}
	metric:
		for _, m := range fam.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
