package e2e_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/e2e/fluxtest"
	"tugboat.dev/tugboat/e2e/harness"
)

// These tests drive the real hub (hub.New in-process, against a real hub
// control plane) over real HTTP on loopback, as an agent, a Flux
// notification-controller or a CI job would, and assert on what the hub
// cluster's API server returns.

func startHubCluster(t *testing.T) *harness.Cluster {
	t.Helper()
	return harness.StartT(t, harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true})
}

// url is the receiver's URL for path.
func (f *fleet) url(path string) string { return "http://" + f.hubAddr + path }

// waitReceiverReady waits until the receiver answers /readyz with 200.
func (f *fleet) waitReceiverReady(g Gomega) {
	g.Eventually(func() int {
		resp, err := http.Get(f.url("/readyz"))
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(http.StatusOK))
}

// reply is what the receiver answered.
type reply struct {
	code int
	body []byte
}

func (r reply) accepted(g Gomega) wire.AcceptedResponse {
	var a wire.AcceptedResponse
	g.Expect(json.Unmarshal(r.body, &a)).To(Succeed(), "body: %s", r.body)
	return a
}

// do sends req to the receiver and reads the whole answer.
func (f *fleet) do(req *http.Request) reply {
	f.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("reading the answer to %s: %v", req.URL.Path, err)
	}
	return reply{code: resp.StatusCode, body: body}
}

// signedPost is a POST of body to path, signed with key at ts (scheme v1),
// as an agent or a CI job sends it.
func (f *fleet) signedPost(path string, key, body []byte, ts time.Time) *http.Request {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url(path), bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	wire.SignRequest(req, key, body, ts)
	return req
}

// registerFluxKey gives Spoke name (registered) a Flux key of its own,
// separate from the agent's, under "fluxKey" in its key Secret, as an admin
// does for a spoke fed by a Flux generic-hmac Provider, and returns it.
func (f *fleet) registerFluxKey(name string) []byte {
	f.t.Helper()
	ctx := context.Background()
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	key := []byte(hex.EncodeToString(raw))
	var secret corev1.Secret
	if err := f.hub.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name + "-key"}, &secret); err != nil {
		f.t.Fatal(err)
	}
	secret.Data[tugboatv1alpha1.SpokeFluxKeySecretKey] = key
	if err := f.hub.Client.Update(ctx, &secret); err != nil {
		f.t.Fatal(err)
	}
	return key
}

// fluxPost is a POST of a Flux event body to /v1/flux/{spoke}, with the
// headers notification-controller sends.
func (f *fleet) fluxPost(spoke string, key, body []byte) *http.Request {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url("/v1/flux/"+spoke), bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Gotk-Component", "helm-controller")
	req.Header.Set("X-Signature", fluxtest.Sign(key, body))
	return req
}

// releaseState is a wire.ReleaseState for tests.
func releaseState(ns, release, version string, rev int, status wire.ReleaseStatus, health wire.Health) *wire.ReleaseState {
	return &wire.ReleaseState{
		Namespace: ns, Release: release, Chart: release, ChartVersion: version,
		Revision: rev, Status: status, Health: health,
	}
}

// stateEvent is an event about the release itself, carrying st.
func stateEvent(spoke string, kind wire.EventKind, reason string, st *wire.ReleaseState, at time.Time, seq int64) wire.Event {
	e := wire.Event{
		Spoke: spoke, Namespace: st.Namespace, Release: st.Release, Revision: st.Revision,
		Kind: kind, Type: wire.EventTypeNormal, Reason: reason, State: st,
		Message: reason + " " + st.ChartVersion, Time: at.UTC(), Sequence: seq,
	}
	if st.Health == wire.HealthFailed {
		e.Type = wire.EventTypeWarning
	}
	e.ID = e.ComputeID()
	return e
}

