package fluxtest_test

import (
	"testing"

	"tugboat.dev/tugboat/e2e/fluxtest"
)

// TestReadCapture_signaturesVerifyWithTheCapturedToken: every request of the
// capture is read whole, and Sign over its exact body reproduces the
// X-Signature notification-controller sent (so Sign is generic-hmac's scheme,
// and Body the bytes it signed).
func TestReadCapture_signaturesVerifyWithTheCapturedToken(t *testing.T) {
	reqs := fluxtest.ReadCapture(t, fluxtest.UpgradeSucceeded)
	for i, r := range reqs {
		if r.Path != "/v1/flux/spoke1" {
			t.Errorf("request %d: path %q, want /v1/flux/spoke1", i, r.Path)
		}
		if got, want := fluxtest.Sign(fluxtest.CaptureToken, r.Body(t)), r.Headers["X-Signature"]; got != want {
			t.Errorf("request %d: Sign = %q, the capture's X-Signature %q", i, got, want)
		}
		if got := fluxtest.Sign([]byte("another token"), r.Body(t)); got == r.Headers["X-Signature"] {
			t.Errorf("request %d: another token signs the same", i)
		}
	}
}
