package receiver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
)

// Authentication, the same for every endpoint:
//
//  1. the path's name gives the candidate Spokes (SpokeDirectory.Spokes):
//     none when the name is unknown, several when Spokes of one name live in
//     several namespaces;
//  2. the request is verified against each candidate's two keys (current
//     and previous). A candidate with one key, a key shorter than
//     wire.MinSpokeKeySize, on the Flux endpoint a Flux key equal to one of its agent
//     keys (keyKind.of), or no candidate at all is verified against the server's
//     dummy keys (random, never known to anyone) instead, so an unknown
//     spoke, a known one with a bad signature and one with a broken key do
//     the same HMAC work and get the same 401: neither the body nor the
//     response time says whether the spoke exists;
//     When no candidate matches because of a signature mismatch and the
//     directory caches keys (KeyRefresher), the keys of the mismatched
//     candidates are re-read (at most once per second per Spoke, and at a
//     capped rate over all Spokes) and the
//     request verified again against a candidate only if its keys changed:
//     a bad signature costs the same HMAC work as before, and an unknown
//     spoke never causes a read. What remains is that a known spoke's bad
//     request may cost one read of its key Secret, at most one a second
//     per Spoke and a capped number a second over all of them;
//  3. exactly one candidate must match: it is the request's Spoke
//     (passed to the Store and the ingest.ActionStore as Spoke.Authenticated,
//     an explicit value: namespace, name, key id). Two matching
//     candidates (Spokes of one name sharing a key) are refused as
//     ambiguous. A Spoke squatting on another's name in another namespace
//     therefore never blocks it: the squatter does not hold its key;
//  4. a suspended Spoke is answered 503 with a body that says so;
//  5. the Spoke's token bucket (by namespace and name), else 429.

// keysPerVerification is how many keys every verification tries: a
// spoke's current and previous key, padded with dummy keys.
const keysPerVerification = 2

// suspendedRetryAfter is the Retry-After of a suspended spoke's 503.
const suspendedRetryAfter = time.Minute

// keyKind selects the agent's keys or the Flux Provider's.
type keyKind int

const (
	agentKeys keyKind = iota
	fluxKeys
)

// of returns the keys of sp of kind k, and why they cannot authenticate
// anything, if they cannot beyond what verificationKeys checks.
//
// The Flux keys are sp's Flux keys without any that equals one of its agent
// keys: the Flux Provider's token is readable by whoever can read Flux's
// Secret on the spoke, and an agent key there would let them act as the
// spoke's agent (send events and snapshots, poll and answer actions). A
// current Flux key equal to an agent key authenticates nothing on the Flux
// endpoint; a previous one equal to an agent key is dropped. (The Spoke
// controller reports such a Secret as Stalled, InvalidSpec.)
func (k keyKind) of(sp *Spoke) (ingest.SpokeKeys, string) {
	if k != fluxKeys {
		return sp.Keys, ""
	}
	isAgentKey := func(key []byte) bool {
		return len(key) > 0 && (hmac.Equal(key, sp.Keys.Current) || hmac.Equal(key, sp.Keys.Previous))
	}
	keys := sp.FluxKeys
	if isAgentKey(keys.Previous) {
		keys.Previous = nil
	}
	if isAgentKey(keys.Current) {
		return ingest.SpokeKeys{}, "the Flux key equals an agent key: whoever reads the Flux Provider's Secret on the spoke could act as its agent"
	}
	return keys, ""
}

// keysOf returns exactly keysPerVerification keys of sp, of kind k, to
// verify with (verificationKeys), and the reason, if any, why they cannot
// authenticate anything.
func (s *Server) keysOf(sp *Spoke, k keyKind) ([keysPerVerification][]byte, string) {
	keys, problem := k.of(sp)
	out, p := s.verificationKeys(keys)
	if problem == "" {
		problem = p
	}
	return out, problem
}

// newDummyKeys returns keysPerVerification random keys of wire.MinSpokeKeySize.
func newDummyKeys() [keysPerVerification][]byte {
	var keys [keysPerVerification][]byte
	for i := range keys {
		keys[i] = make([]byte, wire.MinSpokeKeySize)
		_, _ = rand.Read(keys[i]) // crypto/rand.Read never fails
	}
	return keys
}