// objectEvent is an event about an object the release owns.
func objectEvent(spoke, ns, release string, rev int, kind wire.EventKind, reason string, obj wire.ObjectRef, at time.Time, seq int64) wire.Event {
	e := wire.Event{
		Spoke: spoke, Namespace: ns, Release: release, Revision: rev,
		Kind: kind, Type: wire.EventTypeNormal, Reason: reason, Object: &obj,
		Message: obj.Kind + " " + obj.Name + " " + strings.ToLower(reason), Time: at.UTC(), Sequence: seq,
	}
	e.ID = e.ComputeID()
	return e
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func batchBody(t *testing.T, spoke string, events ...wire.Event) []byte {
	t.Helper()
	return mustJSON(t, wire.EventBatch{Spoke: spoke, AgentVersion: "e2e", SentAt: time.Now().UTC(), Events: events})
}

// hubState is what a request could change in the hub cluster: every
// ReleaseHistory's resourceVersion and the Spoke's.
type hubState struct {
	Histories map[string]string
	Spoke     string
}

func (f *fleet) hubState(spoke string) func(g Gomega) hubState {
	return func(g Gomega) hubState {
		ctx := context.Background()
		var list tugboatv1alpha1.ReleaseHistoryList
		g.Expect(f.hub.Client.List(ctx, &list)).To(Succeed())
		s := hubState{Histories: map[string]string{}}
		for _, rh := range list.Items {
			s.Histories[rh.Namespace+"/"+rh.Name] = rh.ResourceVersion
		}
		var sp tugboatv1alpha1.Spoke
		g.Expect(f.hub.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: spoke}, &sp)).To(Succeed())
		s.Spoke = sp.ResourceVersion
		return s
	}
}

