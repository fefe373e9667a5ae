package receiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// FuzzFluxSignatureHeader feeds arbitrary X-Signature values to the parser
// and the verifier: no panics, only well-formed values parse, and a value
// verifies only when it is the body's HMAC. Seeds:
// testdata/fuzz/FuzzFluxSignatureHeader.
func FuzzFluxSignatureHeader(f *testing.F) {
	f.Add("sha256=00", []byte("{}"))
	key := []byte("sekrit")
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		newHash, sum, err := parseFluxSignature(header)
		if err == nil {
			if len(sum) != newHash().Size() {
				t.Fatalf("parsed %d bytes for a %d-byte hash", len(sum), newHash().Size())
			}
			alg, _, _ := strings.Cut(strings.TrimSpace(header), "=")
			switch strings.ToLower(strings.TrimSpace(alg)) {
			case "sha256", "sha512":
			default:
				t.Fatalf("accepted algorithm %q", alg)
			}
		}
		if verr := verifyFluxSignature(header, body, key); verr == nil {
			if err != nil {
				t.Fatal("verified a header that does not parse")
			}
			m := hmac.New(newHash, key)
			m.Write(body)
			if !hmac.Equal(m.Sum(nil), sum) {
				t.Fatal("verified a wrong signature")
			}
		}
		// The body's own signature always verifies, and never with no key.
		m := hmac.New(sha256.New, key)
		m.Write(body)
		good := "sha256=" + hex.EncodeToString(m.Sum(nil))
		if err := verifyFluxSignature(good, body, key); err != nil {
			t.Fatalf("the body's signature did not verify: %v", err)
		}
		if verifyFluxSignature(good, body, nil, []byte{}) == nil {
			t.Fatal("verified without a key")
		}
	})
}
