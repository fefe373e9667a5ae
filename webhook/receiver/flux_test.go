package receiver_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/e2e/fluxtest"
	"tugboat.dev/tugboat/webhook/receiver"
)

// fluxHarness registers Spoke spoke1 (the capture's) and testSpoke, each
// with agent keys and separate Flux keys.
func fluxHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.store.setKeys("spoke1", testKey, nil)
	h.store.setFluxKeys("spoke1", fluxTestKey, nil)
	h.store.setKeys(testSpoke, testKey, oldKey)
	h.store.setFluxKeys(testSpoke, fluxTestKey, fluxOldKey)
	return h
}

func TestFlux_replaysTheNotificationControllerCapture(t *testing.T) {
	g := NewWithT(t)
	h := fluxHarness(t)
	srv := httptest.NewTLSServer(h.server.Handler())
	defer srv.Close()

	captures := fluxtest.ReadCapture(t, fluxtest.UpgradeSucceeded)
	g.Expect(captures).To(HaveLen(1))
	c := captures[0]
	raw := c.Body(t)

	// Our signer is notification-controller's: it reproduces the captured
	// signature with the capture's token.
	g.Expect(fluxtest.Sign(fluxtest.CaptureToken, raw)).To(Equal(c.Headers["X-Signature"]))

	send := func(sig string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, srv.URL+c.Path, bytes.NewReader(raw))
		g.Expect(err).NotTo(HaveOccurred())
		for k, v := range c.Headers {
			if k != "Host" && k != "Content-Length" {
				req.Header.Set(k, v)
			}
		}
		req.Header.Set(receiver.FluxSignatureHeader, sig)
		resp, err := srv.Client().Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		return resp
	}
	// The capture's own token is too short for the hub: refused as sent.
	h.store.setFluxKeys("spoke1", fluxtest.CaptureToken, nil)
	resp := send(c.Headers["X-Signature"])
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(h.metric("tugboat_receiver_rejected_total", map[string]string{"endpoint": "flux", "reason": "invalid_key"})).To(Equal(1.0))

	// Signed with a key long enough, the captured body is recorded.
	h.store.setFluxKeys("spoke1", fluxTestKey, nil)
	sig := fluxtest.Sign(fluxTestKey, raw)
	resp = send(sig)
	var got wire.AcceptedResponse
	g.Expect(json.NewDecoder(resp.Body).Decode(&got)).To(Succeed())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
	g.Expect(got).To(Equal(wire.AcceptedResponse{Received: 1, Accepted: 1}))

	events := h.store.recorded("spoke1")
	g.Expect(events).To(HaveLen(1))
	e := events[0]
	g.Expect(e.Spoke).To(Equal("spoke1"))
	g.Expect(e.Namespace).To(Equal("default"))
	g.Expect(e.Release).To(Equal("demo"))
	g.Expect(e.Kind).To(Equal(wire.EventReleaseStatus))
	g.Expect(e.Type).To(Equal(wire.EventTypeNormal))
	g.Expect(e.Reason).To(Equal("UpgradeSucceeded"))
	g.Expect(e.Revision).To(Equal(3), "the message names release default/demo.v3")
	g.Expect(e.Object).To(Equal(&wire.ObjectRef{Kind: "HelmRelease", Namespace: "default", Name: "demo", UID: "f9bc0a6e-0dba-4c59-aaf4-e87711f14a85"}))
	g.Expect(e.Time).To(Equal(time.Date(2026, 11, 22, 0, 11, 39, 0, time.UTC)))
	g.Expect(e.ID).To(Equal(e.ComputeID()))
	g.Expect(e.Validate()).To(Succeed())
	g.Expect(e.State).To(Equal(&wire.ReleaseState{
		Namespace: "default", Release: "demo", Chart: "demo", ChartVersion: "1.0.0", AppVersion: "1.16.0",
		Revision: 3, Status: wire.StatusDeployed, Health: wire.HealthCurrent,
		LastDeployed: time.Date(2026, 11, 22, 0, 11, 39, 0, time.UTC),
		HelmRelease:  &wire.HelmReleaseRef{Namespace: "default", Name: "demo"},
	}))

	// notification-controller retries: the same event is a duplicate.
	resp = send(sig)
	g.Expect(json.NewDecoder(resp.Body).Decode(&got)).To(Succeed())
	_ = resp.Body.Close()
	g.Expect(got).To(Equal(wire.AcceptedResponse{Received: 1, Duplicates: 1}))
	g.Expect(h.store.recorded("spoke1")).To(HaveLen(1))
}

