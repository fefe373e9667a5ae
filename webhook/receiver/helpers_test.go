package receiver_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/webhook/receiver"
)

const testSpoke = "staging-1"

var (
	testKey  = []byte("tugboat-test-key-0123456789abcdef")
	oldKey   = []byte("tugboat-old-key-fedcba9876543210")
	wrongKey = []byte("tugboat-wrong-key-000000000000000")
	// fluxTestKey and fluxOldKey are Flux Provider keys, separate from the
	// agent's.
	fluxTestKey = []byte("tugboat-flux-key-0123456789abcdef")
	fluxOldKey  = []byte("tugboat-flux-old-key-0123456789ab")
	// testNow is the receiver's clock in tests: a little after the Flux
	// fixture was captured.
	testNow = time.Date(2026, 11, 22, 0, 11, 40, 0, time.UTC)
)

// harness is a receiver with an in-memory store and its own metrics
// registry.
type harness struct {
	t      testing.TB
	store  *memStore
	server *receiver.Server
	reg    *prometheus.Registry
}

func newHarness(t testing.TB, mutate ...func(*receiver.Options)) *harness {
	t.Helper()
	store := newMemStore()
	store.setKeys(testSpoke, testKey, nil)
	return newHarnessWithStore(t, store, mutate...)
}

// newHarnessWithStore is a receiver over an existing store: a restarted
// hub, with nothing in memory but what the store persisted.
func newHarnessWithStore(t testing.TB, store *memStore, mutate ...func(*receiver.Options)) *harness {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts := receiver.NewOptions()
	opts.Clock = func() time.Time { return testNow }
	opts.Registerer = reg
	opts.Spokes = store
	if tt, ok := t.(*testing.T); ok {
		opts.Logger = testr.NewWithOptions(tt, testr.Options{Verbosity: 1})
	} else {
		opts.Logger = logr.Discard()
	}
	for _, m := range mutate {
		m(&opts)
	}
	s, err := receiver.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, store: store, server: s, reg: reg}
}

// do serves req in process.
func (h *harness) do(req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.server.Handler().ServeHTTP(rec, req)
	return rec
}

// metric returns the value of the counter name with the given labels (0
// when absent).
func (h *harness) metric(name string, labels map[string]string) float64 {
	h.t.Helper()
	fams, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := labels[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

// signed returns a POST of body to path, signed with key at ts.
func signed(path string, key, body []byte, ts time.Time) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	wire.SignRequest(req, key, body, ts)
	return req
}

func event(rev int, kind wire.EventKind, seq int64) wire.Event {
	e := wire.Event{
		Spoke:     testSpoke,
		Namespace: "apps",
		Release:   "web",
		Revision:  rev,
		Kind:      kind,
		Type:      wire.EventTypeNormal,
		Reason:    "Created",
		Message:   "something happened",
		Time:      testNow.Add(time.Duration(seq) * time.Millisecond),
		Sequence:  seq,
	}
	switch kind {
	case wire.EventObjectCreated, wire.EventObjectUpdated, wire.EventObjectDeleted, wire.EventKubernetes:
		e.Object = &wire.ObjectRef{Kind: "Pod", Namespace: "apps", Name: "web-7d9f-x", UID: "0b6c3f5e-8d7a-4f43-9a51-1d0c2b1e9f00"}
	default:
		e.Reason = "Deployed"
		e.State = &wire.ReleaseState{
			Namespace: "apps", Release: "web", Chart: "web", ChartVersion: "1.4." + itoa(rev),
			Revision: rev, Status: wire.StatusDeployed, Health: wire.HealthCurrent,
		}
	}
	e.ID = e.ComputeID()
	return e
}

func itoa(n int) string { return strconv.Itoa(n) }

func batchOf(events ...wire.Event) *wire.EventBatch {
	return &wire.EventBatch{Spoke: testSpoke, AgentVersion: "v0.1.0", SentAt: testNow, Events: events}
}

// snapshotAt is snapshot() taken at testNow plus d: each snapshot of a
// spoke must be taken after the last one recorded.
func snapshotAt(d time.Duration) *wire.StateSnapshot {
	s := snapshot()
	s.TakenAt = testNow.Add(d)
	return s
}

func snapshot() *wire.StateSnapshot {
	return &wire.StateSnapshot{
		Spoke: testSpoke, AgentVersion: "v0.1.0", KubernetesVersion: "v1.36.3", TakenAt: testNow,
		Releases: []wire.ReleaseState{{
			Namespace: "apps", Release: "web", Chart: "web", ChartVersion: "1.4.0", Revision: 7,
			Status: wire.StatusDeployed, Health: wire.HealthCurrent,
		}},
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mutateJSON re-encodes v after fn changed its generic form.
func mutateJSON(t testing.TB, v any, fn func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(mustJSON(t, v), &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	return mustJSON(t, m)
}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func accepted(g Gomega, rec *httptest.ResponseRecorder) wire.AcceptedResponse {
	g.ExpectWithOffset(1, rec.Code).To(Equal(http.StatusAccepted), rec.Body.String())
	var resp wire.AcceptedResponse
	g.ExpectWithOffset(1, json.Unmarshal(rec.Body.Bytes(), &resp)).To(Succeed())
	return resp
}

func errorBody(g Gomega, body []byte) wire.ErrorResponse {
	var resp wire.ErrorResponse
	g.ExpectWithOffset(1, json.Unmarshal(body, &resp)).To(Succeed(), string(body))
	return resp
}
