package receiver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/webhook/receiver"
)

const otherSpoke = "production-1"

var otherKey = []byte("tugboat-other-key-0123456789abcdef")

// memActions is an in-memory ingest.ActionStore. Its actions are for the
// Spokes of testNamespace: a Spoke of another namespace has none.
type memActions struct {
	mu       sync.Mutex
	actions  map[string][]wire.Action        // by spoke
	outcomes map[string]wire.ActionOutcome   // by action id
	changed  map[string]chan struct{}        // by spoke
	waits    chan string                     // receives the spoke of each Wait
	reports  map[string][]wire.ActionOutcome // by spoke, as reported
}

var _ ingest.ActionStore = (*memActions)(nil)

func newMemActions() *memActions {
	return &memActions{
		actions:  map[string][]wire.Action{},
		outcomes: map[string]wire.ActionOutcome{},
		changed:  map[string]chan struct{}{},
		waits:    make(chan string, 100),
		reports:  map[string][]wire.ActionOutcome{},
	}
}

// queue adds an action for spoke and wakes its polls.
func (m *memActions) queue(spoke string, a wire.Action) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.actions[spoke] = append(m.actions[spoke], a)
	if ch, ok := m.changed[spoke]; ok {
		close(ch)
		delete(m.changed, spoke)
	}
}

func (m *memActions) Pending(_ context.Context, sp ingest.Spoke) ([]wire.Action, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sp.Namespace != testNamespace {
		return nil, nil
	}
	var out []wire.Action
	for _, a := range m.actions[sp.Name] {
		if _, done := m.outcomes[a.ID]; !done {
			out = append(out, a)
		}
	}
	return out, nil
}

func (m *memActions) Report(_ context.Context, sp ingest.Spoke, o wire.ActionOutcome) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	spoke := sp.Name
	if sp.Namespace != testNamespace || !slices.ContainsFunc(m.actions[spoke], func(a wire.Action) bool { return a.ID == o.ID }) {
		return ingest.ErrActionNotFound
	}
	m.reports[spoke] = append(m.reports[spoke], o)
	if prev, ok := m.outcomes[o.ID]; ok {
		if prev.Result != o.Result || prev.Message != o.Message {
			return ingest.ErrActionConflict
		}
		return nil
	}
	m.outcomes[o.ID] = o
	return nil
}

func (m *memActions) Wait(sp ingest.Spoke) <-chan struct{} {
	spoke := sp.Name
	m.mu.Lock()
	defer m.mu.Unlock()
	ch, ok := m.changed[spoke]
	if !ok {
		ch = make(chan struct{})
		m.changed[spoke] = ch
	}
	m.waits <- spoke
	return ch
}

func newActionsHarness(t *testing.T, mutate ...func(*receiver.Options)) (*harness, *memActions) {
	t.Helper()
	acts := newMemActions()
	h := newHarness(t, append([]func(*receiver.Options){func(o *receiver.Options) {
		o.Actions = acts
		o.ActionPollTimeout = 10 * time.Second
	}}, mutate...)...)
	h.store.setKeys(otherSpoke, otherKey, nil)
	return h, acts
}

func testAction(spoke, release string) wire.Action {
	return wire.Action{
		ID:        wire.NewActionID("0b6c3f5e-uid", spoke, "apps", release),
		Promotion: "fleet/web-staging-1.2.0",
		Namespace: "apps", Release: release,
		Chart:        wire.ChartSource{Repository: "https://charts.example.com", Name: "web"},
		Version:      "1.2.0",
		ValuesPolicy: wire.ValuesReuse,
		Created:      testNow,
	}
}

// poll is a signed GET of the spoke's actions.
func poll(spoke string, key []byte) *http.Request {
	req := httptest.NewRequest(http.MethodGet, wire.ActionsPath(spoke), nil)
	wire.SignRequest(req, key, nil, testNow)
	return req
}

