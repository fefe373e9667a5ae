package admission_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"tugboat.dev/tugboat/agent/admission"
	"tugboat.dev/tugboat/agent/ownership"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

var (
	web        = ownership.Release{Name: "web", Namespace: "apps"}
	helmAnnots = map[string]string{
		ownership.AnnotationHelmReleaseName:      "web",
		ownership.AnnotationHelmReleaseNamespace: "apps",
	}
	deploymentKind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	replicaSetKind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
	podKind        = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	secretKind     = metav1.GroupVersionKind{Version: "v1", Kind: "Secret"}
)

func TestLabelPatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string // patch; "" for none
	}{
		{
			name:   "nil labels: the whole map is added",
			labels: nil,
			want:   `[{"op":"add","path":"/metadata/labels","value":{"tugboat.dev/release":"web","tugboat.dev/release-namespace":"apps"}}]`,
		},
		{
			name:   "existing labels: each key is added, slash escaped",
			labels: map[string]string{"app": "web"},
			want:   `[{"op":"add","path":"/metadata/labels/tugboat.dev~1release","value":"web"},{"op":"add","path":"/metadata/labels/tugboat.dev~1release-namespace","value":"apps"}]`,
		},
		{
			name:   "empty labels map is a map, not nil",
			labels: map[string]string{},
			want:   `[{"op":"add","path":"/metadata/labels/tugboat.dev~1release","value":"web"},{"op":"add","path":"/metadata/labels/tugboat.dev~1release-namespace","value":"apps"}]`,
		},
		{
			name:   "a different release is replaced, a correct label kept",
			labels: map[string]string{tugboatv1alpha1.LabelRelease: "old", tugboatv1alpha1.LabelReleaseNamespace: "apps"},
			want:   `[{"op":"add","path":"/metadata/labels/tugboat.dev~1release","value":"web"}]`,
		},
		{
			name:   "already correct: no patch",
			labels: map[string]string{"app": "web", tugboatv1alpha1.LabelRelease: "web", tugboatv1alpha1.LabelReleaseNamespace: "apps"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			patch, err := admission.LabelPatch(tc.labels, web)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.want == "" {
				g.Expect(patch).To(BeNil())
				return
			}
			g.Expect(string(patch)).To(MatchJSON(tc.want))

			// The patch applies to such an object and yields the labels,
			// keeping the others.
			obj := map[string]any{"metadata": map[string]any{"name": "x"}}
			if tc.labels != nil {
				obj["metadata"].(map[string]any)["labels"] = tc.labels
			}
			doc, _ := json.Marshal(obj)
			p, err := jsonpatch.DecodePatch(patch)
			g.Expect(err).NotTo(HaveOccurred())
			out, err := p.Apply(doc)
			g.Expect(err).NotTo(HaveOccurred())
			var got struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			g.Expect(json.Unmarshal(out, &got)).To(Succeed())
			for k, v := range tc.labels {
				if k != tugboatv1alpha1.LabelRelease && k != tugboatv1alpha1.LabelReleaseNamespace {
					g.Expect(got.Metadata.Labels).To(HaveKeyWithValue(k, v))
				}
			}
			g.Expect(got.Metadata.Labels).To(HaveKeyWithValue(tugboatv1alpha1.LabelRelease, "web"))
			g.Expect(got.Metadata.Labels).To(HaveKeyWithValue(tugboatv1alpha1.LabelReleaseNamespace, "apps"))
		})
	}
}

