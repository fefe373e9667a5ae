package receiver_test

import (
	"crypto/hmac"
	"crypto/sha1" // the test proves SHA-1 signatures are refused
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/e2e/fluxtest"
	"tugboat.dev/tugboat/webhook/receiver"
)

var realSpoke = receiver.SpokeRef{Namespace: testNamespace, Name: testSpoke}

// TestReceiver_suspendedSpokeGets503 is issue 12 Medium 5: a Spoke with
// spec.suspend gets 503 with a body that says so on every endpoint, and
// nothing is recorded; resumed, it is served again.
func TestReceiver_suspendedSpokeGets503(t *testing.T) {
	g := NewWithT(t)
	h := fluxHarness(t)
	h.store.suspend(testSpoke, true)
	events := mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)))
	flux := helmReleaseEvent("UpgradeSucceeded", "info", "Helm upgrade succeeded for release apps/web.v3 with chart web@1.5.0", nil, testNow)
	for name, rec := range map[string]int{
		"events": h.do(signed(wire.EventsPath(testSpoke), testKey, events, testNow)).Code,
		"state":  h.do(signed(wire.StatePath(testSpoke), testKey, mustJSON(t, snapshot()), testNow)).Code,
		"flux":   postFlux(h, testSpoke, fluxTestKey, flux).Code,
	} {
		g.Expect(rec).To(Equal(http.StatusServiceUnavailable), name)
	}
	rec := h.do(signed(wire.EventsPath(testSpoke), testKey, events, testNow))
	g.Expect(rec.Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(rec.Header().Get("Retry-After")).To(Equal("60"))
	g.Expect(errorBody(g, rec.Body.Bytes()).Error).To(Equal(
		"spoke tenant-a/staging-1 is suspended (spec.suspend is true): the hub ignores its requests until it is resumed"))
	g.Expect(h.store.total()).To(BeZero())
	// Only an authenticated request learns that the spoke is suspended.
	rec = h.do(signed(wire.EventsPath(testSpoke), wrongKey, events, testNow))
	g.Expect(rec.Code).To(Equal(http.StatusUnauthorized))

	h.store.suspend(testSpoke, false)
	g.Expect(accepted(g, h.do(signed(wire.EventsPath(testSpoke), testKey, events, testNow))).Accepted).To(Equal(1))
}

// TestReceiver_squatterCannotBlockTheRealSpoke is issue 12 Medium 6: a
// Spoke of the same name in another namespace, with its own key, neither
// blocks the real one nor receives its events; each is recorded into its
// own Spoke, and neither's events look like the other's redeliveries.
func TestReceiver_squatterCannotBlockTheRealSpoke(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	squatter := receiver.SpokeRef{Namespace: "tenant-b", Name: testSpoke}
	squatterKey := []byte("tenant-b-squatter-key-0123456789abc")
	h.store.addSpoke(receiver.Spoke{SpokeRef: squatter, Keys: ingest.SpokeKeys{Current: squatterKey}})

	body := mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)))
	// The squatter sends the real spoke's batch first (it can guess it).
	g.Expect(accepted(g, h.do(signed(wire.EventsPath(testSpoke), squatterKey, body, testNow)))).
		To(Equal(wire.AcceptedResponse{Received: 1, Accepted: 1}))
	// The real spoke is served, and its event is not taken for a duplicate.
	g.Expect(accepted(g, h.do(signed(wire.EventsPath(testSpoke), testKey, body, testNow)))).
		To(Equal(wire.AcceptedResponse{Received: 1, Accepted: 1}))
	g.Expect(accepted(g, h.do(signed(wire.StatePath(testSpoke), testKey, mustJSON(t, snapshot()), testNow))).Accepted).To(Equal(1))
	g.Expect(h.store.recordedInto(realSpoke)).To(Equal(1))
	g.Expect(h.store.recordedInto(squatter)).To(Equal(1))
	g.Expect(h.store.lastSnapshotTakenAt(realSpoke)).To(Equal(testNow))
	g.Expect(h.store.lastSnapshotTakenAt(squatter)).To(BeZero())
	g.Expect(h.store.keyIDOf(realSpoke)).To(Equal(wire.KeyID(testKey)), "the Store is told which key verified the snapshot")

	// Two Spokes of one name that share a key cannot be told apart: refused.
	h.store.addSpoke(receiver.Spoke{SpokeRef: receiver.SpokeRef{Namespace: "tenant-c", Name: testSpoke}, Keys: ingest.SpokeKeys{Current: testKey}})
	rec := h.do(signed(wire.EventsPath(testSpoke), testKey, mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 2))), testNow))
	g.Expect(rec.Code).To(Equal(http.StatusUnauthorized))
	g.Expect(h.metric("tugboat_receiver_rejected_total", map[string]string{"reason": "ambiguous_spoke"})).To(Equal(1.0))
	g.Expect(h.store.recordedInto(realSpoke)).To(Equal(1))
}