// verificationKeys returns exactly keysPerVerification keys to verify with:
// keys's own where they are long enough, dummy ones in the other places,
// and the reason, if any, why keys cannot authenticate anything.
func (s *Server) verificationKeys(keys ingest.SpokeKeys) (out [keysPerVerification][]byte, problem string) {
	out = s.dummyKeys
	switch {
	case len(keys.Current) == 0:
		return out, "no key"
	case len(keys.Current) < wire.MinSpokeKeySize:
		return out, fmt.Sprintf("the current key is %d bytes; at least %d are required", len(keys.Current), wire.MinSpokeKeySize)
	}
	out[0] = keys.Current
	if len(keys.Previous) >= wire.MinSpokeKeySize {
		out[1] = keys.Previous
	}
	return out, ""
}

// verifierCache keeps one wire.Verifier per key pair.
type verifierCache struct {
	window time.Duration
	now    func() time.Time
	mu     sync.RWMutex
	m      map[string]*cachedVerifier
}

type cachedVerifier struct {
	keys [keysPerVerification][]byte
	v    *wire.Verifier
}

func newVerifierCache(window time.Duration, now func() time.Time) *verifierCache {
	return &verifierCache{window: window, now: now, m: make(map[string]*cachedVerifier)}
}

// get returns a verifier for keys, cached under id.
func (c *verifierCache) get(id string, keys [keysPerVerification][]byte) (*wire.Verifier, error) {
	c.mu.RLock()
	cv := c.m[id]
	c.mu.RUnlock()
	if cv != nil && bytes.Equal(cv.keys[0], keys[0]) && bytes.Equal(cv.keys[1], keys[1]) {
		return cv.v, nil
	}
	v, err := wire.NewVerifier(keys[0], keys[1], wire.WithWindow(c.window), wire.WithClock(c.now))
	if err != nil {
		return nil, err
	}
	cv = &cachedVerifier{keys: [keysPerVerification][]byte{bytes.Clone(keys[0]), bytes.Clone(keys[1])}, v: v}
	c.mu.Lock()
	if len(c.m) >= maxCachedVerifiers {
		clear(c.m)
	}
	c.m[id] = cv
	c.mu.Unlock()
	return v, nil
}

// verifyFunc verifies the request with exactly keysPerVerification keys and
// returns nil on a match, else an error whose reason labels the metric.
type verifyFunc func(id string, keys [keysPerVerification][]byte) error

// identify finds the one Spoke named name whose keys of kind verify the
// request, as the package doc and the comment above describe. It answers
// 401, 503 (directory not ready, spoke suspended) or 429 and returns false
// when the request may not go on.
func (s *Server) identify(w http.ResponseWriter, r *http.Request, endpoint, name string, kind keyKind, verify verifyFunc) (*Spoke, bool) {
	var candidates []Spoke
	if wire.IsDNSLabel(name) {
		var err error
		candidates, err = s.spokes.Spokes(r.Context(), name)
		if err != nil {
			s.unavailable(w, endpoint, name, "looking up the spoke", err)
			return nil, false
		}
	}
	var (
		matched []*Spoke
		reason  = reasonUnknownSpoke
		kv      []any
	)
	if len(candidates) == 0 {
		s.countVerification(endpoint)
		_ = verify("", s.dummyKeys)
	}
	var mismatched []int
	for i := range candidates {
		sp := &candidates[i]
		keys, problem := s.keysOf(sp, kind)
		s.countVerification(endpoint)
		err := verify(sp.String(), keys)
		if err != nil && verifyReason(err) == reasonBadSignature {
			mismatched = append(mismatched, i)
		}
		switch {
		case problem != "":
			reason, kv = reasonInvalidKey, []any{"spoke", sp.String(), "problem", problem}
		case err == nil:
			matched = append(matched, sp)
		default:
			reason = verifyReason(err)
		}
	}
	if len(matched) == 0 && len(mismatched) > 0 {
		if refresher, ok := s.spokes.(KeyRefresher); ok {
			matched = s.verifyRefreshed(r.Context(), refresher, endpoint, kind, verify, candidates, mismatched, &reason, &kv)
		}
	}
	switch len(matched) {
	case 0:
		s.reject(endpoint, reason, name, append(kv, "candidates", len(candidates))...)
		writeError(w, http.StatusUnauthorized, unauthorized)
		return nil, false
	case 1:
	default:
		s.reject(endpoint, reasonAmbiguousSpoke, name, "candidates", len(candidates))
		s.log.Info("Refused a request that the keys of several Spokes of one name verify: give each Spoke its own key",
			"spoke", name, "namespaces", namespaces(matched))
		writeError(w, http.StatusUnauthorized, unauthorized)
		return nil, false
	}
	sp := matched[0]
	sp.SignedWith = s.signingKeyID(sp, kind, verify)
	if sp.Suspended {
		s.reject(endpoint, reasonSuspended, sp.String())
		retryAfter(w, suspendedRetryAfter)
		writeError(w, http.StatusServiceUnavailable, errorf("spoke %s is suspended (spec.suspend is true): the hub ignores its requests until it is resumed", sp.String()))
		return nil, false
	}
	if !s.allow(w, endpoint, sp.SpokeRef) {
		return nil, false
	}
	return sp, true
}

