package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tugboat.dev/tugboat/agent/admission"
	"tugboat.dev/tugboat/agent/ownership"
)

// FuzzAdmissionReview posts arbitrary bodies to every webhook path. Each
// answer is 400 (or 413), or 200 with an allowed admission.k8s.io/v1
// AdmissionReview echoing the request UID, whose patch, if any, is a valid
// JSONPatch that applies to the request's object. Nothing panics.
func FuzzAdmissionReview(f *testing.F) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Annotations: helmAnnots}}
	pod := benchPod()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v1", Namespace: "apps",
		Labels: map[string]string{"owner": "helm"}}, Type: "helm.sh/release.v1"}
	f.Add(review(request(admissionv1.Create, deploymentKind, dep)))
	f.Add(review(request(admissionv1.Create, podKind, pod)))
	f.Add(review(request(admissionv1.Create, secretKind, secret)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"metadata":{}}}}`))
	f.Add([]byte(`{}`))

	ix := ownership.NewIndex(1000)
	ix.Record("rs-uid", ownership.ObjectRef{Group: "apps", Kind: "ReplicaSet", Namespace: "apps", Name: "web-7d9f"}, web)
	w := &admission.Webhooks{Index: ix, OnReleaseSecret: func(string, string, admissionv1.Operation) {}, MaxBodyBytes: 1 << 20}
	h := w.Handler()
	ctx := context.Background()

	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{admission.PathMutateOwnership, admission.PathObserveOwnership, admission.PathValidateReleaseSecrets} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body)))
			switch rec.Code {
			case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
				continue
			case http.StatusOK:
			default:
				t.Fatalf("%s: status %d", path, rec.Code)
			}
			var in, out admissionv1.AdmissionReview
			if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
				t.Fatalf("%s: 200 for a body that is no AdmissionReview (%v)", path, err)
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("%s: response is not JSON: %v", path, err)
			}
			if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil {
				t.Fatalf("%s: bad response envelope %s", path, rec.Body.String())
			}
			if !out.Response.Allowed {
				t.Fatalf("%s: denied: %s", path, rec.Body.String())
			}
			if out.Response.UID != in.Request.UID {
				t.Fatalf("%s: response UID %q, request UID %q", path, out.Response.UID, in.Request.UID)
			}
			if out.Response.Patch == nil {
				continue
			}
			if path != admission.PathMutateOwnership {
				t.Fatalf("%s: a validating webhook returned a patch", path)
			}
			checkPatchApplies(t, in.Request.Object.Raw, out.Response.Patch)
		}
	})
}

// checkPatchApplies applies patch to the object as kube-apiserver would
// see it (canonical JSON). Objects with a repeated top-level key, which
// kube-apiserver never sends, are not checked.
func checkPatchApplies(t *testing.T, object, patch []byte) {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("invalid JSONPatch %s: %v", patch, err)
	}
	var canonical map[string]any
	if err := json.Unmarshal(object, &canonical); err != nil || repeatedTopLevelKey(object) {
		return
	}
	doc, _ := json.Marshal(canonical)
	if _, err := p.Apply(doc); err != nil {
		t.Fatalf("patch %s does not apply to %s: %v", patch, doc, err)
	}
}

func repeatedTopLevelKey(object []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(object))
	if _, err := dec.Token(); err != nil {
		return true
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return true
		}
		key, _ := tok.(string)
		if seen[key] {
			return true
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return true
		}
	}
	return false
}