// TestFlux_refusesTheAgentKeyAndSHA1 is issue 12 Medium 4: the Flux
// endpoint verifies with the Spoke's Flux keys only (the agent's key is
// refused), refuses SHA-1 signatures, and refuses keys shorter than
// wire.MinSpokeKeySize.
func TestFlux_refusesTheAgentKeyAndSHA1(t *testing.T) {
	g := NewWithT(t)
	h := fluxHarness(t)
	p := helmReleaseEvent("UpgradeSucceeded", "info", "Helm upgrade succeeded for release apps/web.v3 with chart web@1.5.0", nil, testNow)

	g.Expect(postFlux(h, testSpoke, testKey, p).Code).To(Equal(http.StatusUnauthorized), "the agent's key")
	g.Expect(postFlux(h, testSpoke, oldKey, p).Code).To(Equal(http.StatusUnauthorized), "the agent's previous key")

	b := mustJSON(t, p)
	m := hmac.New(sha1.New, fluxTestKey)
	m.Write(b)
	rec := h.do(fluxRequest(testSpoke, b, "sha1="+hex.EncodeToString(m.Sum(nil))))
	g.Expect(rec.Code).To(Equal(http.StatusUnauthorized), "sha1")
	g.Expect(h.metric("tugboat_receiver_rejected_total", map[string]string{"endpoint": "flux", "reason": "malformed_signature"})).To(Equal(1.0))

	short := []byte("a-flux-key-of-31-bytes-01234567")[:31]
	h.store.setFluxKeys(testSpoke, short, nil)
	g.Expect(postFlux(h, testSpoke, short, p).Code).To(Equal(http.StatusUnauthorized), "a short key")
	g.Expect(h.metric("tugboat_receiver_rejected_total", map[string]string{"endpoint": "flux", "reason": "invalid_key"})).To(Equal(1.0))
	g.Expect(h.store.total()).To(BeZero())

	// The Flux key signs; the agent endpoints do not take it either.
	h.store.setFluxKeys(testSpoke, fluxTestKey, nil)
	g.Expect(accepted(g, postFlux(h, testSpoke, fluxTestKey, p)).Accepted).To(Equal(1))
	g.Expect(h.do(signed(wire.EventsPath(testSpoke), fluxTestKey, mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1))), testNow)).Code).
		To(Equal(http.StatusUnauthorized))
}

