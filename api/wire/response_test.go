package wire_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
)

const (
	testNonce   = "0123456789abcdef0123456789abcdef"
	actionsPath = "/v1/spokes/staging-1/actions"
)

// signedRequest is a poll as an agent sends it: signed, with a nonce.
func signedRequest(method, path, nonce string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	wire.SignRequest(r, testKey, nil, testTime)
	if nonce != "" {
		r.Header.Set(wire.HeaderNonce, nonce)
	}
	return r
}

func TestSignResponse_knownAnswer(t *testing.T) {
	g := NewWithT(t)
	r := signedRequest(http.MethodGet, actionsPath, testNonce)
	body := []byte(`{"actions":[]}`)
	// Computed independently of the package.
	m := hmac.New(sha256.New, testKey)
	m.Write([]byte("v1-response:" + testTSValue + ":" + testNonce + ":GET:" + actionsPath + ":200:"))
	m.Write(body)
	g.Expect(wire.SignResponse(r, 200, body, testKey)).To(Equal("v1=" + hex.EncodeToString(m.Sum(nil))))
	// Two keys (a rotation): two entries, either verifies.
	both := wire.SignResponse(r, 200, body, testKey, otherKey)
	g.Expect(strings.Split(both, ",")).To(HaveLen(2))
	g.Expect(wire.VerifyResponse(testKey, r, 200, both, body)).To(Succeed())
	g.Expect(wire.VerifyResponse(otherKey, r, 200, both, body)).To(Succeed())
}

func TestVerifyResponse_refusesAnAnswerNotMadeForThisRequest(t *testing.T) {
	body := []byte(`{"actions":[{"id":"x"}]}`)
	orig := signedRequest(http.MethodGet, actionsPath, testNonce)
	sig := wire.SignResponse(orig, 200, body, testKey)

	otherTime := signedRequest(http.MethodGet, actionsPath, testNonce)
	wire.SignRequest(otherTime, testKey, nil, testTime.Add(1e9))

	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
		sig    string
		body   []byte
		want   error
	}{
		{"another nonce (a replay to a later poll)", signedRequest(http.MethodGet, actionsPath, strings.Repeat("f", 32)), 200, sig, body, wire.ErrSignatureMismatch},
		{"another timestamp", otherTime, 200, sig, body, wire.ErrSignatureMismatch},
		{"another path (another spoke's poll)", signedRequest(http.MethodGet, "/v1/spokes/staging-2/actions", testNonce), 200, sig, body, wire.ErrSignatureMismatch},
		{"another method", signedRequest(http.MethodPost, actionsPath, testNonce), 200, sig, body, wire.ErrSignatureMismatch},
		{"another status", orig, 202, sig, body, wire.ErrSignatureMismatch},
		{"another body (an injected action)", orig, 200, sig, []byte(`{"actions":[{"id":"y"}]}`), wire.ErrSignatureMismatch},
		{"another key", orig, 200, wire.SignResponse(orig, 200, body, otherKey), body, wire.ErrSignatureMismatch},
		{"unsigned", orig, 200, "", body, wire.ErrMissingSignature},
		{"malformed", orig, 200, "v1=zz", body, wire.ErrMalformedSignature},
		{"a request signature in its place", orig, 200, orig.Header.Get(wire.HeaderSignature), nil, wire.ErrSignatureMismatch},
		{"no nonce on the request", signedRequest(http.MethodGet, actionsPath, ""), 200, sig, body, wire.ErrBadNonce},
		{"a nonce too short", signedRequest(http.MethodGet, actionsPath, "abc"), 200, sig, body, wire.ErrBadNonce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := wire.VerifyResponse(testKey, tc.req, tc.status, tc.sig, tc.body)
			g.Expect(err).To(MatchError(wire.ErrUnauthorized))
			g.Expect(err).To(MatchError(tc.want))
		})
	}
	NewWithT(t).Expect(wire.VerifyResponse(testKey, orig, 200, sig, body)).To(Succeed())
}