// fluxEventBody is a Flux Event (fluxcd/pkg/apis/event/v1beta1) with its
// fields in the order notification-controller serializes them, so a
// constructed event has the capture's exact shape.
type fluxEventBody struct {
	InvolvedObject      fluxObjectBody    `json:"involvedObject"`
	Severity            string            `json:"severity"`
	Timestamp           time.Time         `json:"timestamp"`
	Message             string            `json:"message"`
	Reason              string            `json:"reason"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	ReportingController string            `json:"reportingController"`
	ReportingInstance   string            `json:"reportingInstance,omitempty"`
}

type fluxObjectBody struct {
	Kind            string `json:"kind,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	APIVersion      string `json:"apiVersion,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// TestHub_recordsAFluxReplay replays the real notification-controller
// capture plus events built in its shape (an install, an upgrade failure and
// its recovery, a failed upgrade rolled back) against the real hub's Flux
// endpoint, signed as a generic-hmac Provider signs them with the Spoke's
// generated key, and checks the ReleaseHistory after each: one revision at
// most is deployed (a newer one supersedes it), and a rollback's health is
// Unknown (helm-controller sends no event saying whether it then stalled).
func TestHub_recordsAFluxReplay(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(t, startHubCluster(t))
	f.registerSpoke("spoke1")
	key := f.registerFluxKey("spoke1")
	f.waitReceiverReady(g)

	captures := fluxtest.ReadCapture(t, fluxtest.UpgradeSucceeded)
	g.Expect(captures).To(HaveLen(1))
	capture := captures[0]
	g.Expect(capture.Path).To(Equal("/v1/flux/spoke1"))
	captured := capture.Body(t)
	// Our signer is notification-controller's: it reproduces the captured
	// signature with the capture's token.
	g.Expect(fluxtest.Sign(fluxtest.CaptureToken, captured)).To(Equal(capture.Headers["X-Signature"]))
	// Our event type serializes exactly as notification-controller does.
	var parsed fluxEventBody
	g.Expect(json.Unmarshal(captured, &parsed)).To(Succeed())
	g.Expect(string(mustJSON(t, parsed))).To(Equal(string(captured)))
	hr := parsed.InvolvedObject

	base := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	at := func(step int) time.Time { return base.Add(time.Duration(step) * 5 * time.Second) }
	event := func(step int, severity, reason, message string, md map[string]string) []byte {
		return mustJSON(t, fluxEventBody{
			InvolvedObject: hr, Severity: severity, Timestamp: at(step), Message: message, Reason: reason,
			Metadata: md, ReportingController: "helm-controller", ReportingInstance: "vm",
		})
	}
	// The capture, its timestamp moved to now; nothing else changes.
	const capturedTS = `"timestamp":"2026-11-22T00:11:39Z"`
	g.Expect(bytes.Count(captured, []byte(capturedTS))).To(Equal(1))
	recovery := bytes.Replace(captured, []byte(capturedTS), []byte(`"timestamp":"`+at(3).Format(time.RFC3339)+`"`), 1)

	const digest = "sha256:4c0b4c0a5d0a5f3f3f0e2b7d1e4a8f6c9d2b1a0e3f4c5d6e7f8091a2b3c4d5e6"
	steps := []struct {
		name    string
		body    []byte
		want    current
		reasons []string // reasons recorded on want.Revision
	}{
		{"install starts", event(0, "info", "Progressing", "Running 'install' action with timeout of 5m0s",
			map[string]string{"cluster": "spoke1", "revision": "0.9.0"}),
			current{1, "0.9.0", tugboatv1alpha1.ReleaseStatusPendingInstall, tugboatv1alpha1.HealthInProgress}, []string{"Progressing"}},
		{"install succeeds", event(1, "info", "InstallSucceeded", "Helm install succeeded for release default/demo.v1 with chart demo@0.9.0",
			map[string]string{"app-version": "1.15.0", "cluster": "spoke1", "revision": "0.9.0", "token": digest}),
			current{1, "0.9.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}, []string{"Progressing", "InstallSucceeded"}},
		{"upgrade fails", event(2, "error", "UpgradeFailed", "Helm upgrade failed for release default/demo with chart demo@1.0.0: context deadline exceeded",
			map[string]string{"app-version": "1.16.0", "cluster": "spoke1", "revision": "1.0.0"}),
			current{2, "1.0.0", tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthFailed}, []string{"UpgradeFailed"}},
		{"upgrade recovers (the capture)", recovery,
			current{3, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}, []string{"UpgradeSucceeded"}},
		{"next upgrade fails", event(4, "error", "UpgradeFailed", "Helm upgrade failed for release default/demo with chart demo@1.1.0: timed out waiting for the condition",
			map[string]string{"app-version": "1.17.0", "cluster": "spoke1", "revision": "1.1.0"}),
			current{4, "1.1.0", tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthFailed}, []string{"UpgradeFailed"}},
		// helm-controller's own metadata keys, prefixed, as it emits them.
		{"remediation rolls back", event(5, "info", "RollbackSucceeded", "Helm rollback to previous release default/demo.v3 with chart demo@1.0.0 succeeded",
			map[string]string{"helm.toolkit.fluxcd.io/app-version": "1.16.0", "cluster": "spoke1", "helm.toolkit.fluxcd.io/revision": "1.0.0"}),
			current{5, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthUnknown}, []string{"RollbackSucceeded"}},
	}
	for _, s := range steps {
		r := f.do(f.fluxPost("spoke1", key, s.body))
		g.Expect(r.code).To(Equal(http.StatusAccepted), "%s: %s", s.name, r.body)
		g.Expect(r.accepted(g)).To(Equal(wire.AcceptedResponse{Received: 1, Accepted: 1}), s.name)
		g.Eventually(f.current("spoke1", "default", "demo")).WithTimeout(10*time.Second).WithPolling(100*time.Millisecond).
			Should(Equal(s.want), s.name)
		rh := f.history(g, "spoke1", "default", "demo")
		var reasons []string
		for _, rev := range rh.Status.Revisions {
			if rev.Revision == s.want.Revision {
				for _, e := range rev.Events {
					reasons = append(reasons, e.Reason)
				}
			}
		}
		g.Expect(reasons).To(Equal(s.reasons), s.name)
		// A newer deployed revision supersedes the older ones: one is
		// deployed at most (after a failed upgrade, the one before it).
		var deployed []int32
		for _, rev := range rh.Status.Revisions {
			if rev.Status == tugboatv1alpha1.ReleaseStatusDeployed {
				deployed = append(deployed, rev.Revision)
			}
		}
		g.Expect(len(deployed)).To(BeNumerically("<=", 1), "%s: deployed revisions %v", s.name, deployed)
	}

	rh := f.history(g, "spoke1", "default", "demo")
	g.Expect(rh.Spec).To(Equal(tugboatv1alpha1.ReleaseHistorySpec{
		Spoke: "spoke1", Namespace: "default", Release: "demo",
		HelmRelease: &tugboatv1alpha1.ObjectReference{Namespace: "default", Name: "demo"},
	}))
	g.Expect(rh.Labels).To(HaveKeyWithValue(tugboatv1alpha1.LabelSpoke, "spoke1"))
	g.Expect(rh.OwnerReferences).To(ConsistOf(HaveField("Name", "spoke1")))
	g.Expect(rh.Status.Revisions).To(HaveLen(5))
	byRev := map[int32]tugboatv1alpha1.Revision{}
	for _, r := range rh.Status.Revisions {
		byRev[r.Revision] = r
	}
	g.Expect(byRev[1].ValuesDigest).To(Equal(digest))
	g.Expect(byRev[1].AppVersion).To(Equal("1.15.0"))
	g.Expect(byRev[1].LastDeployed).NotTo(BeNil())
	g.Expect(byRev[2].HealthReason).To(ContainSubstring("context deadline exceeded"))
	g.Expect(byRev[2].Events[0].Type).To(Equal(tugboatv1alpha1.EventTypeWarning))
	g.Expect(byRev[3].AppVersion).To(Equal("1.16.0"))
	g.Expect(byRev[3].Events[0].Message).To(Equal("Helm upgrade succeeded for release default/demo.v3 with chart demo@1.0.0"))
	g.Expect(byRev[3].Events[0].Object).To(Equal(&tugboatv1alpha1.EventObjectReference{Kind: "HelmRelease", Namespace: "default", Name: "demo"}))
	g.Expect(byRev[5].AppVersion).To(Equal("1.16.0"), "read from the prefixed metadata key")
	g.Expect(byRev[5].HealthReason).To(ContainSubstring("whether it retries or has stalled (RetriesExceeded) no Flux event tells"))
	g.Expect(byRev[1].Status).To(Equal(tugboatv1alpha1.ReleaseStatusSuperseded))
	g.Expect(byRev[3].Status).To(Equal(tugboatv1alpha1.ReleaseStatusSuperseded))
	ready := apimeta.FindStatusCondition(rh.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionUnknown), "after a rollback, the health is not known")
	g.Expect(ready.Reason).To(Equal("HealthUnknown"))
	g.Expect(ready.Message).To(Equal(byRev[5].HealthReason))

	// notification-controller retries a delivery: a duplicate, no write.
	rv := rh.ResourceVersion
	r := f.do(f.fluxPost("spoke1", key, recovery))
	g.Expect(r.code).To(Equal(http.StatusAccepted))
	g.Expect(r.accepted(g)).To(Equal(wire.AcceptedResponse{Received: 1, Duplicates: 1}))
	g.Consistently(func(g Gomega) string { return f.history(g, "spoke1", "default", "demo").ResourceVersion }).
		WithTimeout(time.Second).Should(Equal(rv))

	// Events about other kinds are acknowledged and not recorded.
	ks := mustJSON(t, fluxEventBody{
		InvolvedObject: fluxObjectBody{Kind: "Kustomization", Namespace: "flux-system", Name: "apps", UID: "0d1c2b3a-0000-4000-8000-000000000001", APIVersion: "kustomize.toolkit.fluxcd.io/v1"},
		Severity:       "info", Timestamp: at(6), Message: "Reconciliation finished", Reason: "ReconciliationSucceeded",
		ReportingController: "kustomize-controller",
	})
	r = f.do(f.fluxPost("spoke1", key, ks))
	g.Expect(r.code).To(Equal(http.StatusAccepted))
	g.Expect(r.accepted(g)).To(Equal(wire.AcceptedResponse{Received: 1}))
	var list tugboatv1alpha1.ReleaseHistoryList
	g.Expect(f.hub.Client.List(context.Background(), &list)).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
}

// TestHub_rejectsBadInputWithoutChangingState sends bad requests to the
// real hub: each gets its status code and leaves the hub cluster as it was
// (every ReleaseHistory's and the Spoke's resourceVersion), except the
// out-of-order event, which is accepted but leaves status.current at the
// newer revision.
func TestHub_rejectsBadInputWithoutChangingState(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(t, startHubCluster(t))
	key := f.registerSpoke("edge-1")
	fluxKey := f.registerFluxKey("edge-1")
	otherKey := f.registerSpoke("edge-2")
	f.waitReceiverReady(g)
	const spoke, ns, rel = "edge-1", "apps", "web"
	events := wire.EventsPath(spoke)
	now := time.Now().UTC().Truncate(time.Second)

	// The release is at revision 3.
	seed := batchBody(t, spoke,
		stateEvent(spoke, wire.EventReleaseStatus, "Deployed", releaseState(ns, rel, "1.3.0", 3, wire.StatusDeployed, wire.HealthCurrent), now, 1),
		objectEvent(spoke, ns, rel, 3, wire.EventObjectUpdated, "Updated", wire.ObjectRef{Kind: "Deployment", Namespace: ns, Name: rel, UID: "uid-deploy"}, now, 2),
	)
	r := f.do(f.signedPost(events, key, seed, time.Now()))
	g.Expect(r.code).To(Equal(http.StatusAccepted), "%s", r.body)
	g.Expect(r.accepted(g)).To(Equal(wire.AcceptedResponse{Received: 2, Accepted: 2}))
	wantCurrent := current{3, "1.3.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}
	g.Eventually(f.current(spoke, ns, rel)).WithTimeout(10 * time.Second).Should(Equal(wantCurrent))
	g.Eventually(func(g Gomega) {
		var sp tugboatv1alpha1.Spoke
		g.Expect(f.hub.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: spoke}, &sp)).To(Succeed())
		g.Expect(sp.Status.ObservedGeneration).To(Equal(sp.Generation))
		g.Expect(apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())).NotTo(BeNil())
	}).WithTimeout(10 * time.Second).Should(Succeed())
	state := f.hubState(spoke)
	quiet := state(g)
	g.Expect(quiet.Histories).To(HaveLen(1))
	g.Consistently(state).WithTimeout(time.Second).Should(Equal(quiet), "the hub writes nothing on its own")

	// fresh is a valid batch the hub has not seen: accepted, it would change
	// the ReleaseHistory, so each rejection below is visible if it fails.
	var seq atomic.Int64
	seq.Store(100)
	fresh := func(spoke string) []byte {
		n := seq.Add(1)
		return batchBody(t, spoke, objectEvent(spoke, ns, rel, 3, wire.EventObjectCreated, "Created",
			wire.ObjectRef{Kind: "Pod", Namespace: ns, Name: "web-pod-" + hex.EncodeToString([]byte{byte(n)}), UID: "uid-pod"}, now, n))
	}
	freshJSON := func(mutate func(ev map[string]any)) []byte {
		var m map[string]any
		g.Expect(json.Unmarshal(fresh(spoke), &m)).To(Succeed())
		mutate(m["events"].([]any)[0].(map[string]any))
		return mustJSON(t, m)
	}
	fluxEvent := func(ts time.Time) []byte {
		return mustJSON(t, fluxEventBody{
			InvolvedObject: fluxObjectBody{Kind: "HelmRelease", Namespace: ns, Name: rel, UID: "5d0b6a4e-1111-4c59-aaf4-e87711f14a85", APIVersion: "helm.toolkit.fluxcd.io/v2"},
			Severity:       "info", Timestamp: ts.UTC().Truncate(time.Second),
			Message: "Helm upgrade succeeded for release apps/web.v4 with chart web@1.4.0", Reason: "UpgradeSucceeded",
			Metadata: map[string]string{"revision": "1.4.0"}, ReportingController: "helm-controller",
		})
	}
	unauthorized := `{"error":"request not authenticated"}` + "\n"

	cases := []struct {
		name string
		req  func() *http.Request
		code int
		// body, when set, must be contained in the answer.
		body string
		// accepted, when set, is the 202 answer.
		accepted *wire.AcceptedResponse
		// changes: the request may change the ReleaseHistory, but never its
		// current revision.
		changes bool
	}{
		{name: "wrong key (another spoke's)", code: http.StatusUnauthorized, body: unauthorized,
			req: func() *http.Request { return f.signedPost(events, otherKey, fresh(spoke), time.Now()) }},
		{name: "signature reused on another path", code: http.StatusUnauthorized, body: unauthorized,
			req: func() *http.Request {
				body := fresh(spoke)
				signed := f.signedPost(events, key, body, time.Now())
				req := f.signedPost(wire.StatePath(spoke), key, body, time.Now())
				req.Header = signed.Header.Clone()
				return req
			}},
		{name: "stale timestamp", code: http.StatusUnauthorized, body: unauthorized,
			req: func() *http.Request { return f.signedPost(events, key, fresh(spoke), time.Now().Add(-6*time.Minute)) }},
		{name: "timestamp from the future", code: http.StatusUnauthorized, body: unauthorized,
			req: func() *http.Request { return f.signedPost(events, key, fresh(spoke), time.Now().Add(6*time.Minute)) }},
		{name: "unknown spoke", code: http.StatusUnauthorized, body: unauthorized,
			req: func() *http.Request { return f.signedPost(wire.EventsPath("ghost"), key, fresh("ghost"), time.Now()) }},
		{name: "malformed JSON", code: http.StatusBadRequest, body: "malformed JSON",
			req: func() *http.Request {
				return f.signedPost(events, key, []byte(`{"spoke":"edge-1","events":[`), time.Now())
			}},
		{name: "unknown field", code: http.StatusBadRequest, body: `"field":"events[0].flavor"`,
			req: func() *http.Request {
				return f.signedPost(events, key, freshJSON(func(ev map[string]any) { ev["flavor"] = "blue" }), time.Now())
			}},
		{name: "invalid enum value", code: http.StatusBadRequest, body: `"field":"events[0].type"`,
			req: func() *http.Request {
				return f.signedPost(events, key, freshJSON(func(ev map[string]any) { ev["type"] = "Critical" }), time.Now())
			}},
		{name: "oversized body", code: http.StatusRequestEntityTooLarge,
			req: func() *http.Request {
				body := append(fresh(spoke), bytes.Repeat([]byte(" "), 1<<20)...) // valid JSON, 1 MiB of trailing blanks
				return f.signedPost(events, key, body, time.Now())
			}},
		{name: "gzip bomb", code: http.StatusRequestEntityTooLarge, body: "decompressed body exceeds",
			req: func() *http.Request {
				var buf bytes.Buffer
				zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
				g.Expect(err).NotTo(HaveOccurred())
				_, _ = zw.Write(fresh(spoke))
				blanks := bytes.Repeat([]byte(" "), 1<<20)
				for range 16 { // 16 MiB of blanks: twice the decompressed limit
					_, _ = zw.Write(blanks)
				}
				g.Expect(zw.Close()).To(Succeed())
				g.Expect(buf.Len()).To(BeNumerically("<", 1<<20), "the bomb fits the body limit as sent")
				// The signature covers the compressed bytes, as sent.
				req := f.signedPost(events, key, buf.Bytes(), time.Now())
				req.Header.Set("Content-Encoding", "gzip")
				return req
			}},
		{name: "flux: wrong key", code: http.StatusUnauthorized, body: unauthorized,
			req: func() *http.Request { return f.fluxPost(spoke, []byte("sekrit"), fluxEvent(time.Now())) }},
		{name: "flux: stale event", code: http.StatusUnauthorized, body: unauthorized,
			req: func() *http.Request { return f.fluxPost(spoke, fluxKey, fluxEvent(time.Now().Add(-6*time.Minute))) }},
		{name: "flux: the agent's key", code: http.StatusUnauthorized, body: unauthorized,
			req: func() *http.Request { return f.fluxPost(spoke, key, fluxEvent(time.Now())) }},
		{name: "duplicate batch", code: http.StatusAccepted, accepted: &wire.AcceptedResponse{Received: 2, Duplicates: 2},
			req: func() *http.Request { return f.signedPost(events, key, seed, time.Now()) }},
		{name: "out-of-order older revision", code: http.StatusAccepted, accepted: &wire.AcceptedResponse{Received: 1, Accepted: 1}, changes: true,
			req: func() *http.Request {
				late := stateEvent(spoke, wire.EventReleaseStatus, "Deployed", releaseState(ns, rel, "1.2.0", 2, wire.StatusDeployed, wire.HealthCurrent), now.Add(-time.Minute), 1)
				return f.signedPost(events, key, batchBody(t, spoke, late), time.Now())
			}},
	}
	for _, c := range cases {
		before := state(g)
		r := f.do(c.req())
		g.Expect(r.code).To(Equal(c.code), "%s: %s", c.name, r.body)
		g.Expect(r.body).To(ContainSubstring(c.body), c.name)
		g.Expect(r.body).NotTo(ContainSubstring(string(key)), c.name)
		if c.accepted != nil {
			g.Expect(r.accepted(g)).To(Equal(*c.accepted), c.name)
		}
		if c.changes {
			g.Consistently(f.current(spoke, ns, rel)).WithTimeout(time.Second).Should(Equal(wantCurrent), c.name)
			continue
		}
		g.Expect(state(g)).To(Equal(before), c.name)
		g.Consistently(state).WithTimeout(300*time.Millisecond).Should(Equal(before), c.name)
	}
	// The late revision is kept as history, below the current one.
	rh := f.history(g, spoke, ns, rel)
	g.Expect(rh.Status.Current.Revision).To(Equal(int32(3)))
	g.Expect(rh.Status.Revisions[0].Revision).To(Equal(int32(3)))
}

