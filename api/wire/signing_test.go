package wire_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
)

var (
	testKey     = []byte("tugboat-test-key-0123456789abcdef")
	otherKey    = []byte("tugboat-other-key-fedcba9876543210")
	testTime    = time.Unix(1767225600, 0) // 2026-01-01T00:00:00Z
	testPath    = "/v1/spokes/staging-1/events"
	testBody    = []byte(`{"spoke":"staging-1"}`)
	fixedClock  = func() time.Time { return testTime }
	testTSValue = "1767225600"
)

// The expected values were computed independently of this package:
//
//	printf '%s' 'v1:1767225600:POST:/v1/spokes/staging-1/events:{"spoke":"staging-1"}' \
//	  | openssl dgst -sha256 -hmac 'tugboat-test-key-0123456789abcdef'
//	printf '%s' 'v1:1767225600:GET:/v1/spokes/staging-1/actions:' \
//	  | openssl dgst -sha256 -hmac 'tugboat-test-key-0123456789abcdef'
func TestSign_matchesKnownVectors(t *testing.T) {
	g := NewWithT(t)
	g.Expect(wire.Sign(testKey, testTime, "POST", testPath, testBody)).To(Equal(
		"v1=2cfe6460a38fc6e20937859336c24101af87c2e5c8511325f01e01882d186b6b"))
	g.Expect(wire.Sign(testKey, testTime, "GET", "/v1/spokes/staging-1/actions", nil)).To(Equal(
		"v1=0d61c7bbb01c39be6cbb09b60487bfbba54ec9ad44d7c945caffbbfe06dbff1e"))
	// The method is upper-cased before signing.
	g.Expect(wire.Sign(testKey, testTime, "post", testPath, testBody)).To(Equal(
		"v1=2cfe6460a38fc6e20937859336c24101af87c2e5c8511325f01e01882d186b6b"))
}

func TestSignRequest_setsHeadersTheVerifierAccepts(t *testing.T) {
	g := NewWithT(t)
	req := httptest.NewRequest(http.MethodPost, "http://hub.example:8443"+testPath+"?ignored=1", nil)
	wire.SignRequest(req, testKey, testBody, testTime)

	g.Expect(req.Header.Get(wire.HeaderTimestamp)).To(Equal(testTSValue))
	g.Expect(req.Header.Get(wire.HeaderSignature)).To(Equal(
		"v1=2cfe6460a38fc6e20937859336c24101af87c2e5c8511325f01e01882d186b6b"))

	v := newVerifier(g, testKey, nil)
	g.Expect(v.VerifyRequest(req, testBody)).To(Succeed())
}

func TestSignRequest_signsTheEscapedPath(t *testing.T) {
	g := NewWithT(t)
	req := httptest.NewRequest(http.MethodPost, "http://hub.example/v1/spokes/a%2Fb/events", nil)
	wire.SignRequest(req, testKey, testBody, testTime)
	g.Expect(req.Header.Get(wire.HeaderSignature)).To(Equal(
		wire.Sign(testKey, testTime, "POST", "/v1/spokes/a%2Fb/events", testBody)))
	g.Expect(req.Header.Get(wire.HeaderSignature)).NotTo(Equal(
		wire.Sign(testKey, testTime, "POST", "/v1/spokes/a/b/events", testBody)))
}

func TestVerify_rejectsTampering(t *testing.T) {
	sig := wire.Sign(testKey, testTime, "POST", testPath, testBody)
	cases := []struct {
		name         string
		method, path string
		body         []byte
	}{
		{"body", "POST", testPath, []byte(`{"spoke":"staging-2"}`)},
		{"body with trailing byte", "POST", testPath, append(append([]byte{}, testBody...), ' ')},
		{"empty body", "POST", testPath, nil},
		{"path", "POST", "/v1/spokes/staging-1/state", testBody},
		{"path of another spoke", "POST", "/v1/spokes/staging-2/events", testBody},
		{"method", "PUT", testPath, testBody},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			v := newVerifier(g, testKey, nil)
			err := v.Verify(tc.method, tc.path, testTSValue, sig, tc.body)
			g.Expect(err).To(MatchError(wire.ErrUnauthorized))
			g.Expect(err).To(MatchError(wire.ErrSignatureMismatch))
		})
	}
	t.Run("untampered", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(newVerifier(g, testKey, nil).Verify("POST", testPath, testTSValue, sig, testBody)).To(Succeed())
	})
	t.Run("timestamp", func(t *testing.T) {
		// A fresh but different timestamp: the signature covers it.
		g := NewWithT(t)
		err := newVerifier(g, testKey, nil).Verify("POST", testPath, "1767225601", sig, testBody)
		g.Expect(err).To(MatchError(wire.ErrSignatureMismatch))
	})
}