func TestSignResponse_unsignedWithoutAValidNonce(t *testing.T) {
	g := NewWithT(t)
	g.Expect(wire.SignResponse(signedRequest(http.MethodGet, actionsPath, ""), 200, nil, testKey)).To(BeEmpty())
	g.Expect(wire.SignResponse(signedRequest(http.MethodGet, actionsPath, "has:colon"+testNonce), 200, nil, testKey)).To(BeEmpty())
	g.Expect(wire.SignResponse(signedRequest(http.MethodGet, actionsPath, testNonce), 200, nil)).To(BeEmpty())
	g.Expect(wire.ValidNonce(wire.NewNonce())).To(BeTrue())
	g.Expect(wire.NewNonce()).NotTo(Equal(wire.NewNonce()))
}

// FuzzVerifyResponse: whatever the header, nonce and body, VerifyResponse
// accepts only an entry that is the HMAC under the key (computed here
// independently), returns only *VerifyErrors, and a response the package
// signs verifies.
func FuzzVerifyResponse(f *testing.F) {
	body := []byte(`{"actions":[]}`)
	f.Add("GET", actionsPath, testNonce, 200, wire.SignResponse(signedRequest("GET", actionsPath, testNonce), 200, body, testKey), body)
	f.Fuzz(func(t *testing.T, method, path, nonce string, status int, sig string, body []byte) {
		if method == "" || strings.ContainsAny(method, " \t\r\n") || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \t\r\n?#") {
			return // not a request line httptest can build
		}
		r, err := http.NewRequest(method, "http://hub"+path, nil)
		if err != nil {
			return
		}
		wire.SignRequest(r, testKey, nil, testTime)
		r.Header.Set(wire.HeaderNonce, nonce)
		nonce = r.Header.Get(wire.HeaderNonce)
		if err := wire.VerifyResponse(testKey, r, status, sig, body); err != nil {
			var ve *wire.VerifyError
			if !errors.Is(err, wire.ErrUnauthorized) || !errors.As(err, &ve) || ve.Reason() == "" {
				t.Fatalf("error %v is not a *VerifyError with a reason", err)
			}
		} else if !containsResponseMAC(sig, testKey, testTSValue, nonce, method, wire.CanonicalPath(r.URL), status, body) {
			t.Fatalf("accepted a response whose signature %q matches no key", sig)
		}
		signed := wire.SignResponse(r, status, body, testKey)
		if !wire.ValidNonce(nonce) {
			if signed != "" {
				t.Fatalf("signed a response to a request with the invalid nonce %q", nonce)
			}
			return
		}
		if err := wire.VerifyResponse(testKey, r, status, signed, body); err != nil {
			t.Fatalf("SignResponse then VerifyResponse failed: %v", err)
		}
		if err := wire.VerifyResponse(testKey, r, status, signed, append(body, 'x')); !errors.Is(err, wire.ErrSignatureMismatch) {
			t.Fatalf("tampered body: got %v, want ErrSignatureMismatch", err)
		}
	})
}

func containsResponseMAC(header string, key []byte, ts, nonce, method, path string, status int, body []byte) bool {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("v1-response:" + ts + ":" + nonce + ":" + strings.ToUpper(method) + ":" + path + ":" + strconv.Itoa(status) + ":"))
	m.Write(body)
	want := hex.EncodeToString(m.Sum(nil))
	for _, e := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(e), "v1="); ok && strings.EqualFold(v, want) {
			return true
		}
	}
	return false
}

// TestFuzzSeeds_verifyResponse keeps the committed FuzzVerifyResponse
// corpus honest: seeds named valid* verify, the others do not.
func TestFuzzSeeds_verifyResponse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzVerifyResponse", "*"))
	if err != nil || len(files) < 3 {
		t.Fatalf("want at least 3 seeds, got %d (%v)", len(files), err)
	}
	for _, file := range files {
		args := readSeed(t, file)
		status, err := strconv.Atoi(string(args[3]))
		if err != nil {
			t.Fatalf("%s: status: %v", file, err)
		}
		r := signedRequest(string(args[0]), string(args[1]), string(args[2]))
		err = wire.VerifyResponse(testKey, r, status, string(args[4]), args[5])
		if valid := strings.HasPrefix(filepath.Base(file), "valid"); valid != (err == nil) {
			t.Errorf("%s: valid=%v, got %v", file, valid, err)
		}
	}
}
