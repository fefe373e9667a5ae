package wire

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// Response signing, scheme v1, for the answers an agent acts on (the
// actions channel: the list of actions a poll returns, and the
// acknowledgement of an outcome).
//
// The agent sends a fresh random nonce with every request it wants a signed
// answer to:
//
//	X-Tugboat-Nonce: <32 to 64 characters [0-9A-Za-z_-]>
//
// and the hub answers with
//
//	X-Tugboat-Response-Signature: v1=<hex HMAC-SHA256(key,
//	    "v1-response:" + request timestamp + ":" + nonce + ":" + METHOD + ":" + PATH + ":" + status + ":" + body)>
//
// where the request timestamp is the request's X-Tugboat-Timestamp value as
// sent, METHOD and PATH are the request's (as for request signatures), status
// is the decimal HTTP status code of the answer and body is the answer's body
// exactly as sent. The answer is thereby bound to the one request it answers:
// a recorded answer does not verify for another request (another nonce), for
// another URL, or with another status. The "v1-response:" prefix keeps a
// response signature from ever verifying as a request signature, and the
// other way round.
//
// The hub signs with every key of the spoke (two during a rotation), as
// several comma-separated entries of one header; the agent checks with the
// one key it holds. Like request signatures, entries of other schemes are
// ignored.
const (
	// HeaderNonce carries the request's nonce that the answer's signature
	// covers.
	HeaderNonce = "X-Tugboat-Nonce"
	// HeaderResponseSignature carries "v1=<hex>" response signatures.
	HeaderResponseSignature = "X-Tugboat-Response-Signature"

	// MinNonceLength and MaxNonceLength bound a nonce, in characters.
	MinNonceLength = 32
	MaxNonceLength = 64

	responsePrefix = "v1-response:"
)

// ErrBadNonce is the reason of a response verification whose request has no
// nonce, or one of the wrong form.
var ErrBadNonce = errors.New("bad_nonce")

// NewNonce returns a fresh random nonce: 32 lowercase hex digits (128 bits).
func NewNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b)
}

// ValidNonce reports whether s has the form of a nonce.
func ValidNonce(s string) bool {
	if len(s) < MinNonceLength || len(s) > MaxNonceLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// SignResponse returns the X-Tugboat-Response-Signature value for an answer
// with status and body to req (the request as received: its method, path,
// X-Tugboat-Timestamp and X-Tugboat-Nonce are covered), signed with each of
// keys (empty keys are skipped). It returns "" when req carries no valid
// nonce or no key is given: the answer then goes unsigned, and an agent that
// asked for a signature refuses it.
func SignResponse(req *http.Request, status int, body []byte, keys ...[]byte) string {
	if req == nil {
		return ""
	}
	nonce := req.Header.Get(HeaderNonce)
	if !ValidNonce(nonce) {
		return ""
	}
	ts := req.Header.Get(HeaderTimestamp)
	path := CanonicalPath(req.URL)
	var out []byte
	for _, k := range keys {
		if len(k) == 0 {
			continue
		}
		if len(out) > 0 {
			out = append(out, ',')
		}
		out = append(out, SignatureScheme+"="...)
		out = hex.AppendEncode(out, responseMAC(k, ts, nonce, req.Method, path, status, body))
	}
	return string(out)
}

// VerifyResponse checks the answer to req (the request as the agent sent it,
// with its X-Tugboat-Timestamp and X-Tugboat-Nonce) against key: sigHeader is
// the answer's X-Tugboat-Response-Signature, status its code and body its
// body as received. It returns nil when some v1 entry matches, compared in
// constant time, and otherwise a *VerifyError (errors.Is(err,
// ErrUnauthorized)): ErrBadNonce when req has no valid nonce,
// ErrMissingSignature for an unsigned answer, ErrMalformedSignature or
// ErrSignatureMismatch. The timestamp is not checked against a clock: the
// nonce, fresh for each request, is what makes the answer current.
func VerifyResponse(key []byte, req *http.Request, status int, sigHeader string, body []byte) error {
	if len(key) == 0 || req == nil {
		return fail(ErrSignatureMismatch)
	}
	nonce := req.Header.Get(HeaderNonce)
	if !ValidNonce(nonce) {
		return fail(ErrBadNonce)
	}
	if sigHeader == "" {
		return fail(ErrMissingSignature)
	}
	sigs, err := parseSignatures(sigHeader)
	if err != nil {
		return err
	}
	want := responseMAC(key, req.Header.Get(HeaderTimestamp), nonce, req.Method, CanonicalPath(req.URL), status, body)
	matched := false
	for _, sig := range sigs {
		if hmac.Equal(want, sig) {
			matched = true
		}
	}
	if !matched {
		return fail(ErrSignatureMismatch)
	}
	return nil
}

func responseMAC(key []byte, ts, nonce, method, path string, status int, body []byte) []byte {
	if method == "" {
		method = http.MethodGet
	}
	m := hmac.New(sha256.New, key)
	// Neither the timestamp (digits) nor the nonce ([0-9A-Za-z_-]) can hold
	// a ':', and the method is a token, so the fields cannot run into each
	// other; the body comes last.
	m.Write([]byte(responsePrefix + ts + ":" + nonce + ":" + strings.ToUpper(method) + ":" + path + ":" + strconv.Itoa(status) + ":"))
	m.Write(body)
	return m.Sum(nil)
}
