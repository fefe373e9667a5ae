package receiver_test

import (
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
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