func TestVerify_rejectsTimestampsOutsideTheWindow(t *testing.T) {
	cases := []struct {
		name   string
		offset time.Duration
		ok     bool
	}{
		{"now", 0, true},
		{"5m old", -5 * time.Minute, true},
		{"5m ahead", 5 * time.Minute, true},
		{"5m1s old", -(5*time.Minute + time.Second), false},
		{"5m1s ahead", 5*time.Minute + time.Second, false},
		{"a day old", -24 * time.Hour, false},
		{"a day ahead", 24 * time.Hour, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			signedAt := testTime.Add(tc.offset)
			ts := strconv.FormatInt(signedAt.Unix(), 10)
			sig := wire.Sign(testKey, signedAt, "POST", testPath, testBody)
			err := newVerifier(g, testKey, nil).Verify("POST", testPath, ts, sig, testBody)
			if tc.ok {
				g.Expect(err).To(Succeed())
				return
			}
			g.Expect(err).To(MatchError(wire.ErrUnauthorized))
			g.Expect(err).To(MatchError(wire.ErrStaleTimestamp))
		})
	}
}

func TestVerify_honoursWindowOption(t *testing.T) {
	g := NewWithT(t)
	v, err := wire.NewVerifier(testKey, nil, wire.WithClock(fixedClock), wire.WithWindow(30*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	old := testTime.Add(-time.Minute)
	err = v.Verify("POST", testPath, strconv.FormatInt(old.Unix(), 10), wire.Sign(testKey, old, "POST", testPath, testBody), testBody)
	g.Expect(err).To(MatchError(wire.ErrStaleTimestamp))
}

func TestVerify_acceptsPreviousKeyOnlyWhileListed(t *testing.T) {
	g := NewWithT(t)
	signedWithOld := wire.Sign(otherKey, testTime, "POST", testPath, testBody)
	signedWithNew := wire.Sign(testKey, testTime, "POST", testPath, testBody)

	// During the rotation: the new key is current, the old one previous.
	rotating := newVerifier(g, testKey, otherKey)
	g.Expect(rotating.Verify("POST", testPath, testTSValue, signedWithOld, testBody)).To(Succeed())
	g.Expect(rotating.Verify("POST", testPath, testTSValue, signedWithNew, testBody)).To(Succeed())

	// After it: the previous key is removed.
	rotated := newVerifier(g, testKey, nil)
	g.Expect(rotated.Verify("POST", testPath, testTSValue, signedWithOld, testBody)).To(MatchError(wire.ErrSignatureMismatch))
	g.Expect(rotated.Verify("POST", testPath, testTSValue, signedWithNew, testBody)).To(Succeed())

	// A key that was never listed is rejected either way.
	unrelated := wire.Sign([]byte("some-unrelated-key-0000000000000"), testTime, "POST", testPath, testBody)
	g.Expect(rotating.Verify("POST", testPath, testTSValue, unrelated, testBody)).To(MatchError(wire.ErrSignatureMismatch))
}

func TestVerify_acceptsAnyOfSeveralSignatures(t *testing.T) {
	g := NewWithT(t)
	v := newVerifier(g, testKey, nil)
	good := wire.Sign(testKey, testTime, "POST", testPath, testBody)
	bad := wire.Sign(otherKey, testTime, "POST", testPath, testBody)

	g.Expect(v.Verify("POST", testPath, testTSValue, bad+","+good, testBody)).To(Succeed())
	g.Expect(v.Verify("POST", testPath, testTSValue, good+", "+bad, testBody)).To(Succeed())
	// Entries of another scheme are skipped.
	g.Expect(v.Verify("POST", testPath, testTSValue, "v2=abc, "+good, testBody)).To(Succeed())
	g.Expect(v.Verify("POST", testPath, testTSValue, bad+","+bad, testBody)).To(MatchError(wire.ErrSignatureMismatch))
	// Upper-case hex is the same signature.
	g.Expect(v.Verify("POST", testPath, testTSValue, "v1="+strings.ToUpper(strings.TrimPrefix(good, "v1=")), testBody)).To(Succeed())
}

func TestVerify_rejectsMalformedHeaders(t *testing.T) {
	good := wire.Sign(testKey, testTime, "POST", testPath, testBody)
	hexSig := strings.TrimPrefix(good, "v1=")
	cases := []struct {
		name   string
		ts     string
		sig    string
		reason error
	}{
		{"no timestamp", "", good, wire.ErrMissingTimestamp},
		{"timestamp with letters", "17672256OO", good, wire.ErrMalformedTimestamp},
		{"timestamp with sign", "+1767225600", good, wire.ErrMalformedTimestamp},
		{"negative timestamp", "-1767225600", good, wire.ErrMalformedTimestamp},
		{"timestamp with fraction", "1767225600.5", good, wire.ErrMalformedTimestamp},
		{"timestamp with spaces", " 1767225600", good, wire.ErrMalformedTimestamp},
		{"timestamp in RFC 3339", "2026-01-01T00:00:00Z", good, wire.ErrMalformedTimestamp},
		{"huge timestamp", strings.Repeat("9", 40), good, wire.ErrMalformedTimestamp},
		{"no signature", testTSValue, "", wire.ErrMissingSignature},
		{"bare hex", testTSValue, hexSig, wire.ErrMalformedSignature},
		{"empty v1", testTSValue, "v1=", wire.ErrMalformedSignature},
		{"short hex", testTSValue, "v1=" + hexSig[:62], wire.ErrMalformedSignature},
		{"long hex", testTSValue, "v1=" + hexSig + "00", wire.ErrMalformedSignature},
		{"not hex", testTSValue, "v1=" + strings.Repeat("zz", 32), wire.ErrMalformedSignature},
		{"only another scheme", testTSValue, "v2=" + hexSig, wire.ErrMalformedSignature},
		{"sha256= (the Flux scheme)", testTSValue, "sha256=" + hexSig, wire.ErrMalformedSignature},
		{"empty entry", testTSValue, good + ",", wire.ErrMalformedSignature},
		{"too many entries", testTSValue, strings.Repeat(good+",", 4) + good, wire.ErrMalformedSignature},
		{"oversized", testTSValue, good + "," + "v2=" + strings.Repeat("a", 2000), wire.ErrMalformedSignature},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := newVerifier(g, testKey, nil).Verify("POST", testPath, tc.ts, tc.sig, testBody)
			g.Expect(err).To(MatchError(wire.ErrUnauthorized))
			g.Expect(err).To(MatchError(tc.reason))
		})
	}
}

