package actions

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/config"
)

// newNamespace creates a namespace for one test.
func newNamespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", "=", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-") + "-" + randomHex(3)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := cluster.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return name
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// helmConfig is a Helm action configuration for ns, as the executor builds
// it.
func helmConfig(t testing.TB, ns string) *action.Configuration {
	t.Helper()
	cfg := new(action.Configuration)
	if err := cfg.Init(config.Target{RESTConfig: cluster.RESTConfig, Namespace: ns}.Getter(), ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatalf("helm init: %v", err)
	}
	return cfg
}

// webChart loads the web chart at version, as packaged in the repository.
func webChart(t testing.TB, version string) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(webChartDir)
	if err != nil {
		t.Fatalf("loading chart: %v", err)
	}
	ch.Metadata.Version, ch.Metadata.AppVersion = version, version
	if version != "1.0.0" {
		addTier(ch)
	}
	return ch
}

// install installs release name of the web chart at version with values.
func install(t testing.TB, ns, name, version string, values map[string]any) *release.Release {
	t.Helper()
	in := action.NewInstall(helmConfig(t, ns))
	in.ReleaseName, in.Namespace, in.Timeout = name, ns, 30*time.Second
	rel, err := in.RunWithContext(context.Background(), webChart(t, version), values)
	if err != nil {
		t.Fatalf("helm install %s %s: %v", name, version, err)
	}
	return rel
}

// history returns the release's revisions, oldest first.
func history(t *testing.T, ns, name string) []*release.Release {
	t.Helper()
	h, err := helmConfig(t, ns).Releases.History(name)
	if err != nil {
		t.Fatalf("helm history %s: %v", name, err)
	}
	// Oldest first; revisions Helm pruned are absent.
	slices.SortFunc(h, func(a, b *release.Release) int { return cmp.Compare(a.Version, b.Version) })
	return h
}

// last returns the release's latest revision.
func last(t *testing.T, ns, name string) *release.Release {
	t.Helper()
	r, err := helmConfig(t, ns).Releases.Last(name)
	if err != nil {
		t.Fatalf("helm last %s: %v", name, err)
	}
	return r
}

// allowAll are limits that allow every namespace and the test repository.
func allowAll() Limits {
	return Limits{Namespaces: []string{Any}, ChartSources: []string{"http://" + chartsHost}}
}

// testOptions are the defaults with limits.
func testOptions(l Limits) Options {
	o := NewOptions()
	o.Limits = l
	o.PendingWait = time.Second
	o.BackoffInitial, o.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
	o.MinPollInterval = 20 * time.Millisecond
	return o
}

// newExecutor returns an executor for the test cluster.
func newExecutor(t *testing.T, opts Options) *Executor {
	t.Helper()
	e, err := NewExecutor(cluster.RESTConfig, opts, testr.New(t))
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	return e
}

// upgradeAction is an action upgrading ns/name to the web chart at version
// from the anonymous repository.
func upgradeAction(ns, name, version string) wire.Action {
	return wire.Action{
		ID:        wire.NewActionID(randomHex(8), "spoke", ns, name),
		Promotion: "pipelines/web-" + version,
		Namespace: ns,
		Release:   name,
		Chart:     wire.ChartSource{Repository: chartsURL, Name: "web"},
		Version:   version,
		Created:   time.Now(),
	}
}

// execute runs a and fails the test when it was abandoned.
func execute(t *testing.T, e *Executor, a wire.Action) wire.ActionOutcome {
	t.Helper()
	out, err := e.Execute(context.Background(), a)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	return out
}

// fakeHub is the hub's side of the actions channel: it verifies every
// request's signature, offers its pending actions to every poll (holding an
// empty poll briefly), and records the outcomes it accepts. replies, when
// set, scripts the status of the next outcome reports.
type fakeHub struct {
	t        *testing.T
	spoke    string
	verifier *wire.Verifier
	key      []byte
	keyFile  string
	srv      *httptest.Server

	mu       sync.Mutex
	pending  []wire.Action
	outcomes []wire.ActionOutcome
	reports  int
	replies  []int
	polls    int
	badSig   int
	// answers says how the hub signs its answers (signedAnswers unless
	// set); lastSig is the signature of the previous 2xx answer.
	answers answerSigning
	lastSig string
	// ackUnsigned leaves the acknowledgements of outcomes unsigned.
	ackUnsigned bool
	// hold is how long an empty poll is held (100 ms unless set); offer
	// ends it early, as the hub's long-poll does when an action is queued.
	hold    time.Duration
	offered chan struct{}
}

// answerSigning is how the fake hub signs its 2xx answers.
type answerSigning int

const (
	signedAnswers   answerSigning = iota // with the spoke key, for the request
	unsignedAnswers                      // no signature (an injecting proxy)
	wrongKeyAnswers                      // with another key
	replayedAnswers                      // the previous answer's signature
)