func actionList(g Gomega, rec *httptest.ResponseRecorder) []wire.Action {
	g.ExpectWithOffset(1, rec.Code).To(Equal(http.StatusOK), rec.Body.String())
	var list wire.ActionList
	g.ExpectWithOffset(1, json.Unmarshal(rec.Body.Bytes(), &list)).To(Succeed())
	g.ExpectWithOffset(1, list.Actions).NotTo(BeNil(), "an empty list is [], not null")
	return list.Actions
}

func outcome(id, result, message string) wire.ActionOutcome {
	return wire.ActionOutcome{ID: id, Result: result, Message: message, Revision: 2, Time: testNow}
}

// previewOutcome is a Succeeded preview outcome listing objs.
func previewOutcome(id string, objs ...wire.PreviewObject) wire.ActionOutcome {
	o := outcome(id, wire.ActionSucceeded, "previewed")
	o.Revision = 0
	o.Preview = &wire.PreviewResult{Digest: strings.Repeat("ab", 32), DryRun: wire.DryRunServer, Objects: objs, ObjectsChanged: len(objs), LinesChanged: 1}
	return o
}

func TestActions_signedPollGetsThePendingActionsAtOnce(t *testing.T) {
	g := NewWithT(t)
	h, acts := newActionsHarness(t)
	a := testAction(testSpoke, "web")
	acts.queue(testSpoke, a)
	acts.queue(otherSpoke, testAction(otherSpoke, "web"))

	start := time.Now()
	got := actionList(g, h.do(poll(testSpoke, testKey)))
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "not held: there was an action")
	g.Expect(got).To(HaveLen(1), "only the spoke's own actions")
	g.Expect(got[0].ID).To(Equal(a.ID))
	g.Expect(got[0].Chart).To(Equal(a.Chart))
	g.Expect(h.metric("tugboat_receiver_requests_total", map[string]string{"endpoint": "actions", "code": "200"})).To(Equal(1.0))
}

func TestActions_rejectUnsignedOrWronglySignedRequests(t *testing.T) {
	g := NewWithT(t)
	h, acts := newActionsHarness(t)
	a := testAction(testSpoke, "web")
	acts.queue(testSpoke, a)
	body := mustJSON(t, outcome(a.ID, wire.ActionSucceeded, ""))

	unsigned := httptest.NewRequest(http.MethodGet, wire.ActionsPath(testSpoke), nil)
	overBody := httptest.NewRequest(http.MethodGet, wire.ActionsPath(testSpoke), nil)
	wire.SignRequest(overBody, testKey, []byte("{}"), testNow)
	otherPath := httptest.NewRequest(http.MethodGet, wire.ActionsPath(testSpoke), nil)
	wire.SignRequest(otherPath, testKey, nil, testNow)
	otherPath.URL.Path = wire.ActionsPath(otherSpoke)
	for name, req := range map[string]*http.Request{
		"unsigned poll":                        unsigned,
		"poll signed with the wrong key":       poll(testSpoke, wrongKey),
		"poll signed over a body":              overBody,
		"poll signed for another spoke's path": otherPath,
		"poll of an unknown spoke":             poll("nobody", testKey),
		"stale poll": func() *http.Request {
			r := poll(testSpoke, testKey)
			wire.SignRequest(r, testKey, nil, testNow.Add(-time.Hour))
			return r
		}(),
		"outcome signed with the wrong key": signed(wire.ActionPath(testSpoke, a.ID), wrongKey, body, testNow),
		"unsigned outcome":                  httptest.NewRequest(http.MethodPost, wire.ActionPath(testSpoke, a.ID), strings.NewReader(string(body))),
	} {
		rec := h.do(req)
		g.Expect(rec.Code).To(Equal(http.StatusUnauthorized), name)
		g.Expect(errorBody(g, rec.Body.Bytes()).Error).To(Equal("request not authenticated"), name)
	}
	g.Expect(acts.reports).To(BeEmpty())
}