// verifyRefreshed re-reads the keys of the candidates whose signature did
// not match (see KeyRefresher) and verifies the request again against each
// one whose keys changed, updating it in candidates. It returns the
// candidates that match now, and updates reason and kv for the ones that
// still do not. A failed read is logged and leaves the candidate refused.
func (s *Server) verifyRefreshed(ctx context.Context, refresher KeyRefresher, endpoint string, kind keyKind, verify verifyFunc,
	candidates []Spoke, mismatched []int, reason *string, kv *[]any) []*Spoke {
	var matched []*Spoke
	for _, i := range mismatched {
		fresh, changed, err := refresher.RefreshKeys(ctx, candidates[i])
		if err != nil {
			s.log.Error(err, "Could not re-read the keys of a spoke whose request did not verify", "spoke", candidates[i].String())
			continue
		}
		if !changed {
			continue
		}
		candidates[i] = fresh
		sp := &candidates[i]
		keys, problem := s.keysOf(sp, kind)
		s.countVerification(endpoint)
		err = verify(sp.String(), keys)
		switch {
		case problem != "":
			*reason, *kv = reasonInvalidKey, []any{"spoke", sp.String(), "problem", problem}
		case err == nil:
			matched = append(matched, sp)
		default:
			*reason = verifyReason(err)
		}
	}
	return matched
}

// signingKeyID returns the wire.KeyID of the key of sp (of kind) that
// verified the request: the current one unless a previous key is present
// and the current one alone does not verify it. Only authenticated requests
// during a rotation pay the second verification.
func (s *Server) signingKeyID(sp *Spoke, kind keyKind, verify verifyFunc) string {
	keys, _ := s.keysOf(sp, kind)
	if bytes.Equal(keys[1], s.dummyKeys[1]) {
		return wire.KeyID(keys[0])
	}
	if verify(sp.String()+"#current", [keysPerVerification][]byte{keys[0], s.dummyKeys[1]}) == nil {
		return wire.KeyID(keys[0])
	}
	return wire.KeyID(keys[1])
}

// verifyReason is the rejected_total reason of a failed verification.
func verifyReason(err error) string {
	var ve *wire.VerifyError
	switch {
	case errors.Is(err, errFluxSignature):
		return wire.ErrMalformedSignature.Error()
	case errors.As(err, &ve) && ve.Reason() != wire.ErrSignatureMismatch.Error():
		return ve.Reason()
	}
	return reasonBadSignature
}

// countVerification counts one verification with keysPerVerification keys.
func (s *Server) countVerification(endpoint string) {
	s.metrics.verifications.WithLabelValues(endpoint).Add(keysPerVerification)
}

func namespaces(spokes []*Spoke) []string {
	out := make([]string, len(spokes))
	for i, sp := range spokes {
		out[i] = sp.Namespace
	}
	return out
}

// authenticate verifies r's v1 signature over raw, the body as sent, before
// anything parses it (see identify), and returns the request's Spoke.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, endpoint, name string, raw []byte) (*Spoke, bool) {
	return s.identify(w, r, endpoint, name, agentKeys, func(id string, keys [keysPerVerification][]byte) error {
		v, err := s.verifiers.get(id, keys)
		if err != nil { // cannot happen: every key is at least wire.MinSpokeKeySize
			return err
		}
		return v.VerifyRequest(r, raw)
	})
}

// allow takes a token from the spoke's bucket, or answers 429.
func (s *Server) allow(w http.ResponseWriter, endpoint string, ref SpokeRef) bool {
	ok, wait := s.limits.allow(ref.String())
	if !ok {
		s.reject(endpoint, reasonRateLimited, ref.String())
		retryAfter(w, wait)
		writeError(w, http.StatusTooManyRequests, errorf("rate limit exceeded for spoke %q: retry later", ref.Name))
	}
	return ok
}