// reply writes a 2xx answer, signed as h.answers says.
func (h *fakeHub) reply(w http.ResponseWriter, r *http.Request, code int, body []byte) {
	h.mu.Lock()
	mode, last := h.answers, h.lastSig
	if r.Method == http.MethodPost && h.ackUnsigned {
		mode = unsignedAnswers
	}
	h.mu.Unlock()
	sig := wire.SignResponse(r, code, body, h.key)
	switch mode {
	case unsignedAnswers:
		sig = ""
	case wrongKeyAnswers:
		sig = wire.SignResponse(r, code, body, []byte(randomHex(16)))
	case replayedAnswers:
		sig = last
	}
	h.mu.Lock()
	h.lastSig = wire.SignResponse(r, code, body, h.key)
	h.mu.Unlock()
	if sig != "" {
		w.Header().Set(wire.HeaderResponseSignature, sig)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func (h *fakeHub) setAnswers(mode answerSigning) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answers = mode
}

func newFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	key := []byte(randomHex(16))
	v, err := wire.NewVerifier(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	h := &fakeHub{t: t, spoke: "spoke-a", verifier: v, key: key, keyFile: keyFile, hold: 100 * time.Millisecond, offered: make(chan struct{})}
	h.srv = httptest.NewServer(h)
	t.Cleanup(h.srv.Close)
	return h
}

func (h *fakeHub) hub() Hub {
	return Hub{URL: h.srv.URL, Spoke: h.spoke, KeyFile: h.keyFile, AgentVersion: "test"}
}

func (h *fakeHub) offer(a ...wire.Action) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending = append(h.pending, a...)
	close(h.offered)
	h.offered = make(chan struct{})
}

func (h *fakeHub) setHold(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold = d
}

func (h *fakeHub) results() []wire.ActionOutcome {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]wire.ActionOutcome(nil), h.outcomes...)
}

func (h *fakeHub) counts() (reports, polls, badSig int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reports, h.polls, h.badSig
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := h.verifier.VerifyRequest(r, body); err != nil {
		h.mu.Lock()
		h.badSig++
		h.mu.Unlock()
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == wire.ActionsPath(h.spoke):
		h.mu.Lock()
		h.polls++
		list := wire.ActionList{Actions: append([]wire.Action{}, h.pending...)}
		hold, offered := h.hold, h.offered
		h.mu.Unlock()
		if len(list.Actions) == 0 {
			// A long-poll, ended by an offer.
			t := time.NewTimer(hold)
			select {
			case <-t.C:
			case <-offered:
				h.mu.Lock()
				list.Actions = append(list.Actions, h.pending...)
				h.mu.Unlock()
			case <-r.Context().Done():
			}
			t.Stop()
		}
		b, _ := json.Marshal(list)
		h.reply(w, r, http.StatusOK, b)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, wire.ActionsPath(h.spoke)+"/"):
		var o wire.ActionOutcome
		if err := json.Unmarshal(body, &o); err != nil || r.URL.Path != wire.ActionPath(h.spoke, o.ID) {
			http.Error(w, "bad outcome", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.reports++
		code := http.StatusAccepted
		if len(h.replies) > 0 {
			code, h.replies = h.replies[0], h.replies[1:]
		}
		if code >= 300 && code != http.StatusNotFound {
			http.Error(w, http.StatusText(code), code)
			return
		}
		if code < 300 {
			h.outcomes = append(h.outcomes, o)
		}
		// Accepted, or forgotten (404): no longer offered.
		kept := h.pending[:0]
		for _, a := range h.pending {
			if a.ID != o.ID {
				kept = append(kept, a)
			}
		}
		h.pending = kept
		if code == http.StatusNotFound {
			http.NotFound(w, r)
			return
		}
		h.mu.Unlock()
		h.reply(w, r, code, nil)
		h.mu.Lock()
	default:
		http.NotFound(w, r)
	}
}

// startPoller runs a Poller against hub until the test ends.
func startPoller(t *testing.T, run Runner, opts Options, hub *fakeHub) {
	t.Helper()
	p, err := NewPoller(run, opts, hub.hub(), testr.New(t))
	if err != nil {
		t.Fatalf("NewPoller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("poller: %v", err)
		}
	})
}

// countingRunner counts the executions of each action.
type countingRunner struct {
	Runner
	mu   sync.Mutex
	runs map[string]int
}

func (c *countingRunner) Execute(ctx context.Context, a wire.Action) (wire.ActionOutcome, error) {
	c.mu.Lock()
	if c.runs == nil {
		c.runs = map[string]int{}
	}
	c.runs[a.ID]++
	c.mu.Unlock()
	return c.Runner.Execute(ctx, a)
}

func (c *countingRunner) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

// outcomeFor returns a matcher-friendly view: the outcome with id.
func outcomeFor(g Gomega, outcomes []wire.ActionOutcome, id string) wire.ActionOutcome {
	for _, o := range outcomes {
		if o.ID == id {
			return o
		}
	}
	g.Expect(outcomes).To(ContainElement(HaveField("ID", id)))
	return wire.ActionOutcome{}
}

func writeFile(path, content string) error {
	// Write a new file and rename it over the old one, as a ConfigMap
	// volume's symlink swap does, so the change is seen at once.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func helmTime(t time.Time) helmtime.Time { return helmtime.Time{Time: t} }

// helmRelease is a Flux HelmRelease of the web chart at version (none when
// empty), with an interval.
func helmRelease(ns, name, version string) *unstructured.Unstructured {
	spec := map[string]any{
		"chart":     "web",
		"sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"},
	}
	if version != "" {
		spec["version"] = version
	}
	hr := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"interval": "5m", "chart": map[string]any{"spec": spec}},
	}}
	hr.SetGroupVersionKind(helmv2.GroupVersion.WithKind(helmv2.HelmReleaseKind))
	hr.SetNamespace(ns)
	hr.SetName(name)
	return hr
}

func getHelmRelease(g Gomega, ns, name string) *unstructured.Unstructured {
	hr := helmRelease(ns, name, "")
	g.Expect(cluster.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, hr)).To(Succeed())
	return hr
}

func nested(obj map[string]any, fields ...string) string {
	s, _, _ := unstructured.NestedString(obj, fields...)
	return s
}