func TestActions_longPollReturnsAsSoonAsAnActionIsQueued(t *testing.T) {
	g := NewWithT(t)
	const pollTimeout = 10 * time.Second
	h, acts := newActionsHarness(t, func(o *receiver.Options) { o.ActionPollTimeout = pollTimeout })
	type answer struct {
		rec     *httptest.ResponseRecorder
		elapsed time.Duration
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		rec := h.do(poll(testSpoke, testKey))
		done <- answer{rec, time.Since(start)}
	}()
	// The poll registered its wait and found nothing yet.
	g.Eventually(acts.waits).WithTimeout(5 * time.Second).Should(Receive(Equal(testSpoke)))
	g.Consistently(done).WithTimeout(100 * time.Millisecond).ShouldNot(Receive())

	a := testAction(testSpoke, "web")
	acts.queue(testSpoke, a)
	var ans answer
	g.Eventually(done).WithTimeout(5 * time.Second).Should(Receive(&ans))
	g.Expect(actionList(g, ans.rec)).To(ConsistOf(HaveField("ID", a.ID)))
	g.Expect(ans.elapsed).To(BeNumerically("<", pollTimeout/2), "returned well before the poll timeout")
}

func TestActions_longPollAnswersAnEmptyListAtTheTimeout(t *testing.T) {
	g := NewWithT(t)
	const pollTimeout = 300 * time.Millisecond
	h, acts := newActionsHarness(t, func(o *receiver.Options) { o.ActionPollTimeout = pollTimeout })
	// Another spoke's action does not end this spoke's poll.
	acts.queue(otherSpoke, testAction(otherSpoke, "web"))
	start := time.Now()
	rec := h.do(poll(testSpoke, testKey))
	elapsed := time.Since(start)
	g.Expect(actionList(g, rec)).To(BeEmpty())
	g.Expect(rec.Body.String()).To(Equal(`{"actions":[]}` + "\n"))
	g.Expect(elapsed).To(BeNumerically(">=", pollTimeout))
	g.Expect(elapsed).To(BeNumerically("<", pollTimeout+5*time.Second))
}

func TestActions_recordOutcomesIdempotently(t *testing.T) {
	g := NewWithT(t)
	h, acts := newActionsHarness(t, func(o *receiver.Options) { o.ActionPollTimeout = 100 * time.Millisecond })
	a := testAction(testSpoke, "web")
	acts.queue(testSpoke, a)
	o := outcome(a.ID, wire.ActionRefused, "namespace apps is not allowed on this spoke")
	body := mustJSON(t, o)

	for range 2 {
		rec := h.do(signed(wire.ActionPath(testSpoke, a.ID), testKey, body, testNow))
		g.Expect(rec.Code).To(Equal(http.StatusOK), rec.Body.String())
		g.Expect(rec.Body.String()).To(Equal("{}\n"))
	}
	g.Expect(acts.outcomes).To(HaveKeyWithValue(a.ID, o))

	rec := h.do(signed(wire.ActionPath(testSpoke, a.ID), testKey, gzipped(t, mustJSON(t, outcome(a.ID, wire.ActionSucceeded, ""))), testNow))
	g.Expect(rec.Code).To(Equal(http.StatusBadRequest), "gzip without Content-Encoding is not JSON")
	req := signed(wire.ActionPath(testSpoke, a.ID), testKey, gzipped(t, mustJSON(t, outcome(a.ID, wire.ActionSucceeded, ""))), testNow)
	req.Header.Set("Content-Encoding", "gzip")
	rec = h.do(req)
	g.Expect(rec.Code).To(Equal(http.StatusConflict), "a different outcome for a reported action")

	// Reported, it is no longer offered.
	g.Expect(actionList(g, h.do(poll(testSpoke, testKey)))).To(BeEmpty())
}