func TestVerifyError_doesNotRevealTheReason(t *testing.T) {
	g := NewWithT(t)
	v := newVerifier(g, testKey, nil)
	stale := v.Verify("POST", testPath, "1", wire.Sign(testKey, time.Unix(1, 0), "POST", testPath, testBody), testBody)
	mismatch := v.Verify("POST", testPath, testTSValue, wire.Sign(otherKey, testTime, "POST", testPath, testBody), testBody)
	g.Expect(stale).To(HaveOccurred())
	g.Expect(mismatch).To(HaveOccurred())
	g.Expect(stale.Error()).To(Equal(mismatch.Error()))
	g.Expect(stale.Error()).NotTo(ContainSubstring("stale"))

	var ve *wire.VerifyError
	g.Expect(errors.As(stale, &ve)).To(BeTrue())
	g.Expect(ve.Reason()).To(Equal("stale_timestamp"))
	g.Expect(errors.Is(stale, wire.ErrSignatureMismatch)).To(BeFalse())
}

func TestNewVerifier_rejectsShortKeys(t *testing.T) {
	g := NewWithT(t)
	_, err := wire.NewVerifier([]byte("short"), nil)
	g.Expect(err).To(MatchError(ContainSubstring("current key")))
	_, err = wire.NewVerifier(testKey, []byte("short"))
	g.Expect(err).To(MatchError(ContainSubstring("previous key")))
	_, err = wire.NewVerifier(nil, nil)
	g.Expect(err).To(HaveOccurred())
	// 31 bytes: one too few, for every kind of key.
	_, err = wire.NewVerifier([]byte("0123456789abcdef0123456789abcde"), nil)
	g.Expect(err).To(MatchError(ContainSubstring("current key must be at least 32 bytes, got 31")))
	_, err = wire.NewVerifier([]byte("0123456789abcdef0123456789abcdef"), nil)
	g.Expect(err).NotTo(HaveOccurred())
}

func TestNewVerifier_copiesKeys(t *testing.T) {
	g := NewWithT(t)
	key := append([]byte(nil), testKey...)
	v := newVerifier(g, key, nil)
	key[0] ^= 0xff
	g.Expect(v.Verify("POST", testPath, testTSValue, wire.Sign(testKey, testTime, "POST", testPath, testBody), testBody)).To(Succeed())
}

func TestVerify_nilVerifierRejects(t *testing.T) {
	g := NewWithT(t)
	var v *wire.Verifier
	g.Expect(v.Verify("POST", testPath, testTSValue, wire.Sign(testKey, testTime, "POST", testPath, testBody), testBody)).To(MatchError(wire.ErrUnauthorized))
}

func newVerifier(g *WithT, current, previous []byte) *wire.Verifier {
	v, err := wire.NewVerifier(current, previous, wire.WithClock(fixedClock))
	g.Expect(err).NotTo(HaveOccurred())
	return v
}