// TestHub_spokeReadyFollowsHeartbeats posts signed state snapshots as an
// agent would, stops, and resumes: the Spoke is Ready=True, then Unknown
// once the heartbeat timeout passed, then True again.
func TestHub_spokeReadyFollowsHeartbeats(t *testing.T) {
	g := NewWithT(t)
	const timeout = 3 * time.Second
	f := newFleetWith(t, startHubCluster(t), func(o *hub.Options) { o.Spoke.HeartbeatTimeout = timeout })
	const spoke = "beat-1"
	key := f.registerSpoke(spoke)
	f.waitReceiverReady(g)

	heartbeat := func() {
		snap := wire.StateSnapshot{
			Spoke: spoke, AgentVersion: "v0.1.0-e2e", KubernetesVersion: "v1.36.3", TakenAt: time.Now().UTC(),
			Releases: []wire.ReleaseState{*releaseState("apps", "web", "1.0.0", 1, wire.StatusDeployed, wire.HealthCurrent)},
		}
		r := f.do(f.signedPost(wire.StatePath(spoke), key, mustJSON(t, snap), time.Now()))
		g.Expect(r.code).To(Equal(http.StatusAccepted), "%s", r.body)
		g.Expect(r.accepted(g)).To(Equal(wire.AcceptedResponse{Received: 1, Accepted: 1}))
	}
	ready := func(g Gomega) metav1.Condition {
		var sp tugboatv1alpha1.Spoke
		g.Expect(f.hub.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: spoke}, &sp)).To(Succeed())
		c := apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
		if c == nil {
			return metav1.Condition{}
		}
		return metav1.Condition{Status: c.Status, Reason: c.Reason}
	}
	isTrue := metav1.Condition{Status: metav1.ConditionTrue, Reason: tugboatv1alpha1.AgentConnectedReason.String()}
	isUnknown := metav1.Condition{Status: metav1.ConditionUnknown, Reason: tugboatv1alpha1.AgentNotSeenReason.String()}

	g.Eventually(ready).WithTimeout(10*time.Second).Should(Equal(isUnknown), "not seen before the first heartbeat")
	heartbeat()
	g.Eventually(ready).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(isTrue))
	var sp tugboatv1alpha1.Spoke
	g.Expect(f.hub.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: spoke}, &sp)).To(Succeed())
	g.Expect(sp.Status.AgentVersion).To(Equal("v0.1.0-e2e"))
	g.Expect(sp.Status.KubernetesVersion).To(Equal("v1.36.3"))
	g.Expect(sp.Status.ReleaseCount).To(Equal(int32(1)))
	g.Expect(sp.Status.LastSeen).NotTo(BeNil())
	g.Expect(f.current(spoke, "apps", "web")(g)).To(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

	// The agent goes quiet: Unknown after the timeout, not before (lastSeen
	// has a one-second resolution).
	last := time.Now()
	heartbeat()
	g.Eventually(ready).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(isTrue))
	g.Eventually(ready).WithTimeout(timeout + 10*time.Second).WithPolling(100 * time.Millisecond).Should(Equal(isUnknown))
	g.Expect(time.Since(last)).To(BeNumerically(">=", timeout-time.Second))

	// Heartbeats resume: Ready again.
	g.Eventually(func(g Gomega) metav1.Condition {
		heartbeat()
		return ready(g)
	}).WithTimeout(15 * time.Second).WithPolling(500 * time.Millisecond).Should(Equal(isTrue))
}