func TestActions_aSpokeCannotReportAnotherSpokesAction(t *testing.T) {
	g := NewWithT(t)
	h, acts := newActionsHarness(t)
	theirs := testAction(otherSpoke, "web")
	acts.queue(otherSpoke, theirs)
	acts.queue(testSpoke, testAction(testSpoke, "web"))

	body := mustJSON(t, outcome(theirs.ID, wire.ActionSucceeded, "done"))
	rec := h.do(signed(wire.ActionPath(testSpoke, theirs.ID), testKey, body, testNow))
	g.Expect(rec.Code).To(Equal(http.StatusNotFound), rec.Body.String())
	g.Expect(acts.outcomes).To(BeEmpty())

	unknown := wire.NewActionID("no-such-promotion", testSpoke, "apps", "web")
	rec = h.do(signed(wire.ActionPath(testSpoke, unknown), testKey, mustJSON(t, outcome(unknown, wire.ActionSucceeded, "")), testNow))
	g.Expect(rec.Code).To(Equal(http.StatusNotFound))
}

func TestActions_rejectBadOutcomesNamingTheField(t *testing.T) {
	g := NewWithT(t)
	h, acts := newActionsHarness(t)
	a := testAction(testSpoke, "web")
	acts.queue(testSpoke, a)
	good := outcome(a.ID, wire.ActionFailed, "upgrade failed")
	for name, tc := range map[string]struct {
		path  string
		body  []byte
		field string
	}{
		"unknown result":    {"", mutateJSON(t, good, func(m map[string]any) { m["result"] = "Done" }), "result"},
		"missing result":    {"", mutateJSON(t, good, func(m map[string]any) { delete(m, "result") }), "result"},
		"unknown field":     {"", mutateJSON(t, good, func(m map[string]any) { m["status"] = "ok" }), "status"},
		"revision string":   {"", mutateJSON(t, good, func(m map[string]any) { m["revision"] = "2" }), "revision"},
		"negative rev":      {"", mutateJSON(t, good, func(m map[string]any) { m["revision"] = -1 }), "revision"},
		"bad time":          {"", mutateJSON(t, good, func(m map[string]any) { m["time"] = "yesterday" }), "time"},
		"bad id":            {wire.ActionPath(testSpoke, "XYZ"), mutateJSON(t, good, func(m map[string]any) { m["id"] = "XYZ" }), "id"},
		"id not the path's": {wire.ActionPath(testSpoke, testAction(testSpoke, "api").ID), mustJSON(t, good), "id"},
		"malformed":         {"", []byte(`{"id":`), ""},
		"not an object":     {"", []byte(`[]`), ""},
		"trailing data":     {"", append(mustJSON(t, good), []byte(` {}`)...), ""},
	} {
		path := cmpOr(tc.path, wire.ActionPath(testSpoke, a.ID))
		rec := h.do(signed(path, testKey, tc.body, testNow))
		g.Expect(rec.Code).To(Equal(http.StatusBadRequest), name+": "+rec.Body.String())
		resp := errorBody(g, rec.Body.Bytes())
		g.Expect(resp.Fields).NotTo(BeEmpty(), name)
		g.Expect(resp.Fields[0].Field).To(Equal(tc.field), name+": "+rec.Body.String())
	}
	g.Expect(acts.outcomes).To(BeEmpty())
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestActions_decodeEveryOutcomeField(t *testing.T) {
	g := NewWithT(t)
	h, acts := newActionsHarness(t)
	a := testAction(testSpoke, "web")
	acts.queue(testSpoke, a)
	o := wire.ActionOutcome{ID: a.ID, Result: wire.ActionSucceeded, Message: "upgraded", Revision: 3, Time: testNow}
	rec := h.do(signed(wire.ActionPath(testSpoke, a.ID), testKey, mustJSON(t, o), testNow))
	g.Expect(rec.Code).To(Equal(http.StatusOK), rec.Body.String())
	g.Expect(acts.outcomes[a.ID]).To(Equal(o), "no field of wire.ActionOutcome is lost or unknown")
}

// A preview outcome (issue 26) reaches the store with every field; one
// over the bounds does not (TestReceiver_badInputOnEveryEndpoint).
func TestActions_decodeEveryPreviewField(t *testing.T) {
	g := NewWithT(t)
	h, acts := newActionsHarness(t)
	a := testAction(testSpoke, "web")
	acts.queue(testSpoke, a)
	o := previewOutcome(a.ID,
		wire.PreviewObject{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web", Change: wire.ChangeChanged, Diff: "-a\n+b\n", Truncated: true},
		wire.PreviewObject{APIVersion: "v1", Kind: "Secret", Namespace: "apps", Name: "db", Change: wire.ChangeChanged, Secret: true})
	o.Preview.FromVersion, o.Preview.Revision, o.Preview.ValuesDiff = "1.0.0", 4, "-x: 1\n+x: 2\n"
	o.Preview.Truncated, o.Preview.Note, o.Preview.LinesChanged = true, "truncated: 1 diffs cut at 16 KiB", 4
	rec := h.do(signed(wire.ActionPath(testSpoke, a.ID), testKey, mustJSON(t, o), testNow))
	g.Expect(rec.Code).To(Equal(http.StatusOK), rec.Body.String())
	g.Expect(acts.outcomes[a.ID]).To(Equal(o), "no field of wire.PreviewResult is lost or unknown")
}

func TestActions_notServedWithoutAStore(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	g.Expect(h.do(poll(testSpoke, testKey)).Code).To(Equal(http.StatusNotFound))
	id := testAction(testSpoke, "web").ID
	rec := h.do(signed(wire.ActionPath(testSpoke, id), testKey, mustJSON(t, outcome(id, wire.ActionSucceeded, "")), testNow))
	g.Expect(rec.Code).To(Equal(http.StatusNotFound))
}

func TestActions_methodsAndRateLimit(t *testing.T) {
	g := NewWithT(t)
	h, acts := newActionsHarness(t, func(o *receiver.Options) { o.RateBurst, o.RateLimit = 2, 0.001 })
	acts.queue(testSpoke, testAction(testSpoke, "web"))

	rec := h.do(signed(wire.ActionsPath(testSpoke), testKey, nil, testNow))
	g.Expect(rec.Code).To(Equal(http.StatusMethodNotAllowed))
	g.Expect(rec.Header().Get("Allow")).To(Equal(http.MethodGet))

	g.Expect(h.do(poll(testSpoke, testKey)).Code).To(Equal(http.StatusOK))
	g.Expect(h.do(poll(testSpoke, testKey)).Code).To(Equal(http.StatusOK))
	rec = h.do(poll(testSpoke, testKey))
	g.Expect(rec.Code).To(Equal(http.StatusTooManyRequests), "each poll is one request")
	g.Expect(rec.Header().Get("Retry-After")).NotTo(BeEmpty())
}

func TestActions_shutdownEndsHeldPolls(t *testing.T) {
	g := NewWithT(t)
	h, acts := newActionsHarness(t, func(o *receiver.Options) {
		o.BindAddress = "127.0.0.1:0"
		o.ActionPollTimeout = 50 * time.Second
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.server.Start(ctx) }()
	g.Eventually(h.server.Addr).WithTimeout(5 * time.Second).ShouldNot(BeNil())

	type answer struct {
		code int
		err  error
	}
	polled := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s%s", h.server.Addr(), wire.ActionsPath(testSpoke)), nil)
		wire.SignRequest(req, testKey, nil, testNow)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			polled <- answer{0, err}
			return
		}
		_ = resp.Body.Close()
		polled <- answer{resp.StatusCode, nil}
	}()
	// The poll is held; stopping the server answers it at once.
	g.Eventually(acts.waits).WithTimeout(5 * time.Second).Should(Receive(Equal(testSpoke)))
	start := time.Now()
	cancel()
	g.Eventually(polled).WithTimeout(10 * time.Second).Should(Receive(Equal(answer{http.StatusOK, nil})))
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second), "well before the 50s poll timeout")
}