// fluxPayload is a Flux Event as notification-controller posts it.
type fluxPayload struct {
	InvolvedObject      map[string]string `json:"involvedObject"`
	Severity            string            `json:"severity"`
	Timestamp           time.Time         `json:"timestamp"`
	Message             string            `json:"message"`
	Reason              string            `json:"reason"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	ReportingController string            `json:"reportingController"`
	ReportingInstance   string            `json:"reportingInstance"`
}

const webUID = "5d0b6a4e-1111-4c59-aaf4-e87711f14a85"

func helmReleaseEvent(reason, severity, message string, meta map[string]string, at time.Time) fluxPayload {
	return fluxPayload{
		InvolvedObject: map[string]string{
			"kind": "HelmRelease", "namespace": "apps", "name": "web", "uid": webUID,
			"apiVersion": "helm.toolkit.fluxcd.io/v2", "resourceVersion": "1234",
		},
		Severity: severity, Timestamp: at, Message: message, Reason: reason, Metadata: meta,
		ReportingController: "helm-controller", ReportingInstance: "helm-controller-7f9c-x",
	}
}

// fluxSign signs body as notification-controller does.
func postFlux(h *harness, spoke string, key []byte, p fluxPayload) *httptest.ResponseRecorder {
	body, err := json.Marshal(p)
	if err != nil {
		h.t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/flux/"+spoke, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Gotk-Component", "helm-controller")
	req.Header.Set(receiver.FluxSignatureHeader, fluxtest.Sign(key, body))
	return h.do(req)
}

func TestFlux_mapsHelmControllerEvents(t *testing.T) {
	at := testNow.Add(-30 * time.Second)
	prefixed := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m["helm.toolkit.fluxcd.io/"+kv[i]] = kv[i+1]
		}
		return m
	}
	plain := func(kv ...string) map[string]string {
		m := map[string]string{"cluster": "staging-1"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	digest := "sha256:" + hexOf(sha256.Sum256([]byte("values")))
	type want struct {
		kind         wire.EventKind
		typ          wire.EventType
		revision     int
		status       wire.ReleaseStatus
		health       wire.Health
		chart        string
		chartVersion string
		appVersion   string
		valuesDigest string
		namespace    string
		release      string
		healthReason string // checked when set
	}
	cases := []struct {
		name  string
		event fluxPayload
		want  want
	}{
		{
			name: "install, prefixed metadata",
			event: helmReleaseEvent("InstallSucceeded", "info", "Helm install succeeded for release apps/web.v1 with chart web@1.4.0",
				prefixed("revision", "1.4.0", "token", digest, "app-version", "2.0.1"), at),
			want: want{kind: wire.EventReleaseStatus, typ: wire.EventTypeNormal, revision: 1, status: wire.StatusDeployed, health: wire.HealthCurrent,
				chart: "web", chartVersion: "1.4.0", appVersion: "2.0.1", valuesDigest: digest, namespace: "apps", release: "web"},
		},
		{
			name: "upgrade failure, unprefixed metadata",
			event: helmReleaseEvent("UpgradeFailed", "error", "Helm upgrade failed for release apps/web with chart web@1.5.0: context deadline exceeded\n\nLast Helm logs:\n\nwaiting",
				plain("revision", "1.5.0", "token", digest), at.Add(time.Second)),
			want: want{kind: wire.EventReleaseStatus, typ: wire.EventTypeWarning, revision: 0, status: wire.StatusFailed, health: wire.HealthFailed,
				chart: "web", chartVersion: "1.5.0", valuesDigest: digest, namespace: "apps", release: "web"},
		},
		{
			name: "upgrade recovers",
			event: helmReleaseEvent("UpgradeSucceeded", "info", "Helm upgrade succeeded for release apps/web.v3 with chart web@1.5.0",
				plain("revision", "1.5.0", "app-version", "2.1.0"), at.Add(2*time.Second)),
			want: want{kind: wire.EventReleaseStatus, typ: wire.EventTypeNormal, revision: 3, status: wire.StatusDeployed, health: wire.HealthCurrent,
				chart: "web", chartVersion: "1.5.0", appVersion: "2.1.0", namespace: "apps", release: "web"},
		},
		{
			// helm-controller rolls back only to remediate, and sends no
			// event when it then stalls: the health is not known.
			name: "rollback: the revision Helm writes is unknown, and whether helm-controller stalled",
			event: helmReleaseEvent("RollbackSucceeded", "info", "Helm rollback to previous release apps/web.v2 with chart web@1.4.0 succeeded",
				prefixed("revision", "1.4.0"), at.Add(3*time.Second)),
			want: want{kind: wire.EventReleaseStatus, typ: wire.EventTypeNormal, revision: 0, status: wire.StatusDeployed, health: wire.HealthUnknown,
				chart: "web", chartVersion: "1.4.0", namespace: "apps", release: "web",
				healthReason: "Helm rollback to previous release apps/web.v2 with chart web@1.4.0 succeeded: helm-controller remediated a failed release; whether it retries or has stalled (RetriesExceeded) no Flux event tells"},
		},
		{
			name: "target namespace and release name from the message",
			event: helmReleaseEvent("UpgradeSucceeded", "info", "Helm upgrade succeeded for release prod/prod-web.v12 with chart webapp@1.4.0",
				plain("revision", "1.4.0+0123456789abcdef"), at),
			want: want{kind: wire.EventReleaseStatus, typ: wire.EventTypeNormal, revision: 12, status: wire.StatusDeployed, health: wire.HealthCurrent,
				chart: "webapp", chartVersion: "1.4.0", namespace: "prod", release: "prod-web"},
		},
		{
			name: "OCI digest stripped, other build metadata kept",
			event: helmReleaseEvent("TestSucceeded", "info", "Helm test succeeded for release apps/web.v4 with chart web@1.4.0+build.5: 1 test hook completed successfully",
				plain("revision", "1.4.0+build.5@sha256:"+hexOf(sha256.Sum256(nil))), at),
			want: want{kind: wire.EventReleaseStatus, typ: wire.EventTypeNormal, revision: 4, status: wire.StatusDeployed, health: wire.HealthCurrent,
				chart: "web", chartVersion: "1.4.0+build.5", namespace: "apps", release: "web"},
		},
		{
			name: "test failure",
			event: helmReleaseEvent("TestFailed", "error", "Helm test failed for release apps/web.v4 with chart web@1.4.0: pod web-test failed",
				plain("revision", "1.4.0"), at),
			want: want{kind: wire.EventReleaseStatus, typ: wire.EventTypeWarning, revision: 4, status: wire.StatusDeployed, health: wire.HealthFailed,
				chart: "web", chartVersion: "1.4.0", namespace: "apps", release: "web"},
		},
		{
			name: "uninstall",
			event: helmReleaseEvent("UninstallSucceeded", "info", "Helm uninstall succeeded for release apps/web.v4 with chart web@1.4.0",
				plain("revision", "1.4.0"), at),
			want: want{kind: wire.EventReleaseStatus, typ: wire.EventTypeNormal, revision: 4, status: wire.StatusUninstalled, health: wire.HealthUnknown,
				chart: "web", chartVersion: "1.4.0", namespace: "apps", release: "web"},
		},
		{
			name: "progressing upgrade",
			event: helmReleaseEvent("Progressing", "info", "Running 'upgrade' action with timeout of 5m0s",
				plain("revision", "1.6.0"), at),
			want: want{kind: wire.EventReleaseStatus, typ: wire.EventTypeNormal, revision: 0, status: wire.StatusPendingUpgrade, health: wire.HealthInProgress,
				chart: "web", chartVersion: "1.6.0", namespace: "apps", release: "web"},
		},
		{
			name: "artifact failure changes no state",
			event: helmReleaseEvent("ArtifactFailed", "error", "HelmChart 'flux-system/apps-web' is not ready: chart pull error",
				nil, at),
			want: want{kind: wire.EventKubernetes, typ: wire.EventTypeWarning, namespace: "apps", release: "web"},
		},
		{
			name: "release identity from metadata",
			event: helmReleaseEvent("Progressing", "info", "Fulfilling prerequisites",
				plain("release-namespace", "shop", "release-name", "shop-web"), at),
			want: want{kind: wire.EventKubernetes, typ: wire.EventTypeNormal, namespace: "shop", release: "shop-web"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := fluxHarness(t)
			rec := postFlux(h, testSpoke, fluxTestKey, tc.event)
			g.Expect(accepted(g, rec)).To(Equal(wire.AcceptedResponse{Received: 1, Accepted: 1}))
			events := h.store.recorded(testSpoke)
			g.Expect(events).To(HaveLen(1))
			e := events[0]
			g.Expect(e.Kind).To(Equal(tc.want.kind))
			g.Expect(e.Type).To(Equal(tc.want.typ))
			g.Expect(e.Reason).To(Equal(tc.event.Reason))
			g.Expect(e.Revision).To(Equal(tc.want.revision))
			g.Expect(e.Namespace).To(Equal(tc.want.namespace))
			g.Expect(e.Release).To(Equal(tc.want.release))
			g.Expect(e.Object).To(Equal(&wire.ObjectRef{Kind: "HelmRelease", Namespace: "apps", Name: "web", UID: webUID}))
			g.Expect(e.ID).To(Equal(e.ComputeID()))
			g.Expect(e.Time).To(Equal(tc.event.Timestamp))
			if tc.want.kind != wire.EventReleaseStatus {
				g.Expect(e.State).To(BeNil())
				return
			}
			g.Expect(e.State).NotTo(BeNil())
			g.Expect(e.State.Namespace).To(Equal(tc.want.namespace))
			g.Expect(e.State.Release).To(Equal(tc.want.release))
			g.Expect(e.State.Revision).To(Equal(tc.want.revision))
			g.Expect(e.State.Status).To(Equal(tc.want.status))
			g.Expect(e.State.Health).To(Equal(tc.want.health))
			if tc.want.healthReason != "" {
				g.Expect(e.State.HealthReason).To(Equal(tc.want.healthReason))
			}
			g.Expect(e.State.Chart).To(Equal(tc.want.chart))
			g.Expect(e.State.ChartVersion).To(Equal(tc.want.chartVersion))
			g.Expect(e.State.AppVersion).To(Equal(tc.want.appVersion))
			g.Expect(e.State.ValuesDigest).To(Equal(tc.want.valuesDigest))
			g.Expect(e.State.HelmRelease).To(Equal(&wire.HelmReleaseRef{Namespace: "apps", Name: "web"}))
			if tc.want.health == wire.HealthFailed {
				g.Expect(e.State.HealthReason).To(HavePrefix(tc.event.Message[:20]))
				g.Expect(e.State.HealthReason).NotTo(ContainSubstring("\n"))
			}
			if tc.want.revision != 0 {
				g.Expect(e.Validate()).To(Succeed())
			}
		})
	}
}

func TestFlux_upgradeFailureThenRecoveryInOrder(t *testing.T) {
	g := NewWithT(t)
	h := fluxHarness(t)
	at := testNow.Add(-time.Minute)
	steps := []fluxPayload{
		helmReleaseEvent("InstallSucceeded", "info", "Helm install succeeded for release apps/web.v1 with chart web@1.4.0", map[string]string{"revision": "1.4.0"}, at),
		helmReleaseEvent("UpgradeFailed", "error", "Helm upgrade failed for release apps/web with chart web@1.5.0: timed out", map[string]string{"revision": "1.5.0"}, at.Add(time.Second)),
		helmReleaseEvent("UpgradeSucceeded", "info", "Helm upgrade succeeded for release apps/web.v3 with chart web@1.5.0", map[string]string{"helm.toolkit.fluxcd.io/revision": "1.5.0"}, at.Add(2*time.Second)),
	}
	for _, p := range steps {
		g.Expect(accepted(g, postFlux(h, testSpoke, fluxTestKey, p)).Accepted).To(Equal(1))
	}
	events := h.store.recorded(testSpoke)
	g.Expect(events).To(HaveLen(3))
	g.Expect([]wire.Health{events[0].State.Health, events[1].State.Health, events[2].State.Health}).
		To(Equal([]wire.Health{wire.HealthCurrent, wire.HealthFailed, wire.HealthCurrent}))
	g.Expect(events[2].State.ChartVersion).To(Equal("1.5.0"))
	// A late redelivery of the revision-1 install is a duplicate; late news
	// of revision 1 under another timestamp is recorded (for revision 1;
	// the store keeps revision 3 current).
	g.Expect(accepted(g, postFlux(h, testSpoke, fluxTestKey, steps[0]))).To(Equal(wire.AcceptedResponse{Received: 1, Duplicates: 1}))
	late := steps[0]
	late.Timestamp = late.Timestamp.Add(-time.Second)
	late.Reason = "TestSucceeded"
	late.Message = "Helm test succeeded for release apps/web.v1 with chart web@1.4.0: done"
	g.Expect(accepted(g, postFlux(h, testSpoke, fluxTestKey, late))).To(Equal(wire.AcceptedResponse{Received: 1, Accepted: 1}))
}

func TestFlux_ignoresOtherKinds(t *testing.T) {
	g := NewWithT(t)
	h := fluxHarness(t)
	p := helmReleaseEvent("ReconciliationSucceeded", "info", "Applied revision: main@sha1:abc", nil, testNow)
	p.InvolvedObject["kind"] = "Kustomization"
	g.Expect(accepted(g, postFlux(h, testSpoke, fluxTestKey, p))).To(Equal(wire.AcceptedResponse{Received: 1}))
	g.Expect(h.store.total()).To(BeZero())
}

func TestFlux_rejectsBadRequests(t *testing.T) {
	valid := helmReleaseEvent("UpgradeSucceeded", "info", "Helm upgrade succeeded for release apps/web.v3 with chart web@1.5.0", map[string]string{"revision": "1.5.0"}, testNow)
	body := func(t *testing.T, p fluxPayload) []byte { return mustJSON(t, p) }
	cases := []struct {
		name string
		req  func(t *testing.T) *http.Request
		code int
		want string
	}{
		{"bad HMAC", func(t *testing.T) *http.Request {
			b := body(t, valid)
			return fluxRequest(testSpoke, b, fluxtest.Sign(wrongKey, b))
		}, http.StatusUnauthorized, "request not authenticated"},
		{"HMAC of another body", func(t *testing.T) *http.Request {
			other := valid
			other.Reason = "UpgradeFailed"
			return fluxRequest(testSpoke, body(t, valid), fluxtest.Sign(fluxTestKey, body(t, other)))
		}, http.StatusUnauthorized, "request not authenticated"},
		{"no signature", func(t *testing.T) *http.Request {
			return fluxRequest(testSpoke, body(t, valid), "")
		}, http.StatusUnauthorized, "request not authenticated"},
		{"agent scheme", func(t *testing.T) *http.Request {
			b := body(t, valid)
			return fluxRequest(testSpoke, b, "v1="+fluxtest.Sign(fluxTestKey, b)[len("sha256="):])
		}, http.StatusUnauthorized, "request not authenticated"},
		{"unknown spoke", func(t *testing.T) *http.Request {
			b := body(t, valid)
			return fluxRequest("nobody", b, fluxtest.Sign(fluxTestKey, b))
		}, http.StatusUnauthorized, "request not authenticated"},
		{"stale event", func(t *testing.T) *http.Request {
			old := valid
			old.Timestamp = testNow.Add(-time.Hour)
			b := body(t, old)
			return fluxRequest(testSpoke, b, fluxtest.Sign(fluxTestKey, b))
		}, http.StatusUnauthorized, "request not authenticated"},
		{"not JSON", func(t *testing.T) *http.Request {
			b := []byte("hello")
			return fluxRequest(testSpoke, b, fluxtest.Sign(fluxTestKey, b))
		}, http.StatusBadRequest, "body must be a JSON object"},
		{"missing reason", func(t *testing.T) *http.Request {
			p := valid
			p.Reason = ""
			b := body(t, p)
			return fluxRequest(testSpoke, b, fluxtest.Sign(fluxTestKey, b))
		}, http.StatusBadRequest, `"field":"reason"`},
		{"bad release name", func(t *testing.T) *http.Request {
			p := valid
			p.Message = "Fulfilling prerequisites"
			p.InvolvedObject = map[string]string{"kind": "HelmRelease", "namespace": "Apps", "name": "web"}
			b := body(t, p)
			return fluxRequest(testSpoke, b, fluxtest.Sign(fluxTestKey, b))
		}, http.StatusBadRequest, "mapped event namespace"},
		{"wrong method", func(t *testing.T) *http.Request {
			return httptest.NewRequest(http.MethodPut, "/v1/flux/"+testSpoke, nil)
		}, http.StatusMethodNotAllowed, "method PUT not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := fluxHarness(t)
			rec := h.do(tc.req(t))
			g.Expect(rec.Code).To(Equal(tc.code), rec.Body.String())
			g.Expect(rec.Body.String()).To(ContainSubstring(tc.want))
			g.Expect(h.store.total()).To(BeZero())
		})
	}
}

func TestFlux_acceptsOtherAlgorithmsAndThePreviousKey(t *testing.T) {
	g := NewWithT(t)
	h := fluxHarness(t)
	p := helmReleaseEvent("UpgradeSucceeded", "info", "Helm upgrade succeeded for release apps/web.v3 with chart web@1.5.0", map[string]string{"revision": "1.5.0"}, testNow)
	b := mustJSON(t, p)
	m := hmac.New(sha512.New, fluxOldKey)
	m.Write(b)
	rec := h.do(fluxRequest(testSpoke, b, "SHA512="+hex.EncodeToString(m.Sum(nil))))
	g.Expect(accepted(g, rec).Accepted).To(Equal(1))
}

func fluxRequest(spoke string, body []byte, sig string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/v1/flux/"+spoke, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set(receiver.FluxSignatureHeader, sig)
	}
	return req
}

func hexOf(sum [32]byte) string { return hex.EncodeToString(sum[:]) }
