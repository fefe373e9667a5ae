package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Request signing, scheme v1.
//
//	X-Tugboat-Timestamp: <unix seconds>
//	X-Tugboat-Signature: v1=<hex HMAC-SHA256(key, "v1:" + timestamp + ":" + METHOD + ":" + PATH + ":" + body)>
//
// timestamp is the header's value exactly as sent; METHOD is upper-cased;
// PATH is the request URL's escaped path (CanonicalPath), without the query.
// The signature header may carry several comma-separated signatures (e.g. one
// per key during a rotation); one match is enough. Entries of other schemes
// ("v2=...") are ignored, so a later scheme can be rolled out alongside.
const (
	// HeaderTimestamp carries the signing time, in unix seconds.
	HeaderTimestamp = "X-Tugboat-Timestamp"
	// HeaderSignature carries "v1=<hex>" signatures.
	HeaderSignature = "X-Tugboat-Signature"
	// SignatureScheme is the scheme this package signs with.
	SignatureScheme = "v1"

	// DefaultWindow is how far a timestamp may be from the verifier's clock, in
	// either direction.
	DefaultWindow = 5 * time.Minute
	// MinKeySize is the shortest key a Verifier accepts, in bytes, and the
	// shortest key or token tugboat uses anywhere: spoke keys (agent and
	// Flux), CI keys and tokens, webhook notifier keys. The hub generates 64
	// (32 random bytes, hex); `openssl rand -hex 32` makes one.
	MinKeySize = 32
	// MinSpokeKeySize is the shortest spoke key (the agent's and the Flux
	// key) the hub verifies and the agent signs with: MinKeySize.
	MinSpokeKeySize = MinKeySize

	maxSignatureHeader = 1024 // bytes
	maxSignatures      = 4
	maxTimestampDigits = 18 // fits an int64 with room to spare
)

// Sign returns the X-Tugboat-Signature value, "v1=<hex>", for a request with
// the given method, escaped path and body, signed at ts (whose unix seconds
// go into X-Tugboat-Timestamp).
func Sign(key []byte, ts time.Time, method, path string, body []byte) string {
	return SignatureScheme + "=" + hex.EncodeToString(mac(key, strconv.FormatInt(ts.Unix(), 10), method, path, body))
}

// SignRequest sets X-Tugboat-Timestamp and X-Tugboat-Signature on req for
// body, signed at now. It does not set req.Body: the caller sends body
// unchanged.
func SignRequest(req *http.Request, key []byte, body []byte, now time.Time) {
	ts := strconv.FormatInt(now.Unix(), 10)
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, SignatureScheme+"="+hex.EncodeToString(mac(key, ts, method, CanonicalPath(req.URL), body)))
}

// CanonicalPath is the PATH that signatures cover: the URL's escaped path
// ("/" when empty), without query or fragment. Clients and servers must both
// use it (on the server: CanonicalPath(r.URL)).
func CanonicalPath(u *url.URL) string {
	if u == nil {
		return "/"
	}
	p := u.EscapedPath()
	if p == "" {
		return "/"
	}
	return p
}

func mac(key []byte, ts, method, path string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	writeSigned(m, ts, method, path, body)
	return m.Sum(nil)
}

func writeSigned(m hash.Hash, ts, method, path string, body []byte) {
	m.Write([]byte(SignatureScheme + ":" + ts + ":" + strings.ToUpper(method) + ":" + path + ":"))
	m.Write(body)
}

// ErrUnauthorized matches (errors.Is) every error Verify returns. Answer 401
// with a fixed body; the reason is for logs and metrics only.
var ErrUnauthorized = errors.New("wire: request not authenticated")

// Reasons a verification fails. A *VerifyError wraps exactly one; test with
// errors.Is, or read VerifyError.Reason for a metrics label.
var (
	ErrMissingTimestamp   = errors.New("missing_timestamp")
	ErrMalformedTimestamp = errors.New("malformed_timestamp")
	ErrStaleTimestamp     = errors.New("stale_timestamp")
	ErrMissingSignature   = errors.New("missing_signature")
	ErrMalformedSignature = errors.New("malformed_signature")
	ErrSignatureMismatch  = errors.New("signature_mismatch")
)

// VerifyError is a failed verification. Its message is the same whatever the
// reason, so that echoing it to a client reveals nothing; errors.Is matches
// both ErrUnauthorized and the reason.
type VerifyError struct {
	reason error
}

// Error returns a generic message.
func (e *VerifyError) Error() string { return ErrUnauthorized.Error() }

// Unwrap returns ErrUnauthorized and the reason.
func (e *VerifyError) Unwrap() []error { return []error{ErrUnauthorized, e.reason} }

// Reason returns a short, stable label for the failure, e.g.
// "stale_timestamp", for logs and metrics (never for the response).
func (e *VerifyError) Reason() string { return e.reason.Error() }

func fail(reason error) error { return &VerifyError{reason: reason} }

