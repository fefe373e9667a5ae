// Package fluxtest holds what tests need of Flux notification-controller,
// which does not run here: a capture of the requests a real one sent to a
// generic-hmac Provider (testdata/README.md), and the signature such a
// Provider puts on a body.
//
// It is a test helper: tugboat itself does not use it. The hub's receiver
// verifies these signatures in webhook/receiver; this package only signs.
package fluxtest

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"
)

// UpgradeSucceeded names the capture of notification-controller v1.9.3
// reporting helm-controller's upgrade of HelmRelease default/demo to chart
// 1.0.0, sent to the Provider address /v1/flux/spoke1.
const UpgradeSucceeded = "notification-controller-v1.9.3-upgrade-succeeded.jsonl"

// CaptureToken is the token of the captured Provider's Secret: the key its
// X-Signature headers verify with. It is shorter than the hub accepts
// (wire.MinSpokeKeySize), so a replay against a hub re-signs the body.
var CaptureToken = []byte("sekrit")

//go:embed testdata/*.jsonl
var captures embed.FS

// Request is one request of a capture, as notification-controller sent it.
type Request struct {
	// Path is the request path.
	Path string `json:"path"`
	// Headers are the request headers as received, X-Signature included.
	Headers map[string]string `json:"headers"`
	// RawB64 is the exact body, base64: the bytes the signature covers.
	RawB64 string `json:"raw_b64"`
	// SigOK says the capturing server verified the signature.
	SigOK bool `json:"sig_ok"`
}

// Body returns the exact body bytes of r, failing t when they do not decode.
func (r Request) Body(t testing.TB) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(r.RawB64)
	if err != nil {
		t.Fatalf("capture of %s: raw_b64: %v", r.Path, err)
	}
	return b
}

// ReadCapture returns the requests of the capture name (one JSON object a
// line), failing t when it cannot.
func ReadCapture(t testing.TB, name string) []Request {
	t.Helper()
	b, err := captures.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var out []Request
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		var r Request
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("capture %s: %v", name, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("capture %s: %v", name, err)
	}
	if len(out) == 0 {
		t.Fatalf("capture %s holds no request", name)
	}
	return out
}

// Sign returns the X-Signature header a generic-hmac Provider with key sends
// with body: "sha256=" and the hex HMAC-SHA256 of the body.
func Sign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