func TestMutate_followsOwnersThroughTheIndex(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ix := ownership.NewIndex(0)
	w := &admission.Webhooks{Index: ix}

	// Helm's Deployment at CREATE: no UID yet, recorded by name.
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Annotations: helmAnnots}}
	d := w.Mutate(ctx, request(admissionv1.Create, deploymentKind, dep))
	g.Expect(d.Result).To(Equal(admission.ResultLabeled))
	g.Expect(d.Release).To(Equal(web))
	g.Expect(ix.Len()).To(Equal(1))

	// Its ReplicaSet, before the index learnt the Deployment's UID: found
	// by the owner's name.
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Name: "web-7d9f", Namespace: "apps", Labels: map[string]string{"app": "web"},
		OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", "web", "dep-uid")},
	}}
	d = w.Mutate(ctx, request(admissionv1.Create, replicaSetKind, rs))
	g.Expect(d.Result).To(Equal(admission.ResultLabeled))

	// Validating admission records the ReplicaSet's UID; its Pods (generated
	// names, no name at mutating admission) are found by the owner's UID.
	rs.UID = "rs-uid"
	rs.Labels = web.Labels()
	g.Expect(w.Observe(ctx, request(admissionv1.Create, replicaSetKind, rs)).Result).To(Equal(admission.ResultObserved))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "web-7d9f-", Namespace: "apps",
		OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "ReplicaSet", "web-7d9f", "rs-uid")},
	}}
	g.Expect(found(ix.Lookup("rs-uid"))).To(Equal(web))
	d = w.Mutate(ctx, request(admissionv1.Create, podKind, pod))
	g.Expect(d.Result).To(Equal(admission.ResultLabeled))
	g.Expect(d.Release).To(Equal(web))
	lenBefore := ix.Len()

	// An already labeled Pod needs no patch; Pods are never recorded.
	pod.Labels = web.Labels()
	d = w.Mutate(ctx, request(admissionv1.Update, podKind, pod))
	g.Expect(d.Result).To(Equal(admission.ResultSkipped))
	g.Expect(d.Patch).To(BeNil())
	g.Expect(ix.Len()).To(Equal(lenBefore))

	// An untracked object is left alone, and a stale namesake forgotten.
	ix.Record("", ownership.ObjectRef{Group: "apps", Kind: "Deployment", Namespace: "apps", Name: "other"}, web)
	other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "apps"}}
	d = w.Mutate(ctx, request(admissionv1.Create, deploymentKind, other))
	g.Expect(d.Result).To(Equal(admission.ResultSkipped))
	_, ok := ix.LookupRef(ownership.ObjectRef{Group: "apps", Kind: "Deployment", Namespace: "apps", Name: "other"}, "")
	g.Expect(ok).To(BeFalse())

	// Deleting the ReplicaSet forgets it.
	rsReq := request(admissionv1.Delete, replicaSetKind, nil)
	rsReq.OldObject = raw(rs)
	g.Expect(w.Observe(ctx, rsReq).Result).To(Equal(admission.ResultObserved))
	_, ok = ix.Lookup("rs-uid")
	g.Expect(ok).To(BeFalse())
}

func TestMutate_dryRunsAndBadValuesAreHarmless(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ix := ownership.NewIndex(0)
	w := &admission.Webhooks{Index: ix}

	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Annotations: helmAnnots}}
	req := request(admissionv1.Create, deploymentKind, dep)
	req.DryRun = ptr.To(true)
	g.Expect(w.Mutate(ctx, req).Result).To(Equal(admission.ResultLabeled), "a dry run shows the labels")
	g.Expect(ix.Len()).To(BeZero(), "but is not recorded")

	dep.Annotations = map[string]string{
		ownership.AnnotationHelmReleaseName:      strings.Repeat("x", 64), // too long for a label value
		ownership.AnnotationHelmReleaseNamespace: "apps",
	}
	g.Expect(w.Mutate(ctx, request(admissionv1.Create, deploymentKind, dep)).Result).To(Equal(admission.ResultSkipped))

	for _, bad := range []string{`[]`, `{"metadata":null}`, `{"metadata":"x"}`, `{"kind":"Pod"}`, `{`} {
		req := request(admissionv1.Create, podKind, nil)
		req.Object = runtime.RawExtension{Raw: []byte(bad)}
		d := w.Mutate(ctx, req)
		g.Expect(d.Result).To(Equal(admission.ResultError), bad)
		g.Expect(d.Patch).To(BeNil())
	}
	g.Expect(w.Mutate(ctx, request(admissionv1.Delete, podKind, nil)).Result).To(Equal(admission.ResultSkipped))
}