// TestHub_marksASpokeWhoseAgentSpeaksAnOlderProtocol: a snapshot without
// protocolVersion (an agent older than the field) is recorded, and the Spoke
// is AgentOutdated with the versions in its message; a current agent's
// snapshot clears the mark.
func TestHub_marksASpokeWhoseAgentSpeaksAnOlderProtocol(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(t, startHubCluster(t))
	const spoke = "old-1"
	key := f.registerSpoke(spoke)
	f.waitReceiverReady(g)
	post := func(protocol int) {
		snap := wire.StateSnapshot{
			Spoke: spoke, AgentVersion: "v0.0.9", ProtocolVersion: protocol, TakenAt: time.Now().UTC(),
			Releases: []wire.ReleaseState{*releaseState("apps", "web", "1.0.0", 1, wire.StatusDeployed, wire.HealthCurrent)},
		}
		r := f.do(f.signedPost(wire.StatePath(spoke), key, mustJSON(t, snap), time.Now()))
		g.Expect(r.code).To(Equal(http.StatusAccepted), "%s", r.body)
	}
	outdated := func(g Gomega) *metav1.Condition {
		var sp tugboatv1alpha1.Spoke
		g.Expect(f.hub.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: spoke}, &sp)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(sp.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())).To(BeTrue())
		return apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.AgentOutdatedCondition.String())
	}
	post(0)
	g.Eventually(outdated).WithTimeout(hubWait).WithPolling(100 * time.Millisecond).Should(And(
		HaveField("Status", metav1.ConditionTrue), HaveField("Reason", tugboatv1alpha1.OlderProtocolReason.String()),
		HaveField("Message", ContainSubstring("agent v0.0.9 speaks protocol v0, the hub v1"))))
	g.Expect(f.current(spoke, "apps", "web")(g)).To(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}),
		"an older agent is still recorded")
	post(wire.ProtocolVersion)
	g.Eventually(outdated).WithTimeout(hubWait).WithPolling(100 * time.Millisecond).Should(BeNil())
}

