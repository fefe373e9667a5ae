package deliver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/egress"
	"tugboat.dev/tugboat/controllers/notify/deliver"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/e2e/harness"
)

// cluster is a real API server with tugboat's CRDs.
var cluster *harness.Cluster

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(harness.Main(harness.Options{Name: "notify", ControlPlaneOnly: true, TugboatCRDs: true}, func(c *harness.Cluster) int {
		cluster = c
		return m.Run()
	}))
}

var webhookKey = []byte("notify-webhook-key-0123456789abcdef")

// scheme holds the kinds the notification controller reads: client-go's
// and tugboat.dev/v1alpha1 (as the hub's scheme does).
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = tugboatv1alpha1.AddToScheme(s)
	return s
}

// startDeliverer runs the notification controller alone, as the hub runs
// it, until the returned stop is called or the test ends.
func startDeliverer(t *testing.T, opts deliver.Options) (stop func()) {
	t.Helper()
	return startDelivererReading(t, opts, nil)
}

// startDelivererReading is startDeliverer with the controller's APIReader
// wrapped by wrap (nil: as is).
func startDelivererReading(t *testing.T, opts deliver.Options, wrap func(client.Reader) client.Reader) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(cluster.RESTConfig, ctrl.Options{
		Scheme:     scheme(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := pipeline.IndexFields(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	b := deliver.NewSecretBuilder(mgr.GetAPIReader(), deliver.SecretBuilderOptions{HTTPClient: egress.Policy{AllowLoopback: true}.Client(5 * time.Second)})
	reader := mgr.GetAPIReader()
	if wrap != nil {
		reader = wrap(reader)
	}
	if err := (&deliver.Reconciler{Client: mgr.GetClient(), APIReader: reader, Builder: b, Options: opts}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("manager: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func ptr[T any](v T) *T { return &v }

// receiver is a webhook notifier's destination: it verifies each request's
// signature with api/wire, answers with the queued status codes (204 once
// they are used up) and keeps the notices it accepted.
type receiver struct {
	mu       sync.Mutex
	verifier *wire.Verifier
	codes    []int
	got      []notice
	refused  int
}

// notice is the part of the webhook payload (notify.tugboat.dev/v1) the
// tests read.
type notice struct {
	ID       string `json:"id"`
	Event    string `json:"event"`
	Summary  bool   `json:"summary"`
	Timeline []struct {
		Source string `json:"source"`
		Text   string `json:"text"`
	} `json:"timeline"`
	Targets []struct {
		Spoke string `json:"spoke"`
	} `json:"targets"`
	Promotion *struct {
		Votes []struct {
			User        string `json:"user"`
			DisplayName string `json:"displayName"`
		} `json:"votes"`
		Preview      string `json:"preview"`
		DashboardURL string `json:"dashboardURL"`
		Message      string `json:"message"`
		Wave         string `json:"wave"`
		Rollout      string `json:"rollout"`
	} `json:"promotion"`
	Title string `json:"title"`
}

func newReceiver(t *testing.T, codes ...int) (*receiver, string) {
	v, err := wire.NewVerifier(webhookKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{verifier: v, codes: codes}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL + "/hooks/tugboat"
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.verifier.VerifyRequest(req, body); err != nil {
		r.refused++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	code := http.StatusNoContent
	if len(r.codes) > 0 {
		code, r.codes = r.codes[0], r.codes[1:]
	}
	if code < 300 {
		var n notice
		if err := json.Unmarshal(body, &n); err == nil {
			r.got = append(r.got, n)
		}
	}
	w.WriteHeader(code)
}

// events returns the events of the notices accepted so far, in order.
func (r *receiver) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, n := range r.got {
		out = append(out, n.Event)
	}
	return out
}

func (r *receiver) notices() []notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]notice(nil), r.got...)
}

// fixture creates namespace ns with the webhook Secret and a Pipeline
// "web" (dev → production, approval required into production) whose
// notifiers are given.
func fixture(t *testing.T, ns string, notifiers ...tugboatv1alpha1.Notifier) *tugboatv1alpha1.Pipeline {
	t.Helper()
	ctx := context.Background()
	c := cluster.Client
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"}, Data: map[string][]byte{"key": webhookKey}}))
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
			Environments: []tugboatv1alpha1.Environment{
				{Name: "dev", Targets: []tugboatv1alpha1.Target{{Spoke: "dev-1", Namespace: "apps"}}},
				{Name: "production", Targets: []tugboatv1alpha1.Target{{Spoke: "prod-1", Namespace: "apps"}},
					Gates: tugboatv1alpha1.Gates{RequireApproval: true}},
			},
			Notify: notifiers,
		},
	}
	must(t, c.Create(ctx, p))
	return p
}

func webhookNotifier(name, url string, mode tugboatv1alpha1.NotifyMode, events ...tugboatv1alpha1.NotifyEvent) tugboatv1alpha1.Notifier {
	return tugboatv1alpha1.Notifier{
		Name: name, Type: tugboatv1alpha1.NotifierWebhook, Mode: mode, Events: events,
		Webhook: &tugboatv1alpha1.WebhookNotifier{URL: url, SecretRef: &tugboatv1alpha1.LocalSecretReference{Name: "hook"}},
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