func TestReleaseSecret_reportsHelmReleaseWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	type call struct {
		ns, name string
		op       admissionv1.Operation
	}
	var calls []call
	w := &admission.Webhooks{Index: ownership.NewIndex(0), OnReleaseSecret: func(ns, name string, op admissionv1.Operation) {
		calls = append(calls, call{ns, name, op})
	}}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v1", Namespace: "apps", Labels: map[string]string{"owner": "helm", "name": "web"}},
		Data:       map[string][]byte{"release": []byte("H4sI...")},
		Type:       "helm.sh/release.v1",
	}
	g.Expect(w.ReleaseSecret(ctx, request(admissionv1.Create, secretKind, secret)).Result).To(Equal(admission.ResultObserved))
	del := request(admissionv1.Delete, secretKind, nil)
	del.Name = secret.Name
	del.OldObject = raw(secret)
	g.Expect(w.ReleaseSecret(ctx, del).Result).To(Equal(admission.ResultObserved))
	del.OldObject = runtime.RawExtension{}
	g.Expect(w.ReleaseSecret(ctx, del).Result).To(Equal(admission.ResultObserved), "no old object: by name")

	plain := secret.DeepCopy()
	plain.Type = corev1.SecretTypeOpaque
	g.Expect(w.ReleaseSecret(ctx, request(admissionv1.Create, secretKind, plain)).Result).To(Equal(admission.ResultSkipped))
	dry := request(admissionv1.Update, secretKind, secret)
	dry.DryRun = ptr.To(true)
	g.Expect(w.ReleaseSecret(ctx, dry).Result).To(Equal(admission.ResultSkipped))

	g.Expect(calls).To(Equal([]call{
		{"apps", "sh.helm.release.v1.web.v1", admissionv1.Create},
		{"apps", "sh.helm.release.v1.web.v1", admissionv1.Delete},
		{"apps", "sh.helm.release.v1.web.v1", admissionv1.Delete},
	}))
}