// TestHub_recordsReleaseEventsFromCI posts, as a CI job would for a cluster
// with neither an agent nor Flux, signed event batches carrying the
// release's State: the hub creates and updates the ReleaseHistory.
func TestHub_recordsReleaseEventsFromCI(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(t, startHubCluster(t))
	const spoke, ns, rel = "legacy-dc", "payments", "ledger"
	key := f.registerSpoke(spoke)
	f.waitReceiverReady(g)
	g.Expect(f.history(g, spoke, ns, rel)).To(BeNil())

	now := time.Now().UTC().Truncate(time.Second)
	install := batchBody(t, spoke,
		stateEvent(spoke, wire.EventReleaseStarted, "HelmInstall", releaseState(ns, rel, "2.0.0", 1, wire.StatusPendingInstall, wire.HealthInProgress), now, 1),
		stateEvent(spoke, wire.EventReleaseStatus, "Deployed", releaseState(ns, rel, "2.0.0", 1, wire.StatusDeployed, wire.HealthCurrent), now.Add(time.Second), 2),
	)
	r := f.do(f.signedPost(wire.EventsPath(spoke), key, install, time.Now()))
	g.Expect(r.code).To(Equal(http.StatusAccepted), "%s", r.body)
	g.Expect(r.accepted(g)).To(Equal(wire.AcceptedResponse{Received: 2, Accepted: 2}))
	g.Eventually(f.current(spoke, ns, rel)).WithTimeout(10 * time.Second).
		Should(Equal(current{1, "2.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

	rh := f.history(g, spoke, ns, rel)
	g.Expect(rh.Name).To(Equal("legacy-dc.payments.ledger"))
	g.Expect(rh.Spec).To(Equal(tugboatv1alpha1.ReleaseHistorySpec{Spoke: spoke, Namespace: ns, Release: rel}))
	g.Expect(rh.Labels).To(Equal(map[string]string{
		tugboatv1alpha1.LabelSpoke: spoke, tugboatv1alpha1.LabelRelease: rel, tugboatv1alpha1.LabelReleaseNamespace: ns,
	}))
	g.Expect(rh.Status.Revisions).To(HaveLen(1))
	g.Expect(rh.Status.Revisions[0].Events).To(HaveLen(2))

	upgrade := batchBody(t, spoke,
		stateEvent(spoke, wire.EventReleaseStatus, "Deployed", releaseState(ns, rel, "2.1.0", 2, wire.StatusDeployed, wire.HealthCurrent), now.Add(time.Minute), 3),
	)
	r = f.do(f.signedPost(wire.EventsPath(spoke), key, upgrade, time.Now()))
	g.Expect(r.code).To(Equal(http.StatusAccepted), "%s", r.body)
	g.Eventually(f.current(spoke, ns, rel)).WithTimeout(10 * time.Second).
		Should(Equal(current{2, "2.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
	g.Expect(f.history(g, spoke, ns, rel).Status.Revisions).To(HaveLen(2))
}
