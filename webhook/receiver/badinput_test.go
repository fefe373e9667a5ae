package receiver_test

import (
	"crypto/hmac"
	"crypto/sha1" // a row proves SHA-1 signatures are refused
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/e2e/fluxtest"
	"tugboat.dev/tugboat/webhook/receiver"
)

// badRow is one bad request: the code it gets, what its body must say
// (the problem, by name), and a prime that sets the scene first.
type badRow struct {
	endpoint, name string
	prime          func(t *testing.T, h *harness, acts *memActions)
	req            func(t *testing.T) *http.Request
	code           int
	want           string
}

// TestReceiver_badInputOnEveryEndpoint is the receiver's bad-input table
// (docs/security.md, "Bad input: the receiver"): for each endpoint, each row
// gets its code and a body that names the problem, and changes nothing:
// no event, snapshot, snapshot time or action outcome is recorded.
func TestReceiver_badInputOnEveryEndpoint(t *testing.T) {
	events := func(t *testing.T) []byte { return mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1))) }
	flux := func(t *testing.T) []byte {
		return mustJSON(t, helmReleaseEvent("UpgradeSucceeded", "info", "Helm upgrade succeeded for release apps/web.v3 with chart web@1.5.0", nil, testNow))
	}
	action := testAction(testSpoke, "web")
	outcomeBody := func(t *testing.T, result string) []byte { return mustJSON(t, outcome(action.ID, result, "")) }
	unauthorized := `{"error":"request not authenticated"}`
	suspend := func(_ *testing.T, h *harness, _ *memActions) { h.store.suspend(testSpoke, true) }
	stateAt := func(d time.Duration) func(t *testing.T) *http.Request {
		return func(t *testing.T) *http.Request {
			return signed(wire.StatePath(testSpoke), testKey, mustJSON(t, snapshotAt(d)), testNow)
		}
	}
	recordSnapshot := func(t *testing.T, h *harness, _ *memActions) {
		rec := h.do(signed(wire.StatePath(testSpoke), testKey, mustJSON(t, snapshot()), testNow))
		if rec.Code != http.StatusAccepted {
			t.Fatalf("priming snapshot: %d %s", rec.Code, rec.Body)
		}
	}

	rows := []badRow{
		// POST /v1/spokes/{spoke}/events
		{endpoint: "events", name: "no signature", code: http.StatusUnauthorized, want: unauthorized,
			req: func(t *testing.T) *http.Request {
				return httptest.NewRequest(http.MethodPost, wire.EventsPath(testSpoke), nil)
			}},
		{endpoint: "events", name: "signed with the Flux key", code: http.StatusUnauthorized, want: unauthorized,
			req: func(t *testing.T) *http.Request {
				return signed(wire.EventsPath(testSpoke), fluxTestKey, events(t), testNow)
			}},
		{endpoint: "events", name: "the spoke's key is shorter than 32 bytes", code: http.StatusUnauthorized, want: unauthorized,
			prime: func(_ *testing.T, h *harness, _ *memActions) { h.store.setKeys(testSpoke, testKey[:31], nil) },
			req: func(t *testing.T) *http.Request {
				return signed(wire.EventsPath(testSpoke), testKey[:31], events(t), testNow)
			}},
		{endpoint: "events", name: "two Spokes of the name share the key", code: http.StatusUnauthorized, want: unauthorized,
			prime: func(_ *testing.T, h *harness, _ *memActions) {
				h.store.addSpoke(receiver.Spoke{SpokeRef: receiver.SpokeRef{Namespace: "tenant-b", Name: testSpoke}, Keys: ingest.SpokeKeys{Current: testKey}})
			},
			req: func(t *testing.T) *http.Request {
				return signed(wire.EventsPath(testSpoke), testKey, events(t), testNow)
			}},
		{endpoint: "events", name: "suspended spoke", code: http.StatusServiceUnavailable, want: "spoke tenant-a/staging-1 is suspended", prime: suspend,
			req: func(t *testing.T) *http.Request {
				return signed(wire.EventsPath(testSpoke), testKey, events(t), testNow)
			}},
		{endpoint: "events", name: "event with an unknown kind", code: http.StatusBadRequest, want: `"field":"events[0].kind"`,
			req: func(t *testing.T) *http.Request {
				body := mutateJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)), func(m map[string]any) {
					m["events"].([]any)[0].(map[string]any)["kind"] = "Exploded"
				})
				return signed(wire.EventsPath(testSpoke), testKey, body, testNow)
			}},
		// Signed by staging-1, about another spoke: refused end to end, not
		// only by the decoder (issue 29, item 6).
		{endpoint: "events", name: "an event naming another spoke", code: http.StatusBadRequest, want: `"field":"events[0].spoke"`,
			req: func(t *testing.T) *http.Request {
				e := event(7, wire.EventObjectCreated, 1)
				e.Spoke = "staging-2"
				e.ID = e.ComputeID()
				return signed(wire.EventsPath(testSpoke), testKey, mustJSON(t, batchOf(e)), testNow)
			}},
		{endpoint: "events", name: "a batch naming another spoke", code: http.StatusBadRequest, want: `"field":"spoke","detail":"must equal the spoke in the path \"staging-1\""`,
			req: func(t *testing.T) *http.Request {
				b := batchOf()
				b.Spoke = "staging-2"
				e := event(7, wire.EventObjectCreated, 1)
				e.Spoke = "staging-2"
				e.ID = e.ComputeID()
				b.Events = []wire.Event{e}
				return signed(wire.EventsPath(testSpoke), testKey, mustJSON(t, b), testNow)
			}},
		{endpoint: "events", name: "body larger than the limit", code: http.StatusRequestEntityTooLarge, want: "body exceeds 1048576 bytes",
			req: func(t *testing.T) *http.Request {
				body := append(events(t), make([]byte, 1<<20)...)
				return signed(wire.EventsPath(testSpoke), testKey, body, testNow)
			}},

		// POST /v1/spokes/{spoke}/state
		{endpoint: "state", name: "snapshot older than the last recorded (a replay)", code: http.StatusConflict, want: "stale snapshot: takenAt 2026-11-22T00:10:40Z is not after",
			prime: recordSnapshot, req: stateAt(-time.Minute)},
		{endpoint: "state", name: "the last recorded snapshot again", code: http.StatusConflict, want: `"field":"takenAt"`,
			prime: recordSnapshot, req: stateAt(0)},
		{endpoint: "state", name: "snapshot taken in the future", code: http.StatusBadRequest, want: "ahead of the hub's clock",
			req: stateAt(time.Hour)},
		{endpoint: "state", name: "releases missing", code: http.StatusBadRequest, want: "releases: required",
			req: func(t *testing.T) *http.Request {
				body := mutateJSON(t, snapshot(), func(m map[string]any) { delete(m, "releases") })
				return signed(wire.StatePath(testSpoke), testKey, body, testNow)
			}},
		{endpoint: "state", name: "suspended spoke", code: http.StatusServiceUnavailable, want: "is suspended (spec.suspend is true)", prime: suspend,
			req: stateAt(time.Second)},
		{endpoint: "state", name: "GET", code: http.StatusMethodNotAllowed, want: "method GET not allowed",
			req: func(t *testing.T) *http.Request {
				return httptest.NewRequest(http.MethodGet, wire.StatePath(testSpoke), nil)
			}},

		// POST /v1/flux/{spoke}
		{endpoint: "flux", name: "signed with the agent's key", code: http.StatusUnauthorized, want: unauthorized,
			req: func(t *testing.T) *http.Request {
				b := flux(t)
				return fluxRequest(testSpoke, b, fluxtest.Sign(testKey, b))
			}},
		{endpoint: "flux", name: "SHA-1 signature", code: http.StatusUnauthorized, want: unauthorized,
			req: func(t *testing.T) *http.Request {
				b := flux(t)
				m := hmac.New(sha1.New, fluxTestKey)
				m.Write(b)
				return fluxRequest(testSpoke, b, "sha1="+hex.EncodeToString(m.Sum(nil)))
			}},
		{endpoint: "flux", name: "spoke without a Flux key", code: http.StatusUnauthorized, want: unauthorized,
			prime: func(_ *testing.T, h *harness, _ *memActions) { h.store.setFluxKeys(testSpoke, nil, nil) },
			req: func(t *testing.T) *http.Request {
				b := flux(t)
				return fluxRequest(testSpoke, b, fluxtest.Sign(fluxTestKey, b))
			}},
		{endpoint: "flux", name: "event older than the replay window", code: http.StatusUnauthorized, want: unauthorized,
			req: func(t *testing.T) *http.Request {
				b := mustJSON(t, helmReleaseEvent("UpgradeSucceeded", "info", "", nil, testNow.Add(-time.Hour)))
				return fluxRequest(testSpoke, b, fluxtest.Sign(fluxTestKey, b))
			}},
		{endpoint: "flux", name: "not a JSON object", code: http.StatusBadRequest, want: "body must be a JSON object",
			req: func(t *testing.T) *http.Request {
				b := []byte(`["event"]`)
				return fluxRequest(testSpoke, b, fluxtest.Sign(fluxTestKey, b))
			}},
		{endpoint: "flux", name: "reason missing", code: http.StatusBadRequest, want: `"field":"reason"`,
			req: func(t *testing.T) *http.Request {
				b := mustJSON(t, helmReleaseEvent("", "info", "", nil, testNow))
				return fluxRequest(testSpoke, b, fluxtest.Sign(fluxTestKey, b))
			}},
		{endpoint: "flux", name: "suspended spoke", code: http.StatusServiceUnavailable, want: "is suspended", prime: suspend,
			req: func(t *testing.T) *http.Request {
				b := flux(t)
				return fluxRequest(testSpoke, b, fluxtest.Sign(fluxTestKey, b))
			}},

		// GET /v1/spokes/{spoke}/actions and POST .../actions/{id}
		{endpoint: "actions", name: "poll without a signature", code: http.StatusUnauthorized, want: unauthorized,
			req: func(t *testing.T) *http.Request {
				return httptest.NewRequest(http.MethodGet, wire.ActionsPath(testSpoke), nil)
			}},
		{endpoint: "actions", name: "poll signed for another spoke's path", code: http.StatusUnauthorized, want: unauthorized,
			req: func(t *testing.T) *http.Request {
				req := httptest.NewRequest(http.MethodGet, wire.ActionsPath(testSpoke), nil)
				req.Header.Set(wire.HeaderTimestamp, itoa(int(testNow.Unix())))
				req.Header.Set(wire.HeaderSignature, wire.Sign(testKey, testNow, http.MethodGet, wire.ActionsPath(otherSpoke), nil))
				return req
			}},
		{endpoint: "actions", name: "poll of a suspended spoke", code: http.StatusServiceUnavailable, want: "is suspended", prime: suspend,
			req: func(t *testing.T) *http.Request { return poll(testSpoke, testKey) }},
		{endpoint: "actions", name: "outcome whose id is not the path's", code: http.StatusBadRequest, want: `"field":"id"`,
			req: func(t *testing.T) *http.Request {
				return signed(wire.ActionPath(testSpoke, testAction(testSpoke, "api").ID), testKey, outcomeBody(t, wire.ActionSucceeded), testNow)
			}},
		{endpoint: "actions", name: "outcome with an unknown result", code: http.StatusBadRequest, want: `"field":"result"`,
			req: func(t *testing.T) *http.Request {
				return signed(wire.ActionPath(testSpoke, action.ID), testKey, outcomeBody(t, "Done"), testNow)
			}},
		{endpoint: "actions", name: "outcome of another spoke's action", code: http.StatusNotFound, want: "spoke staging-1 has no action",
			prime: func(_ *testing.T, _ *harness, acts *memActions) { acts.queue(otherSpoke, testAction(otherSpoke, "db")) },
			req: func(t *testing.T) *http.Request {
				theirs := testAction(otherSpoke, "db")
				return signed(wire.ActionPath(testSpoke, theirs.ID), testKey, mustJSON(t, outcome(theirs.ID, wire.ActionSucceeded, "")), testNow)
			}},
		{endpoint: "actions", name: "outcome that contradicts the recorded one", code: http.StatusConflict, want: "already has a different outcome",
			prime: func(t *testing.T, h *harness, _ *memActions) {
				rec := h.do(signed(wire.ActionPath(testSpoke, action.ID), testKey, outcomeBody(t, wire.ActionSucceeded), testNow))
				if rec.Code != http.StatusOK {
					t.Fatalf("priming outcome: %d %s", rec.Code, rec.Body)
				}
			},
			req: func(t *testing.T) *http.Request {
				return signed(wire.ActionPath(testSpoke, action.ID), testKey, outcomeBody(t, wire.ActionFailed), testNow)
			}},
		// Previews (issue 26): over the bounds, a Secret's diff, or
		// malformed, never stored.
		{endpoint: "actions", name: "preview with a diff over 16 KiB", code: http.StatusBadRequest, want: `"field":"preview.objects[0].diff"`,
			req: func(t *testing.T) *http.Request {
				o := previewOutcome(action.ID, wire.PreviewObject{APIVersion: "v1", Kind: "ConfigMap", Name: "big", Change: wire.ChangeChanged,
					Diff: strings.Repeat("+x\n", wire.MaxPreviewObjectDiff)})
				return signed(wire.ActionPath(testSpoke, action.ID), testKey, mustJSON(t, o), testNow)
			}},
		{endpoint: "actions", name: "preview with a Secret's diff", code: http.StatusBadRequest, want: "a Secret's diff is never sent",
			req: func(t *testing.T) *http.Request {
				o := previewOutcome(action.ID, wire.PreviewObject{APIVersion: "v1", Kind: "Secret", Name: "db", Change: wire.ChangeChanged, Diff: "-password: hunter2\n"})
				return signed(wire.ActionPath(testSpoke, action.ID), testKey, mustJSON(t, o), testNow)
			}},
		{endpoint: "actions", name: "malformed preview", code: http.StatusBadRequest, want: `"field":"preview"`,
			req: func(t *testing.T) *http.Request {
				b := []byte(`{"id":"` + action.ID + `","result":"Succeeded","time":"2026-11-28T09:00:00Z","preview":{"objects":"all"}}`)
				return signed(wire.ActionPath(testSpoke, action.ID), testKey, b, testNow)
			}},
		{endpoint: "actions", name: "outcome by PUT", code: http.StatusMethodNotAllowed, want: "method PUT not allowed",
			req: func(t *testing.T) *http.Request {
				return httptest.NewRequest(http.MethodPut, wire.ActionPath(testSpoke, action.ID), nil)
			}},
	}
	for _, row := range rows {
		t.Run(row.endpoint+": "+row.name, func(t *testing.T) {
			g := NewWithT(t)
			h, acts := newActionsHarness(t)
			h.store.setFluxKeys(testSpoke, fluxTestKey, nil)
			acts.queue(testSpoke, action)
			if row.prime != nil {
				row.prime(t, h, acts)
			}
			before := struct {
				total    int
				takenAt  time.Time
				outcomes int
			}{h.store.total(), h.store.lastSnapshotTakenAt(realSpoke), len(acts.outcomes)}

			rec := h.do(row.req(t))
			g.Expect(rec.Code).To(Equal(row.code), rec.Body.String())
			g.Expect(rec.Header().Get("Content-Type")).To(Equal("application/json"))
			g.Expect(rec.Body.String()).To(ContainSubstring(row.want))
			g.Expect(h.store.total()).To(Equal(before.total), "nothing recorded")
			g.Expect(h.store.lastSnapshotTakenAt(realSpoke)).To(Equal(before.takenAt), "no snapshot time persisted")
			acts.mu.Lock()
			g.Expect(acts.outcomes).To(HaveLen(before.outcomes), "no outcome recorded")
			acts.mu.Unlock()
		})
	}
}
