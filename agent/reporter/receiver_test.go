package reporter

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tugboat.dev/tugboat/api/wire"
)

// receiver is a hub stand-in for tests: a real TLS server that verifies
// every request's signature (401 otherwise), decodes bodies with the wire
// decoders (400 otherwise), de-duplicates events by id like the hub, and
// records what it accepted and when.
type receiver struct {
	spoke  string
	caFile string

	mu       sync.Mutex
	srv      *httptest.Server
	addr     string
	verifier *wire.Verifier
	// hook, when set, may answer a verified, decoded request itself (code
	// != 0). batch is nil for state posts.
	hook     func(kind string, batch *wire.EventBatch) (code int, header http.Header)
	events   map[string]acceptedEvent
	batches  []int // sizes of accepted batches, in order
	states   []acceptedState
	requests []request
}

type acceptedEvent struct {
	ev wire.Event
	at time.Time
}

type acceptedState struct {
	snap wire.StateSnapshot
	at   time.Time
}

type request struct {
	kind string // events, state, other
	code int
	at   time.Time
}

// receivers numbers receivers, so that every test (and every -count run)
// has its own spoke name, hence its own metric series.
var receivers atomic.Int64

// newReceiver starts a receiver for a spoke named prefix-N.
func newReceiver(t testing.TB, prefix string, key []byte) *receiver {
	t.Helper()
	spoke := fmt.Sprintf("%s-%d", prefix, receivers.Add(1))
	rc := &receiver{spoke: spoke, events: map[string]acceptedEvent{}}
	rc.setKey(t, key)
	rc.srv = httptest.NewUnstartedServer(rc)
	rc.srv.StartTLS()
	rc.addr = rc.srv.Listener.Addr().String()
	rc.caFile = filepath.Join(t.TempDir(), "ca.pem")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.srv.Certificate().Raw})
	if err := os.WriteFile(rc.caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.stop)
	return rc
}

func (rc *receiver) url() string { return "https://" + rc.addr }

// setKey makes the receiver accept signatures made with key only.
func (rc *receiver) setKey(t testing.TB, key []byte) {
	t.Helper()
	v, err := wire.NewVerifier(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	rc.verifier = v
	rc.mu.Unlock()
}

func (rc *receiver) setHook(h func(kind string, batch *wire.EventBatch) (int, http.Header)) {
	rc.mu.Lock()
	rc.hook = h
	rc.mu.Unlock()
}

// stop closes the listener: the hub is unreachable.
func (rc *receiver) stop() {
	rc.mu.Lock()
	srv := rc.srv
	rc.srv = nil
	rc.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// restart listens again on the same address, with the same certificate.
func (rc *receiver) restart(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", rc.addr)
	if err != nil {
		t.Fatalf("re-listening on %s: %v", rc.addr, err)
	}
	srv := httptest.NewUnstartedServer(rc)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.StartTLS()
	rc.mu.Lock()
	rc.srv = srv
	rc.mu.Unlock()
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, wire.DefaultStateSnapshotLimit))
	kind := "other"
	switch r.URL.Path {
	case wire.EventsPath(rc.spoke):
		kind = "events"
	case wire.StatePath(rc.spoke):
		kind = "state"
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	code, header, resp := rc.handle(r, kind, body, readErr, now)
	rc.requests = append(rc.requests, request{kind: kind, code: code, at: now})
	for k, vs := range header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(resp)
}

// handle answers one request; rc.mu is held.
func (rc *receiver) handle(r *http.Request, kind string, body []byte, readErr error, now time.Time) (int, http.Header, any) {
	fail := func(code int, err error) (int, http.Header, any) { return code, nil, wire.NewErrorResponse(err) }
	switch {
	case readErr != nil:
		return fail(http.StatusRequestEntityTooLarge, readErr)
	case r.Method != http.MethodPost:
		return http.StatusMethodNotAllowed, nil, wire.ErrorResponse{Error: "method not allowed"}
	}
	if err := rc.verifier.VerifyRequest(r, body); err != nil {
		return fail(http.StatusUnauthorized, err)
	}
	switch kind {
	case "events":
		batch, err := wire.DecodeEventBatch(bytes.NewReader(body), 0)
		if err != nil {
			return fail(http.StatusBadRequest, err)
		}
		if batch.Spoke != rc.spoke {
			return http.StatusBadRequest, nil, wire.ErrorResponse{Error: "spoke does not match the path"}
		}
		if rc.hook != nil {
			if code, h := rc.hook(kind, batch); code != 0 {
				return code, h, wire.ErrorResponse{Error: http.StatusText(code), Fields: []wire.FieldError{{Field: "events", Detail: "hook"}}}
			}
		}
		res := wire.AcceptedResponse{Received: len(batch.Events)}
		for _, ev := range batch.Events {
			if _, dup := rc.events[ev.ID]; dup {
				res.Duplicates++
				continue
			}
			rc.events[ev.ID] = acceptedEvent{ev: ev, at: now}
			res.Accepted++
		}
		rc.batches = append(rc.batches, len(batch.Events))
		return http.StatusAccepted, nil, res
	case "state":
		snap, err := wire.DecodeStateSnapshot(bytes.NewReader(body), 0)
		if err != nil {
			return fail(http.StatusBadRequest, err)
		}
		if snap.Spoke != rc.spoke {
			return http.StatusBadRequest, nil, wire.ErrorResponse{Error: "spoke does not match the path"}
		}
		if rc.hook != nil {
			if code, h := rc.hook(kind, nil); code != 0 {
				return code, h, wire.ErrorResponse{Error: http.StatusText(code)}
			}
		}
		rc.states = append(rc.states, acceptedState{snap: *snap, at: now})
		return http.StatusAccepted, nil, wire.AcceptedResponse{Received: len(snap.Releases), Accepted: len(snap.Releases)}
	}
	return http.StatusNotFound, nil, wire.ErrorResponse{Error: "not found"}
}

// eventCount is how many distinct events were accepted.
func (rc *receiver) eventCount() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.events)
}

func (rc *receiver) hasEvent(id string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	_, ok := rc.events[id]
	return ok
}

// lastEventAt is when the newest distinct event was first accepted.
func (rc *receiver) lastEventAt() time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var last time.Time
	for _, e := range rc.events {
		if e.at.After(last) {
			last = e.at
		}
	}
	return last
}

func (rc *receiver) batchSizes() []int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]int(nil), rc.batches...)
}

func (rc *receiver) stateCount() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.states)
}

// statesSince returns the accepted snapshots received at or after t.
func (rc *receiver) statesSince(t time.Time) []acceptedState {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []acceptedState
	for _, s := range rc.states {
		if !s.at.Before(t) {
			out = append(out, s)
		}
	}
	return out
}

// requestsOf returns the requests of a kind, in arrival order.
func (rc *receiver) requestsOf(kind string) []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []request
	for _, r := range rc.requests {
		if r.kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// countCode counts requests answered with code.
func (rc *receiver) countCode(code int) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, r := range rc.requests {
		if r.code == code {
			n++
		}
	}
	return n
}