func TestHandler_protocol(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	metrics, err := admission.NewMetrics(reg)
	g.Expect(err).NotTo(HaveOccurred())
	again, err := admission.NewMetrics(reg)
	g.Expect(err).NotTo(HaveOccurred(), "registering twice reuses the collectors")
	w := &admission.Webhooks{
		Index: ownership.NewIndex(0), Metrics: metrics, MaxBodyBytes: 64 << 10,
		OnReleaseSecret: func(string, string, admissionv1.Operation) { panic("callback bug") },
	}
	h := w.Handler()

	// A Helm-annotated Deployment: allowed with a JSONPatch, same UID.
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Annotations: helmAnnots}}
	code, resp := post(h, admission.PathMutateOwnership, review(request(admissionv1.Create, deploymentKind, dep)))
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(resp.APIVersion).To(Equal("admission.k8s.io/v1"))
	g.Expect(resp.Kind).To(Equal("AdmissionReview"))
	g.Expect(resp.Response.UID).To(Equal(types.UID("req-uid")))
	g.Expect(resp.Response.Allowed).To(BeTrue())
	g.Expect(*resp.Response.PatchType).To(Equal(admissionv1.PatchTypeJSONPatch))
	g.Expect(string(resp.Response.Patch)).To(ContainSubstring("/metadata/labels"))

	// A panicking callback: allowed, no patch, counted as an error.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v1", Namespace: "apps",
		Labels: map[string]string{"owner": "helm"}}, Type: "helm.sh/release.v1"}
	code, resp = post(h, admission.PathValidateReleaseSecrets, review(request(admissionv1.Create, secretKind, secret)))
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(resp.Response.Allowed).To(BeTrue())
	g.Expect(resp.Response.Patch).To(BeNil())
	g.Expect(again.Decisions("validate-release-secrets", admission.ResultError)).To(BeEquivalentTo(1))
	g.Expect(metrics.Decisions("mutate-ownership", admission.ResultLabeled)).To(BeEquivalentTo(1))

	for body, want := range map[string]int{
		`not json`: http.StatusBadRequest,
		`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}`:                      http.StatusBadRequest,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`:                                                 http.StatusBadRequest,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + strings.Repeat(" ", 64<<10) + `{}}`: http.StatusRequestEntityTooLarge,
	} {
		code, _ := post(h, admission.PathMutateOwnership, []byte(body))
		g.Expect(code).To(Equal(want), body[:min(len(body), 80)])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, admission.PathMutateOwnership, nil))
	g.Expect(rec.Code).To(Equal(http.StatusMethodNotAllowed))
	g.Expect(metrics.Decisions("mutate-ownership", admission.ResultInvalid)).To(BeEquivalentTo(4))
}

func controllerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

func raw(obj any) runtime.RawExtension {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: b}
}

func request(op admissionv1.Operation, kind metav1.GroupVersionKind, obj any) *admissionv1.AdmissionRequest {
	req := &admissionv1.AdmissionRequest{UID: "req-uid", Kind: kind, Namespace: "apps", Operation: op}
	if obj != nil {
		req.Object = raw(obj)
		if m, ok := obj.(metav1.Object); ok {
			req.Name = m.GetName()
		}
	}
	return req
}

func review(req *admissionv1.AdmissionRequest) []byte {
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		panic(err)
	}
	return b
}

func post(h http.Handler, path string, body []byte) (int, *admissionv1.AdmissionReview) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return rec.Code, nil
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		return -1, nil
	}
	return rec.Code, &out
}

// found returns the release of a lookup, or "missing".
func found(rel ownership.Release, ok bool) any {
	if !ok {
		return "missing"
	}
	return rel
}

func TestNewServer_defaultsAndCertificates(t *testing.T) {
	g := NewWithT(t)
	_, err := admission.NewServer(admission.ServerOptions{})
	g.Expect(err).To(HaveOccurred(), "Webhooks with an Index are required")

	w := &admission.Webhooks{Index: ownership.NewIndex(0)}
	s, err := admission.NewServer(admission.ServerOptions{BindAddress: "127.0.0.1:0", Webhooks: w})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Metrics).NotTo(BeNil(), "metrics default to controller-runtime's registry")
	g.Expect(s.NeedLeaderElection()).To(BeFalse())
	g.Expect(s.URL()).To(BeEmpty())
	g.Expect(s.Listen()).To(Succeed())
	g.Expect(s.Listen()).To(Succeed(), "idempotent")
	g.Expect(s.URL()).To(HavePrefix("https://127.0.0.1:"))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	g.Expect(mutateOverTLS(s, "")).To(Equal(http.StatusOK), "the generated CA verifies the serving certificate for 127.0.0.1")
	cancel()
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))

	// Certificates from a directory: the rotator's layout.
	dir := t.TempDir()
	bundle, err := admission.GenerateSelfSigned([]string{"agent.tugboat-system.svc"}, nil, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "tls.crt"), bundle.Cert, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "tls.key"), bundle.Key, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "ca.crt"), bundle.CACert, 0o600)).To(Succeed())
	s, err = admission.NewServer(admission.ServerOptions{CertDir: dir, Webhooks: w})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.CABundle()).To(Equal(bundle.CACert))
	_, err = admission.NewServer(admission.ServerOptions{CertDir: t.TempDir(), Webhooks: w})
	g.Expect(err).To(HaveOccurred(), "missing certificate files")
}

// mutateOverTLS posts a Deployment review to s's mutating webhook over TLS,
// trusting only s.CABundle() (for serverName when set), and returns the
// HTTP status.
func mutateOverTLS(s *admission.Server, serverName string) (int, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CABundle()) {
		return 0, errors.New("no CA in CABundle")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}}, Timeout: 10 * time.Second}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Annotations: helmAnnots}}
	resp, err := hc.Post(s.URL()+admission.PathMutateOwnership, "application/json", bytes.NewReader(review(request(admissionv1.Create, deploymentKind, dep))))
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// With CertsReady (a rotator filling a mounted Secret), the server listens
// at once but loads its certificate, sets CABundle and serves only once the
// files are there and CertsReady is closed.
func TestServer_waitsForRotatedCertificates(t *testing.T) {
	g := NewWithT(t)
	w := &admission.Webhooks{Index: ownership.NewIndex(0)}
	_, err := admission.NewServer(admission.ServerOptions{Webhooks: w, CertsReady: make(chan struct{})})
	g.Expect(err).To(MatchError(ContainSubstring("CertsReady needs a CertDir")))

	dir := t.TempDir() // empty: the Secret is not mounted yet
	ready := make(chan struct{})
	s, err := admission.NewServer(admission.ServerOptions{BindAddress: "127.0.0.1:0", CertDir: dir, CertsReady: ready, Webhooks: w})
	g.Expect(err).NotTo(HaveOccurred(), "nothing is loaded before CertsReady")
	g.Expect(s.CABundle()).To(BeNil())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	g.Eventually(s.Addr).WithTimeout(10 * time.Second).ShouldNot(BeNil())
	g.Consistently(s.Serving()).WithTimeout(300 * time.Millisecond).ShouldNot(BeClosed())

	bundle, err := admission.GenerateSelfSigned([]string{"localhost"}, nil, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	for name, data := range map[string][]byte{"tls.crt": bundle.Cert, "tls.key": bundle.Key, "ca.crt": bundle.CACert} {
		g.Expect(os.WriteFile(filepath.Join(dir, name), data, 0o600)).To(Succeed())
	}
	close(ready)
	g.Eventually(s.Serving()).WithTimeout(10 * time.Second).Should(BeClosed())
	g.Expect(s.CABundle()).To(Equal(bundle.CACert))

	g.Expect(mutateOverTLS(s, "localhost")).To(Equal(http.StatusOK), "the mounted certificate serves")
	cancel()
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))

	// Stopped before the certificates came: it returns cleanly.
	s, err = admission.NewServer(admission.ServerOptions{BindAddress: "127.0.0.1:0", CertDir: t.TempDir(), CertsReady: make(chan struct{}), Webhooks: w})
	g.Expect(err).NotTo(HaveOccurred())
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- s.Start(ctx2) }()
	g.Eventually(s.Addr).WithTimeout(10 * time.Second).ShouldNot(BeNil())
	cancel2()
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	g.Expect(s.Serving()).NotTo(BeClosed())
}

func TestRegistration_configurations(t *testing.T) {
	g := NewWithT(t)
	reg := admission.Registration{AgentNamespace: "tugboat-system", URL: "https://127.0.0.1:9443", CABundle: []byte("ca")}
	m := reg.Mutating()
	g.Expect(m.Name).To(Equal("tugboat-agent"))
	g.Expect(m.Webhooks).To(HaveLen(1))
	mw := m.Webhooks[0]
	g.Expect(*mw.ClientConfig.URL).To(Equal("https://127.0.0.1:9443/mutate-ownership"))
	g.Expect(*mw.FailurePolicy).To(Equal(admissionregistrationv1.Ignore))
	g.Expect(*mw.TimeoutSeconds).To(BeEquivalentTo(2))
	g.Expect(*mw.SideEffects).To(Equal(admissionregistrationv1.SideEffectClassNone))
	g.Expect(*mw.MatchPolicy).To(Equal(admissionregistrationv1.Equivalent))
	g.Expect(mw.AdmissionReviewVersions).To(Equal([]string{"v1"}))
	g.Expect(mw.NamespaceSelector.MatchExpressions).To(ConsistOf(metav1.LabelSelectorRequirement{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn,
		Values: []string{"kube-system", "kube-node-lease", "tugboat-system"},
	}))
	for _, r := range mw.Rules {
		g.Expect(r.Resources).NotTo(ContainElement("secrets"), "Secrets are never mutated")
		g.Expect(r.Operations).To(ConsistOf(admissionregistrationv1.Create, admissionregistrationv1.Update))
	}

	reg.URL = ""
	reg.Service = &admissionregistrationv1.ServiceReference{Namespace: "tugboat-system", Name: "tugboat-agent", Port: ptr.To[int32](443)}
	reg.Namespaces = []string{"apps"}
	v := reg.Validating()
	g.Expect(v.Webhooks).To(HaveLen(2))
	for _, vw := range v.Webhooks {
		g.Expect(vw.ClientConfig.URL).To(BeNil())
		g.Expect(vw.ClientConfig.Service.Name).To(Equal("tugboat-agent"))
		g.Expect(*vw.FailurePolicy).To(Equal(admissionregistrationv1.Ignore))
		g.Expect(vw.NamespaceSelector.MatchExpressions).To(HaveLen(2))
	}
	g.Expect(*v.Webhooks[0].ClientConfig.Service.Path).To(Equal(admission.PathObserveOwnership))
	g.Expect(*v.Webhooks[1].ClientConfig.Service.Path).To(Equal(admission.PathValidateReleaseSecrets))
	g.Expect(v.Webhooks[1].Rules[0].Resources).To(Equal([]string{"secrets"}))
	g.Expect(v.Webhooks[1].Rules[0].Operations).To(ConsistOf(admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete))

	reg.URL = "https://127.0.0.1:1"
	g.Expect(reg.Apply(context.Background(), nil)).To(MatchError(ContainSubstring("exactly one of URL and Service")))
}

// TestHandler_badInput is the admission endpoints' bad-input table (issue 12,
// docs/security.md): each malformed request gets its code and a body naming
// the problem, counts as invalid, and reaches no review (the release-Secret
// callback never runs).
func TestHandler_badInput(t *testing.T) {
	reviewOf := func(apiVersion, kind, request string) string {
		return `{"apiVersion":"` + apiVersion + `","kind":"` + kind + `"` + request + `}`
	}
	for _, tc := range []struct {
		name   string
		method string
		body   string
		code   int
		want   string
	}{
		{"GET", http.MethodGet, "", http.StatusMethodNotAllowed, "method not allowed"},
		{"not JSON", http.MethodPost, "not json", http.StatusBadRequest, "decoding AdmissionReview"},
		{"empty body", http.MethodPost, "", http.StatusBadRequest, "decoding AdmissionReview"},
		{"v1beta1 review", http.MethodPost, reviewOf("admission.k8s.io/v1beta1", "AdmissionReview", `,"request":{"uid":"x"}`), http.StatusBadRequest, `expected apiVersion admission.k8s.io/v1 kind AdmissionReview, got "admission.k8s.io/v1beta1"`},
		{"another kind", http.MethodPost, reviewOf("admission.k8s.io/v1", "ConversionReview", `,"request":{"uid":"x"}`), http.StatusBadRequest, `got "admission.k8s.io/v1" "ConversionReview"`},
		{"no request", http.MethodPost, reviewOf("admission.k8s.io/v1", "AdmissionReview", ""), http.StatusBadRequest, "AdmissionReview has no request"},
		{"request not an object", http.MethodPost, reviewOf("admission.k8s.io/v1", "AdmissionReview", `,"request":"x"`), http.StatusBadRequest, "decoding AdmissionReview"},
		{"over the body limit", http.MethodPost, reviewOf("admission.k8s.io/v1", "AdmissionReview", `,"request":`+strings.Repeat(" ", 64<<10)+`{}`), http.StatusRequestEntityTooLarge, "request body over 65536 bytes"},
	} {
		for _, path := range []string{admission.PathMutateOwnership, admission.PathValidateReleaseSecrets} {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				g := NewWithT(t)
				metrics, err := admission.NewMetrics(prometheus.NewRegistry())
				g.Expect(err).NotTo(HaveOccurred())
				reviewed := false
				w := &admission.Webhooks{Index: ownership.NewIndex(0), Metrics: metrics, MaxBodyBytes: 64 << 10,
					OnReleaseSecret: func(string, string, admissionv1.Operation) { reviewed = true }}
				rec := httptest.NewRecorder()
				req := httptest.NewRequest(tc.method, path, strings.NewReader(tc.body))
				req.Header.Set("Content-Type", "application/json")
				w.Handler().ServeHTTP(rec, req)
				g.Expect(rec.Code).To(Equal(tc.code))
				g.Expect(rec.Body.String()).To(ContainSubstring(tc.want))
				g.Expect(reviewed).To(BeFalse())
				if tc.method == http.MethodPost {
					webhook := strings.TrimPrefix(path, "/")
					g.Expect(metrics.Decisions(webhook, admission.ResultInvalid)).To(BeEquivalentTo(1))
				}
			})
		}
	}
}
