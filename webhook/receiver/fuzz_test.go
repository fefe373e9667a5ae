package receiver_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/webhook/receiver"
)

// FuzzReceiverEvents sends arbitrary bodies and headers to the agent
// endpoints. The handler must never panic, must answer with one of the
// protocol's codes, and must record nothing unless the request was validly
// signed. Seeds: testdata/fuzz/FuzzReceiverEvents.
func FuzzReceiverEvents(f *testing.F) {
	f.Add([]byte(`{"spoke":"staging-1"}`), "1795313500", "v1=00", "", true, false)
	h := newHarness(f, func(o *receiver.Options) {
		o.RateLimit, o.RateBurst = 1e9, 1e9
		o.DedupeCacheSize = 1024
		o.DecompressedLimit = 1 << 20
	})
	validTS := strconv.FormatInt(testNow.Unix(), 10)
	f.Fuzz(func(t *testing.T, body []byte, ts, sig, encoding string, sign, state bool) {
		path := wire.EventsPath(testSpoke)
		if state {
			path = wire.StatePath(testSpoke)
		}
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		if encoding != "" {
			req.Header.Set("Content-Encoding", encoding)
		}
		if sign {
			wire.SignRequest(req, testKey, body, testNow)
		} else {
			req.Header.Set(wire.HeaderTimestamp, ts)
			req.Header.Set(wire.HeaderSignature, sig)
		}
		forged := !sign && (ts != validTS || sig != wire.Sign(testKey, testNow, http.MethodPost, path, body))

		before := h.store.total()
		rec := h.do(req)
		switch rec.Code {
		case http.StatusAccepted, http.StatusBadRequest, http.StatusUnauthorized,
			http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		default:
			t.Fatalf("unexpected status %d: %s", rec.Code, rec.Body.String())
		}
		if forged {
			if rec.Code != http.StatusUnauthorized && rec.Code != http.StatusUnsupportedMediaType && rec.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("unsigned request answered %d: %s", rec.Code, rec.Body.String())
			}
			if after := h.store.total(); after != before {
				t.Fatalf("unsigned request recorded %d items", after-before)
			}
		}
	})
}
