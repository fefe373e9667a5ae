package pipelineapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/webhook/pipelineapi"
)

// Credentials the fuzzer picks from (auth % 6). The promotion-request
// credentials (authToken, authSigned) cannot approve; authApproval can
// only approve.
const (
	authNone = iota
	authToken
	authWrongToken
	authSigned
	authStale
	authApproval
)

var (
	fuzzOnce    sync.Once
	fuzzFixture *fixture
)

// FuzzPipelineAPI sends arbitrary methods, paths, content types and bodies,
// with good or bad credentials, to the handler backed by a real API server
// (namespace "fuzz"). Whatever arrives: no panic, a JSON answer with a known
// status code, 401s that all look alike, nothing accepted without valid
// credentials, and a 201 only with the Promotion really created.
func FuzzPipelineAPI(f *testing.F) {
	f.Add("POST", "/v1/pipelines/fuzz/web/promotions", "application/json", uint8(authToken), []byte(`{"environment":"staging","version":"1.0.0"}`))
	f.Add("POST", "/v1/pipelines/fuzz/web/approvals", "application/json", uint8(authApproval), []byte(`{"promotion":"web-production-1.0.0","approve":true}`))
	f.Add("GET", "/v1/pipelines/fuzz/web/promotions", "", uint8(authNone), []byte(nil))
	f.Fuzz(func(t *testing.T, method, path, contentType string, auth uint8, body []byte) {
		fuzzOnce.Do(func() { fuzzFixture = newFixture(t, "fuzz") })
		fx := fuzzFixture
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		r, err := http.NewRequest(method, "http://hub.example"+path, bytes.NewReader(body))
		if err != nil {
			t.Skip("not a request a client can send")
		}
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		valid := false
		switch auth % 6 {
		case authToken:
			r.Header.Set("Authorization", "Bearer "+webToken)
			valid = true
		case authWrongToken:
			r.Header.Set("Authorization", "Bearer "+otherToken)
		case authSigned:
			wire.SignRequest(r, webKey, body, time.Now())
			valid = true
		case authStale:
			wire.SignRequest(r, webKey, body, time.Now().Add(-time.Hour))
		case authApproval:
			r.Header.Set("Authorization", "Bearer "+releaseBotToken)
			valid = true
		}
		rec := httptest.NewRecorder()
		fx.handler.ServeHTTP(rec, r)

		switch rec.Code {
		case 200, 201, 400, 401, 403, 404, 405, 409, 413, 415, 429:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
		var generic map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &generic); err != nil {
			t.Fatalf("answer is not a JSON object: %v: %q", err, rec.Body)
		}
		if rec.Code == http.StatusUnauthorized && rec.Body.String() != `{"error":"request not authenticated"}`+"\n" {
			t.Fatalf("a 401 that says more: %s", rec.Body)
		}
		if !valid {
			switch rec.Code {
			case 401, 405, 413, 415, 429:
			case 403:
				if auth%6 != authWrongToken {
					t.Fatalf("403 without credentials: %s", rec.Body)
				}
				// otherToken is the request token of Pipeline other: it
				// authenticates, and cannot approve.
			case 404:
				if !strings.Contains(rec.Body.String(), "no such endpoint") {
					t.Fatalf("404 past authentication without credentials: %s", rec.Body)
				}
			default:
				t.Fatalf("status %d without valid credentials: %s", rec.Code, rec.Body)
			}
		}
		if rec.Code == http.StatusCreated {
			var resp pipelineapi.PromotionResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.Promotion == "" {
				t.Fatalf("201 without a promotion: %s", rec.Body)
			}
			pr := fx.promotion(resp.Promotion)
			if pr.Spec.Pipeline != "web" || pr.Spec.RequestedBy != tugboatv1alpha1.RequestedByCI {
				t.Fatalf("created %+v", pr.Spec)
			}
		}
	})
}