// TestFlux_refusesAFluxKeyEqualToAnAgentKey is issue 23 Low 9: a Spoke
// whose Secret holds the agent's key as its Flux key (current or previous,
// either way round) cannot use the Flux endpoint with it: whoever reads the
// Provider's Secret on the spoke would otherwise hold the agent's key. The
// request is refused like any other (401, reason invalid_key), and a Flux
// key of its own still works.
func TestFlux_refusesAFluxKeyEqualToAnAgentKey(t *testing.T) {
	g := NewWithT(t)
	h := fluxHarness(t)
	p := helmReleaseEvent("UpgradeSucceeded", "info", "Helm upgrade succeeded for release apps/web.v3 with chart web@1.5.0", nil, testNow)
	for name, keys := range map[string]ingest.SpokeKeys{
		"fluxKey is key":         {Current: testKey},
		"fluxKey is previousKey": {Current: oldKey},
	} {
		h.store.setFluxKeys(testSpoke, keys.Current, keys.Previous)
		rec := postFlux(h, testSpoke, keys.Current, p)
		g.Expect(rec.Code).To(Equal(http.StatusUnauthorized), name)
		g.Expect(errorBody(g, rec.Body.Bytes()).Error).To(Equal("request not authenticated"), name)
	}
	g.Expect(h.metric("tugboat_receiver_rejected_total", map[string]string{"endpoint": "flux", "reason": "invalid_key"})).To(Equal(2.0))

	// A previous Flux key equal to the agent's is dropped; the current one,
	// the Flux Provider's own, verifies.
	h.store.setFluxKeys(testSpoke, fluxTestKey, testKey)
	g.Expect(postFlux(h, testSpoke, testKey, p).Code).To(Equal(http.StatusUnauthorized), "previousFluxKey is key")
	g.Expect(h.store.total()).To(BeZero())
	g.Expect(accepted(g, postFlux(h, testSpoke, fluxTestKey, p)).Accepted).To(Equal(1))
}

// TestReceiver_refusesAgentKeysShorterThanTheMinimum: a 31-byte agent key
// authenticates nothing.
func TestReceiver_refusesAgentKeysShorterThanTheMinimum(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	short := testKey[:wire.MinSpokeKeySize-1]
	h.store.setKeys(testSpoke, short, nil)
	g.Expect(h.do(signed(wire.EventsPath(testSpoke), short, mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1))), testNow)).Code).
		To(Equal(http.StatusUnauthorized))
	g.Expect(h.metric("tugboat_receiver_rejected_total", map[string]string{"reason": "invalid_key"})).To(Equal(1.0))
	g.Expect(h.store.total()).To(BeZero())
}

// TestReceiver_refusesReplayedSnapshots is issue 12 Low 1: a state
// snapshot must be taken after the last one recorded for the spoke; an
// older one (a replay) is refused with 409 naming both times, and so is one
// from a clock far ahead. The floor survives a restart of the receiver (it
// is persisted through the SpokeDirectory).
func TestReceiver_refusesReplayedSnapshots(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	post := func(h *harness, snap *wire.StateSnapshot) int {
		return h.do(signed(wire.StatePath(testSpoke), testKey, mustJSON(t, snap), testNow)).Code
	}
	older, newer := snapshotAt(-time.Minute), snapshot()
	newer.Releases = []wire.ReleaseState{} // everything uninstalled since
	g.Expect(post(h, older)).To(Equal(http.StatusAccepted))
	g.Expect(post(h, newer)).To(Equal(http.StatusAccepted))

	rec := h.do(signed(wire.StatePath(testSpoke), testKey, mustJSON(t, older), testNow))
	g.Expect(rec.Code).To(Equal(http.StatusConflict))
	resp := errorBody(g, rec.Body.Bytes())
	g.Expect(resp.Error).To(Equal("stale snapshot: takenAt 2026-11-22T00:10:40Z is not after the last snapshot recorded for spoke staging-1 (taken at 2026-11-22T00:11:40Z): send a new snapshot"))
	g.Expect(resp.Fields).To(ConsistOf(wire.FieldError{Field: "takenAt", Detail: "must be after 2026-11-22T00:11:40Z"}))
	g.Expect(post(h, newer)).To(Equal(http.StatusConflict), "the same snapshot again")
	g.Expect(h.store.snapshotsOf(testSpoke)).To(HaveLen(2))

	// A receiver that restarts (no memory) still refuses the replay.
	restarted := newHarnessWithStore(t, h.store)
	g.Expect(post(restarted, older)).To(Equal(http.StatusConflict))
	g.Expect(post(restarted, snapshotAt(time.Second))).To(Equal(http.StatusAccepted))

	// From a clock far ahead: 400 naming the field, nothing recorded.
	rec = restarted.do(signed(wire.StatePath(testSpoke), testKey, mustJSON(t, snapshotAt(time.Hour)), testNow))
	g.Expect(rec.Code).To(Equal(http.StatusBadRequest))
	g.Expect(rec.Body.String()).To(ContainSubstring(`"field":"takenAt"`))
	g.Expect(rec.Body.String()).To(ContainSubstring("ahead of the hub's clock"))
	g.Expect(h.store.snapshotsOf(testSpoke)).To(HaveLen(3))
}

