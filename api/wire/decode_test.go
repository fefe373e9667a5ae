package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
)

func validEvent(seq int64) wire.Event {
	e := wire.Event{
		Spoke:     "staging-1",
		Namespace: "apps",
		Release:   "web",
		Revision:  7,
		Kind:      wire.EventObjectCreated,
		Type:      wire.EventTypeNormal,
		Reason:    "Created",
		Object:    &wire.ObjectRef{Kind: "Pod", Namespace: "apps", Name: "web-7d9f-x", UID: "0b6c3f5e-8d7a-4f43-9a51-1d0c2b1e9f00"},
		Message:   "Pod web-7d9f-x created",
		Time:      time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Sequence:  seq,
	}
	e.ID = e.ComputeID()
	return e
}

func validBatch() *wire.EventBatch {
	return &wire.EventBatch{
		Spoke:        "staging-1",
		AgentVersion: "v0.1.0",
		SentAt:       time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC),
		Events:       []wire.Event{validEvent(1), validEvent(2)},
	}
}

func validSnapshot() *wire.StateSnapshot {
	return &wire.StateSnapshot{
		Spoke:             "staging-1",
		AgentVersion:      "v0.1.0",
		KubernetesVersion: "v1.36.3",
		TakenAt:           time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC),
		Releases: []wire.ReleaseState{{
			Namespace:      "apps",
			Release:        "web",
			Chart:          "web",
			ChartVersion:   "1.4.0",
			AppVersion:     "2.0.1",
			Revision:       7,
			Status:         wire.StatusDeployed,
			Health:         wire.HealthCurrent,
			ValuesDigest:   "sha256:" + strings.Repeat("ab", 32),
			ManifestDigest: "sha256:" + strings.Repeat("cd", 32),
			FirstDeployed:  time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC),
			LastDeployed:   time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			HelmRelease:    &wire.HelmReleaseRef{Namespace: "apps", Name: "web"},
			HelmReleaseStatus: &wire.HelmReleaseStatus{
				Ready: wire.ConditionTrue, Reason: "UpgradeSucceeded",
				Message:            "Helm upgrade succeeded for release apps/web.v7 with chart web@1.4.0",
				ObservedGeneration: 3, LastAttemptedRevision: "1.4.0",
			},
		}, {
			Namespace:    "apps",
			Release:      "worker",
			Chart:        "worker",
			ChartVersion: "0.3.0",
			Revision:     1,
			Status:       wire.StatusPendingInstall,
			Health:       wire.HealthInProgress,
			HealthReason: "Deployment apps/worker: 0 of 2 replicas available",
		}},
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mutate decodes a valid body into a generic map, lets fn change it and
// re-encodes it, so each bad case differs from a valid body in one way.
func mutate(t *testing.T, v any, fn func(m map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(mustJSON(t, v)), &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	return mustJSON(t, m)
}

func item(m map[string]any, list string, i int) map[string]any {
	return m[list].([]any)[i].(map[string]any)
}

func TestDecodeEventBatch_acceptsValidBatch(t *testing.T) {
	g := NewWithT(t)
	want := validBatch()
	got, err := wire.DecodeEventBatch(strings.NewReader(mustJSON(t, want)), 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
}

func TestDecodeEventBatch_rejectsBadBodies(t *testing.T) {
	valid := validBatch()
	cases := []struct {
		name  string
		body  string
		limit int64
		want  []string // substrings of the error
		large bool     // ErrTooLarge rather than ErrInvalid
	}{
		{name: "empty body", body: "", want: []string{"body required"}},
		{name: "whitespace", body: " \n", want: []string{"body required"}},
		{name: "malformed JSON", body: `{"spoke": "staging-1",`, want: []string{"malformed JSON"}},
		{name: "syntax error", body: `{"spoke" "staging-1"}`, want: []string{"malformed JSON at offset"}},
		{name: "array", body: `[]`, want: []string{"body must be a JSON object"}},
		{name: "null", body: `null`, want: []string{"body must be a JSON object"}},
		{name: "unknown field", body: mutate(t, valid, func(m map[string]any) { m["priority"] = 1 }), want: []string{"priority: unknown field"}},
		{name: "unknown nested field", body: mutate(t, valid, func(m map[string]any) {
			item(m, "events", 1)["flavor"] = "blue"
		}), want: []string{"events[1].flavor: unknown field"}},
		{name: "trailing data", body: mustJSON(t, valid) + `{}`, want: []string{"unexpected data after the JSON object"}},
		{name: "trailing garbage", body: mustJSON(t, valid) + ` x`, want: []string{"unexpected data after the JSON object"}},
		{name: "oversized", body: mustJSON(t, valid), limit: 100, want: []string{"body too large", "more than 100 bytes"}, large: true},
		{name: "missing spoke", body: mutate(t, valid, func(m map[string]any) { delete(m, "spoke") }), want: []string{"spoke: required"}},
		{name: "missing sentAt", body: mutate(t, valid, func(m map[string]any) { delete(m, "sentAt") }), want: []string{"sentAt: required"}},
		{name: "no events", body: mutate(t, valid, func(m map[string]any) { m["events"] = []any{} }), want: []string{"events: required"}},
		{name: "missing release", body: mutate(t, valid, func(m map[string]any) { delete(item(m, "events", 1), "release") }), want: []string{"events[1].release: required"}},
		{name: "wrong type", body: mutate(t, valid, func(m map[string]any) { item(m, "events", 1)["revision"] = "7" }), want: []string{"events[1].revision: must be an integer"}},
		{name: "fractional revision", body: mutate(t, valid, func(m map[string]any) { item(m, "events", 0)["revision"] = 7.5 }), want: []string{"events[0].revision: must be an integer"}},
		{name: "bad time", body: mutate(t, valid, func(m map[string]any) { item(m, "events", 1)["time"] = "yesterday" }), want: []string{"events[1].time: invalid time \"yesterday\""}},
		{name: "bad enum", body: mutate(t, valid, func(m map[string]any) { item(m, "events", 0)["type"] = "Critical" }), want: []string{"events[0].type: unsupported value \"Critical\"", "Normal, Warning"}},
		{name: "bad kind", body: mutate(t, valid, func(m map[string]any) { item(m, "events", 0)["kind"] = "Exploded" }), want: []string{"events[0].kind: unsupported value"}},
		{name: "spoke differs from batch", body: mutate(t, valid, func(m map[string]any) { item(m, "events", 0)["spoke"] = "prod-1" }), want: []string{`events[0].spoke: must equal the batch's spoke "staging-1"`}},
		{name: "bad namespace", body: mutate(t, valid, func(m map[string]any) { item(m, "events", 0)["namespace"] = "Apps_1" }), want: []string{"events[0].namespace: invalid value", "DNS label"}},
		{name: "zero revision", body: mutate(t, valid, func(m map[string]any) { item(m, "events", 0)["revision"] = 0 }), want: []string{"events[0].revision: must be between 1 and"}},
		{name: "forged id", body: mutate(t, valid, func(m map[string]any) { item(m, "events", 0)["id"] = strings.Repeat("0", 32) }), want: []string{"events[0].id: does not match"}},
		{name: "malformed id", body: mutate(t, valid, func(m map[string]any) { item(m, "events", 0)["id"] = "xyz" }), want: []string{"events[0].id: must be 32 lowercase hex digits"}},
		{name: "long message", body: mutate(t, valid, func(m map[string]any) {
			item(m, "events", 0)["message"] = strings.Repeat("é", wire.MaxMessageLength+1)
		}), want: []string{"events[0].message: must be at most 1024 characters"}},
		{name: "object without name", body: mutate(t, valid, func(m map[string]any) {
			delete(item(m, "events", 0)["object"].(map[string]any), "name")
		}), want: []string{"events[0].object.name: required"}},
		{name: "negative sequence", body: mutate(t, valid, func(m map[string]any) { item(m, "events", 0)["sequence"] = -1 }), want: []string{"events[0].sequence: must be 0 or more"}},
		{name: "too many events", body: mutate(t, valid, func(m map[string]any) {
			evs := m["events"].([]any)
			for len(evs) <= wire.MaxEventsPerBatch {
				evs = append(evs, evs[0])
			}
			m["events"] = evs
		}), want: []string{"events: must hold at most 500 events, got 501"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := wire.DecodeEventBatch(strings.NewReader(tc.body), tc.limit)
			g.Expect(got).To(BeNil())
			g.Expect(err).To(HaveOccurred())
			if tc.large {
				g.Expect(errors.Is(err, wire.ErrTooLarge)).To(BeTrue(), "error %q should match ErrTooLarge", err)
			} else {
				g.Expect(errors.Is(err, wire.ErrInvalid)).To(BeTrue(), "error %q should match ErrInvalid", err)
			}
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

func TestDecodeEventBatch_boundsTheErrorList(t *testing.T) {
	g := NewWithT(t)
	body := mutate(t, validBatch(), func(m map[string]any) {
		ev := map[string]any{"id": "x"}
		evs := make([]any, 100)
		for i := range evs {
			evs[i] = ev
		}
		m["events"] = evs
	})
	_, err := wire.DecodeEventBatch(strings.NewReader(body), 0)
	var inv *wire.InvalidError
	g.Expect(errors.As(err, &inv)).To(BeTrue())
	g.Expect(len(inv.Errors)).To(BeNumerically("<=", 21))
	g.Expect(inv.Errors[len(inv.Errors)-1].Detail).To(MatchRegexp(`^and \d+ more problems$`))
}

func TestDecodeEventBatch_reportsMaxBytesReaderAsTooLarge(t *testing.T) {
	g := NewWithT(t)
	rec := httptest.NewRecorder()
	r := http.MaxBytesReader(rec, io.NopCloser(strings.NewReader(mustJSON(t, validBatch()))), 10)
	_, err := wire.DecodeEventBatch(r, 0)
	g.Expect(err).To(MatchError(wire.ErrTooLarge))
}

func TestDecodeEventBatch_acceptsExactlyTheLimit(t *testing.T) {
	g := NewWithT(t)
	body := mustJSON(t, validBatch())
	_, err := wire.DecodeEventBatch(strings.NewReader(body), int64(len(body)))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = wire.DecodeEventBatch(strings.NewReader(body), int64(len(body))-1)
	g.Expect(err).To(MatchError(wire.ErrTooLarge))
}

func TestDecodeStateSnapshot_acceptsValidSnapshot(t *testing.T) {
	g := NewWithT(t)
	want := validSnapshot()
	got, err := wire.DecodeStateSnapshot(strings.NewReader(mustJSON(t, want)), 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))

	// A spoke without releases sends an empty list.
	empty := validSnapshot()
	empty.Releases = []wire.ReleaseState{}
	got, err = wire.DecodeStateSnapshot(strings.NewReader(mustJSON(t, empty)), 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Releases).To(BeEmpty())
}

func TestDecodeStateSnapshot_rejectsBadBodies(t *testing.T) {
	valid := validSnapshot()
	cases := []struct {
		name  string
		body  string
		limit int64
		want  []string
		large bool
	}{
		{name: "malformed JSON", body: `{"spoke":`, want: []string{"malformed JSON"}},
		{name: "unknown field", body: mutate(t, valid, func(m map[string]any) { item(m, "releases", 0)["replicas"] = 3 }), want: []string{"releases[0].replicas: unknown field"}},
		{name: "trailing data", body: mustJSON(t, valid) + "\n" + mustJSON(t, valid), want: []string{"unexpected data after the JSON object"}},
		{name: "oversized", body: mustJSON(t, valid), limit: 64, want: []string{"body too large"}, large: true},
		{name: "missing releases", body: mutate(t, valid, func(m map[string]any) { delete(m, "releases") }), want: []string{"releases: required"}},
		{name: "null releases", body: mutate(t, valid, func(m map[string]any) { m["releases"] = nil }), want: []string{"releases: required"}},
		{name: "missing takenAt", body: mutate(t, valid, func(m map[string]any) { delete(m, "takenAt") }), want: []string{"takenAt: required"}},
		{name: "missing agentVersion", body: mutate(t, valid, func(m map[string]any) { delete(m, "agentVersion") }), want: []string{"agentVersion: required"}},
		{name: "negative protocolVersion", body: mutate(t, valid, func(m map[string]any) { m["protocolVersion"] = -1 }), want: []string{"protocolVersion: must be between 0 and 1000"}},
		{name: "protocolVersion not a number", body: mutate(t, valid, func(m map[string]any) { m["protocolVersion"] = "v1" }), want: []string{"protocolVersion"}},
		{name: "missing chartVersion", body: mutate(t, valid, func(m map[string]any) { delete(item(m, "releases", 1), "chartVersion") }), want: []string{"releases[1].chartVersion: required"}},
		{name: "bad status", body: mutate(t, valid, func(m map[string]any) { item(m, "releases", 0)["status"] = "installed" }), want: []string{`releases[0].status: unsupported value "installed"`, "pending-rollback"}},
		{name: "bad health", body: mutate(t, valid, func(m map[string]any) { item(m, "releases", 1)["health"] = "Healthy" }), want: []string{`releases[1].health: unsupported value "Healthy"`}},
		{name: "bad digest", body: mutate(t, valid, func(m map[string]any) { item(m, "releases", 0)["valuesDigest"] = "md5:abc" }), want: []string{"releases[0].valuesDigest: invalid value"}},
		{name: "bad lastDeployed", body: mutate(t, valid, func(m map[string]any) { item(m, "releases", 0)["lastDeployed"] = 12 }), want: []string{"releases[0].lastDeployed: must be an RFC 3339 time string"}},
		{name: "release name too long", body: mutate(t, valid, func(m map[string]any) { item(m, "releases", 0)["release"] = strings.Repeat("a", 54) }), want: []string{"releases[0].release: must be at most 53 characters"}},
		{name: "duplicate release", body: mutate(t, valid, func(m map[string]any) {
			item(m, "releases", 1)["release"] = "web"
		}), want: []string{`releases[1]: duplicate of releases[0]`}},
		{name: "helmRelease without name", body: mutate(t, valid, func(m map[string]any) {
			delete(item(m, "releases", 0)["helmRelease"].(map[string]any), "name")
		}), want: []string{"releases[0].helmRelease.name: required"}},
		{name: "helmReleaseStatus without helmRelease", body: mutate(t, valid, func(m map[string]any) {
			delete(item(m, "releases", 0), "helmRelease")
		}), want: []string{"releases[0].helmReleaseStatus: only allowed with helmRelease"}},
		{name: "helmReleaseStatus with a bad ready", body: mutate(t, valid, func(m map[string]any) {
			item(m, "releases", 0)["helmReleaseStatus"].(map[string]any)["ready"] = "Yes"
		}), want: []string{"releases[0].helmReleaseStatus.ready: unsupported value \"Yes\"", "True, False, Unknown"}},
		{name: "helmReleaseStatus with a reason with spaces", body: mutate(t, valid, func(m map[string]any) {
			item(m, "releases", 0)["helmReleaseStatus"].(map[string]any)["reason"] = "Upgrade failed"
		}), want: []string{"releases[0].helmReleaseStatus.reason: invalid value"}},
		{name: "helmReleaseStatus with a message too long", body: mutate(t, valid, func(m map[string]any) {
			item(m, "releases", 0)["helmReleaseStatus"].(map[string]any)["message"] = strings.Repeat("x", 1025)
		}), want: []string{"releases[0].helmReleaseStatus.message: must be at most 1024 characters"}},
		{name: "releases not a list", body: mutate(t, valid, func(m map[string]any) { m["releases"] = map[string]any{} }), want: []string{"releases: must be an array"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := wire.DecodeStateSnapshot(strings.NewReader(tc.body), tc.limit)
			g.Expect(got).To(BeNil())
			g.Expect(err).To(HaveOccurred())
			if tc.large {
				g.Expect(errors.Is(err, wire.ErrTooLarge)).To(BeTrue(), "error %q should match ErrTooLarge", err)
			} else {
				g.Expect(errors.Is(err, wire.ErrInvalid)).To(BeTrue(), "error %q should match ErrInvalid", err)
			}
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

func TestNewErrorResponse_listsFields(t *testing.T) {
	g := NewWithT(t)
	body := mutate(t, validBatch(), func(m map[string]any) { delete(item(m, "events", 0), "release") })
	_, err := wire.DecodeEventBatch(strings.NewReader(body), 0)
	resp := wire.NewErrorResponse(err)
	g.Expect(resp.Fields).To(ContainElement(wire.FieldError{Field: "events[0].release", Detail: "required"}))

	var buf bytes.Buffer
	g.Expect(json.NewEncoder(&buf).Encode(resp)).To(Succeed())
	g.Expect(buf.String()).To(ContainSubstring(`"field":"events[0].release"`))
}

// The expected id was computed independently of this package:
//
//	python3 -c 'import hashlib; h = hashlib.sha256()
//	for f in ["tugboat.dev/event/v1", "staging-1", "apps", "web", "7", "ObjectCreated", "uid-1", "3"]:
//	    h.update(f"{len(f)}:{f},".encode())
//	print(h.hexdigest()[:32])'
func TestNewEventID_matchesKnownVector(t *testing.T) {
	g := NewWithT(t)
	g.Expect(wire.NewEventID("staging-1", "apps", "web", 7, "ObjectCreated", "uid-1", 3)).To(Equal("70751616710f521b9322820c3d4fad54"))
}

func TestNewEventID_isDeterministicAndSensitiveToEveryField(t *testing.T) {
	g := NewWithT(t)
	base := wire.NewEventID("staging-1", "apps", "web", 7, "ObjectCreated", "uid-1", 3)
	g.Expect(base).To(HaveLen(wire.EventIDLength))
	g.Expect(base).To(MatchRegexp(`^[0-9a-f]{32}$`))
	g.Expect(wire.NewEventID("staging-1", "apps", "web", 7, "ObjectCreated", "uid-1", 3)).To(Equal(base))

	variants := []string{
		wire.NewEventID("staging-2", "apps", "web", 7, "ObjectCreated", "uid-1", 3),
		wire.NewEventID("staging-1", "apps2", "web", 7, "ObjectCreated", "uid-1", 3),
		wire.NewEventID("staging-1", "apps", "web2", 7, "ObjectCreated", "uid-1", 3),
		wire.NewEventID("staging-1", "apps", "web", 8, "ObjectCreated", "uid-1", 3),
		wire.NewEventID("staging-1", "apps", "web", 7, "ObjectUpdated", "uid-1", 3),
		wire.NewEventID("staging-1", "apps", "web", 7, "ObjectCreated", "uid-2", 3),
		wire.NewEventID("staging-1", "apps", "web", 7, "ObjectCreated", "uid-1", 4),
		// Moving a boundary between fields changes the id.
		wire.NewEventID("staging-1a", "pps", "web", 7, "ObjectCreated", "uid-1", 3),
	}
	seen := map[string]bool{base: true}
	for _, v := range variants {
		g.Expect(seen).NotTo(HaveKey(v))
		seen[v] = true
	}
}

func TestPaths(t *testing.T) {
	g := NewWithT(t)
	g.Expect(wire.EventsPath("staging-1")).To(Equal("/v1/spokes/staging-1/events"))
	g.Expect(wire.StatePath("staging-1")).To(Equal("/v1/spokes/staging-1/state"))
}