// Verifier checks signed requests against one key or, during a rotation, two.
// It is safe for concurrent use.
type Verifier struct {
	keys   [][]byte
	window time.Duration
	now    func() time.Time
}

// VerifierOption configures a Verifier.
type VerifierOption func(*Verifier)

// WithWindow sets how far a timestamp may be from the clock, in either
// direction (DefaultWindow when d <= 0).
func WithWindow(d time.Duration) VerifierOption {
	return func(v *Verifier) {
		if d > 0 {
			v.window = d
		}
	}
}

// WithClock sets the clock (time.Now when nil).
func WithClock(now func() time.Time) VerifierOption {
	return func(v *Verifier) {
		if now != nil {
			v.now = now
		}
	}
}

// NewVerifier returns a Verifier that accepts signatures made with current
// or, when non-empty, previous (the key being rotated out). Both must be at
// least MinKeySize bytes. The keys are copied.
func NewVerifier(current, previous []byte, opts ...VerifierOption) (*Verifier, error) {
	if len(current) < MinKeySize {
		return nil, fmt.Errorf("wire: current key must be at least %d bytes, got %d", MinKeySize, len(current))
	}
	v := &Verifier{keys: [][]byte{clone(current)}, window: DefaultWindow, now: time.Now}
	if len(previous) > 0 {
		if len(previous) < MinKeySize {
			return nil, fmt.Errorf("wire: previous key must be at least %d bytes, got %d", MinKeySize, len(previous))
		}
		v.keys = append(v.keys, clone(previous))
	}
	for _, o := range opts {
		o(v)
	}
	return v, nil
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// VerifyRequest verifies r's signature headers for body (which the caller has
// read, within its size limit).
func (v *Verifier) VerifyRequest(r *http.Request, body []byte) error {
	if r == nil {
		return fail(ErrMissingSignature)
	}
	return v.Verify(r.Method, CanonicalPath(r.URL), r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature), body)
}

// Verify checks a request's X-Tugboat-Timestamp (tsHeader) and
// X-Tugboat-Signature (sigHeader) values against method, escaped path and
// body. It returns nil when the timestamp is within the window and some v1
// signature matches some key, compared in constant time; otherwise a
// *VerifyError (errors.Is(err, ErrUnauthorized)).
func (v *Verifier) Verify(method, path, tsHeader, sigHeader string, body []byte) error {
	if v == nil || len(v.keys) == 0 {
		return fail(ErrSignatureMismatch)
	}
	if tsHeader == "" {
		return fail(ErrMissingTimestamp)
	}
	secs, ok := parseTimestamp(tsHeader)
	if !ok {
		return fail(ErrMalformedTimestamp)
	}
	now := v.now().Unix()
	window := int64(v.window / time.Second)
	if secs < now-window || secs > now+window {
		return fail(ErrStaleTimestamp)
	}
	if sigHeader == "" {
		return fail(ErrMissingSignature)
	}
	sigs, err := parseSignatures(sigHeader)
	if err != nil {
		return err
	}
	matched := false
	for _, key := range v.keys {
		want := mac(key, tsHeader, method, path, body)
		for _, sig := range sigs {
			// Evaluate every pair: no early exit, constant time per pair.
			if hmac.Equal(want, sig) {
				matched = true
			}
		}
	}
	if !matched {
		return fail(ErrSignatureMismatch)
	}
	return nil
}

// parseTimestamp accepts 1 to 18 ASCII digits: no sign, no spaces, no
// fractions.
func parseTimestamp(s string) (int64, bool) {
	if len(s) == 0 || len(s) > maxTimestampDigits {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// parseSignatures returns the decoded v1 signatures of a header value.
func parseSignatures(h string) ([][]byte, error) {
	if len(h) > maxSignatureHeader {
		return nil, fail(ErrMalformedSignature)
	}
	entries := strings.Split(h, ",")
	if len(entries) > maxSignatures {
		return nil, fail(ErrMalformedSignature)
	}
	var sigs [][]byte
	for _, e := range entries {
		scheme, value, ok := strings.Cut(strings.TrimSpace(e), "=")
		if !ok || scheme == "" {
			return nil, fail(ErrMalformedSignature)
		}
		if scheme != SignatureScheme {
			continue // another scheme: not ours to judge
		}
		sig, err := hex.DecodeString(value)
		if err != nil || len(sig) != sha256.Size {
			return nil, fail(ErrMalformedSignature)
		}
		sigs = append(sigs, sig)
	}
	if len(sigs) == 0 {
		return nil, fail(ErrMalformedSignature)
	}
	return sigs, nil
}

// KeyID identifies a key without revealing it: the first 16 hex characters
// of the SHA-256 of the key (surrounding white space included as given).
// The hub records the KeyID of the key that signed a spoke's last heartbeat
// (Spoke status.signingKeyID), so a key rotation can tell when the agent
// signs with the new key.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}