// TestReceiver_unknownAndKnownSpokesCostTheSame is issue 12 Low 2: a
// request for an unknown spoke does the same verification work as one for
// a known spoke with a bad signature (the HMACs are counted, not timed).
func TestReceiver_unknownAndKnownSpokesCostTheSame(t *testing.T) {
	g := NewWithT(t)
	body := mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)))
	work := func(h *harness, endpoint string, req *http.Request) float64 {
		before := h.metric("tugboat_receiver_signature_verifications_total", map[string]string{"endpoint": endpoint})
		g.Expect(h.do(req).Code).To(Equal(http.StatusUnauthorized))
		return h.metric("tugboat_receiver_signature_verifications_total", map[string]string{"endpoint": endpoint}) - before
	}
	h := fluxHarness(t)
	h.store.setKeys("one-key", testKey, nil)
	unknown := work(h, "events", signed(wire.EventsPath("nobody"), testKey, body, testNow))
	g.Expect(unknown).To(BeNumerically(">", 0))
	g.Expect(work(h, "events", signed(wire.EventsPath(testSpoke), wrongKey, body, testNow))).To(Equal(unknown), "known, two keys")
	g.Expect(work(h, "events", signed(wire.EventsPath("one-key"), wrongKey, body, testNow))).To(Equal(unknown), "known, one key")
	g.Expect(work(h, "events", signed(wire.EventsPath("Not_A-Name"), testKey, body, testNow))).To(Equal(unknown), "not a name")

	p := mustJSON(t, helmReleaseEvent("UpgradeSucceeded", "info", "", nil, testNow))
	fluxUnknown := work(h, "flux", fluxRequest("nobody", p, fluxtest.Sign(fluxTestKey, p)))
	g.Expect(fluxUnknown).To(Equal(unknown))
	g.Expect(work(h, "flux", fluxRequest(testSpoke, p, fluxtest.Sign(wrongKey, p)))).To(Equal(fluxUnknown))
	// And the answers are the same.
	a := h.do(signed(wire.EventsPath("nobody"), testKey, body, testNow))
	b := h.do(signed(wire.EventsPath(testSpoke), wrongKey, body, testNow))
	g.Expect(a.Body.String()).To(Equal(b.Body.String()))
}

// TestReceiver_withoutASpokeDirectory: a receiver given only a Store
// authenticates agents with Store.SpokeKeys and, having no Flux keys,
// refuses every Flux request.
func TestReceiver_withoutASpokeDirectory(t *testing.T) {
	g := NewWithT(t)
	h := fluxHarness(t)
	h = newHarnessWithStore(t, h.store, func(o *receiver.Options) { o.Spokes = nil })
	g.Expect(accepted(g, h.do(signed(wire.EventsPath(testSpoke), testKey, mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1))), testNow))).Accepted).To(Equal(1))
	p := helmReleaseEvent("UpgradeSucceeded", "info", "Helm upgrade succeeded for release apps/web.v3 with chart web@1.5.0", nil, testNow)
	g.Expect(postFlux(h, testSpoke, fluxTestKey, p).Code).To(Equal(http.StatusUnauthorized))
	g.Expect(postFlux(h, testSpoke, testKey, p).Code).To(Equal(http.StatusUnauthorized))
	g.Expect(h.store.recorded(testSpoke)).To(HaveLen(1))
}
