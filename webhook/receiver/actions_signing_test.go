package receiver_test

import (
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/webhook/receiver"
)

// The hub signs its answers on the actions channel with the spoke's keys,
// bound to the request, so an agent can refuse an injected action
// (issue 12, Medium 2).
func TestActions_answersAreSignedForTheRequest(t *testing.T) {
	g := NewWithT(t)
	h, acts := newActionsHarness(t, func(o *receiver.Options) { o.ActionPollTimeout = 100 * time.Millisecond })
	a := testAction(testSpoke, "web")
	acts.queue(testSpoke, a)

	req := poll(testSpoke, testKey)
	nonce := wire.NewNonce()
	req.Header.Set(wire.HeaderNonce, nonce)
	rec := h.do(req)
	g.Expect(actionList(g, rec)).To(HaveLen(1))
	sig := rec.Header().Get(wire.HeaderResponseSignature)
	g.Expect(wire.VerifyResponse(testKey, req, rec.Code, sig, rec.Body.Bytes())).To(Succeed())

	// Bound to this request: the same answer does not verify for a later
	// poll (another nonce).
	later := poll(testSpoke, testKey)
	later.Header.Set(wire.HeaderNonce, wire.NewNonce())
	g.Expect(wire.VerifyResponse(testKey, later, rec.Code, sig, rec.Body.Bytes())).To(MatchError(wire.ErrSignatureMismatch))

	// The outcome's acknowledgement is signed too.
	post := signed(wire.ActionPath(testSpoke, a.ID), testKey, mustJSON(t, outcome(a.ID, wire.ActionSucceeded, "")), testNow)
	post.Header.Set(wire.HeaderNonce, wire.NewNonce())
	rec = h.do(post)
	g.Expect(rec.Code).To(Equal(http.StatusOK), rec.Body.String())
	g.Expect(wire.VerifyResponse(testKey, post, rec.Code, rec.Header().Get(wire.HeaderResponseSignature), rec.Body.Bytes())).To(Succeed())

	// An agent from before response signing sends no nonce: the answer goes
	// unsigned, as before.
	rec = h.do(poll(testSpoke, testKey))
	g.Expect(actionList(g, rec)).To(BeEmpty())
	g.Expect(rec.Header().Values(wire.HeaderResponseSignature)).To(BeEmpty())
}

// During a key rotation the agent may hold either key: the answer carries a
// signature under each.
func TestActions_answersAreSignedWithBothKeysDuringARotation(t *testing.T) {
	g := NewWithT(t)
	h, acts := newActionsHarness(t)
	newKey := []byte("tugboat-rotated-key-0123456789abcdef")
	h.store.setKeys(testSpoke, newKey, testKey)
	acts.queue(testSpoke, testAction(testSpoke, "web"))
	for _, key := range [][]byte{testKey, newKey} {
		req := poll(testSpoke, key)
		req.Header.Set(wire.HeaderNonce, wire.NewNonce())
		rec := h.do(req)
		g.Expect(actionList(g, rec)).To(HaveLen(1))
		sig := rec.Header().Get(wire.HeaderResponseSignature)
		g.Expect(wire.VerifyResponse(key, req, rec.Code, sig, rec.Body.Bytes())).To(Succeed())
	}
}

// TestActions_aSquatterDoesNotBlockTheRealSpokesActions is issue 23 Medium
// 8: with a Spoke of the same name in another namespace (its own key), the
// real spoke's polls and outcomes are answered 200 and signed with the keys
// of the Spoke the request was authenticated as (before, the answer's keys
// were looked up again by name, which the squatter made ambiguous: every
// poll was answered 503). The squatter gets its own namespace's actions
// (none), signed with its own key.
func TestActions_aSquatterDoesNotBlockTheRealSpokesActions(t *testing.T) {
	g := NewWithT(t)
	h, acts := newActionsHarness(t, func(o *receiver.Options) { o.ActionPollTimeout = 100 * time.Millisecond })
	squatterKey := []byte("tenant-b-squatter-key-0123456789abc")
	h.store.addSpoke(receiver.Spoke{SpokeRef: receiver.SpokeRef{Namespace: "tenant-b", Name: testSpoke}, Keys: ingest.SpokeKeys{Current: squatterKey}})
	a := testAction(testSpoke, "web")
	acts.queue(testSpoke, a)

	req := poll(testSpoke, testKey)
	req.Header.Set(wire.HeaderNonce, wire.NewNonce())
	rec := h.do(req)
	g.Expect(rec.Code).To(Equal(http.StatusOK), rec.Body.String())
	g.Expect(actionList(g, rec)).To(ConsistOf(HaveField("ID", a.ID)))
	g.Expect(wire.VerifyResponse(testKey, req, rec.Code, rec.Header().Get(wire.HeaderResponseSignature), rec.Body.Bytes())).To(Succeed())

	post := signed(wire.ActionPath(testSpoke, a.ID), testKey, mustJSON(t, outcome(a.ID, wire.ActionSucceeded, "")), testNow)
	post.Header.Set(wire.HeaderNonce, wire.NewNonce())
	rec = h.do(post)
	g.Expect(rec.Code).To(Equal(http.StatusOK), rec.Body.String())
	g.Expect(wire.VerifyResponse(testKey, post, rec.Code, rec.Header().Get(wire.HeaderResponseSignature), rec.Body.Bytes())).To(Succeed())
	g.Expect(acts.outcomes).To(HaveKey(a.ID))

	req = poll(testSpoke, squatterKey)
	req.Header.Set(wire.HeaderNonce, wire.NewNonce())
	rec = h.do(req)
	g.Expect(actionList(g, rec)).To(BeEmpty(), "the squatter gets none of the real spoke's actions")
	g.Expect(wire.VerifyResponse(squatterKey, req, rec.Code, rec.Header().Get(wire.HeaderResponseSignature), rec.Body.Bytes())).To(Succeed())
	g.Expect(wire.VerifyResponse(testKey, req, rec.Code, rec.Header().Get(wire.HeaderResponseSignature), rec.Body.Bytes())).NotTo(Succeed())
}
