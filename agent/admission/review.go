package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"
)

// DefaultMaxBodyBytes bounds a request body: kube-apiserver's objects are at
// most about 1.5 MiB, an AdmissionReview of an UPDATE holds two.
const DefaultMaxBodyBytes = 4 << 20

// reviewFunc decides one admission request. It must not deny.
type reviewFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) Decision

var reviewTypeMeta = metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"}

// serve wraps a reviewFunc in the HTTP protocol of admission webhooks:
// decode the AdmissionReview defensively, decide (recovering from panics),
// answer allowed with the request's UID, and count.
func (w *Webhooks) serve(webhook string, review reviewFunc) http.Handler {
	maxBody := w.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if r.Method != http.MethodPost {
			rw.Header().Set("Allow", http.MethodPost)
			http.Error(rw, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxBody))
		if err != nil {
			w.Metrics.observe(webhook, ResultInvalid, time.Since(start))
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(rw, fmt.Sprintf("request body over %d bytes", maxBody), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(rw, "reading request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		req, err := decodeReview(body)
		if err != nil {
			w.Metrics.observe(webhook, ResultInvalid, time.Since(start))
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		d := w.decide(r.Context(), webhook, review, req)
		out, err := encodeResponse(req.UID, d)
		if err != nil { // unreachable: a byte slice and strings always encode
			d.Result = ResultError
			out, _ = encodeResponse(req.UID, Decision{})
		}
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write(out)
		w.Metrics.observe(webhook, d.Result, time.Since(start))
	})
}

// decide runs review and turns a panic or an error into an allowed
// decision without a patch.
func (w *Webhooks) decide(ctx context.Context, webhook string, review reviewFunc, req *admissionv1.AdmissionRequest) (d Decision) {
	defer func() {
		if p := recover(); p != nil {
			d = Decision{Result: ResultError, Err: fmt.Errorf("panic: %v", p)}
		}
		if d.Err != nil {
			d.Result, d.Patch = ResultError, nil
			w.Log.Error(d.Err, "admission review failed; allowing unchanged", "webhook", webhook,
				"kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "operation", req.Operation)
		}
	}()
	return review(ctx, req)
}

// decodeReview accepts exactly an admission.k8s.io/v1 AdmissionReview with
// a request.
func decodeReview(body []byte) (*admissionv1.AdmissionRequest, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("decoding AdmissionReview: %w", err)
	}
	if review.TypeMeta != reviewTypeMeta {
		return nil, fmt.Errorf("expected apiVersion %s kind %s, got %q %q",
			reviewTypeMeta.APIVersion, reviewTypeMeta.Kind, review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return nil, errors.New("AdmissionReview has no request")
	}
	return review.Request, nil
}

// encodeResponse answers allowed, whatever d says, with d's patch if any.
func encodeResponse(uid types.UID, d Decision) ([]byte, error) {
	resp := &admissionv1.AdmissionResponse{UID: uid, Allowed: true}
	if len(d.Patch) > 0 {
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = d.Patch, &pt
	}
	return json.Marshal(admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta, Response: resp})
}

// objectMeta is the part of an object's metadata the webhooks read.
type objectMeta struct {
	Name            string                  `json:"name"`
	Namespace       string                  `json:"namespace"`
	UID             types.UID               `json:"uid"`
	Labels          map[string]string       `json:"labels"`
	Annotations     map[string]string       `json:"annotations"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
}

// object is what decodeObject extracts from an object's JSON.
type object struct {
	Meta objectMeta
	// Type is the top-level "type" field (Secrets), read when asked for.
	Type string
}

var errNoObject = errors.New("request carries no object")

// decodeObject reads metadata (and, with wantType, the "type" field) of an
// object, skipping the rest. It decodes as kube-apiserver does
// (sigs.k8s.io/json: keys match case-sensitively, the last of repeated keys
// wins), so the labels it sees are the labels a patch applies to. A missing
// or non-object metadata is an error, so that a patch under /metadata always
// has a parent.
func decodeObject(raw []byte, wantType bool) (object, error) {
	if len(raw) == 0 {
		return object{}, errNoObject
	}
	var (
		meta *objectMeta
		typ  string
		err  error
	)
	if wantType {
		var v struct {
			Metadata *objectMeta `json:"metadata"`
			Type     string      `json:"type"`
		}
		err = sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &v)
		meta, typ = v.Metadata, v.Type
	} else {
		var v struct {
			Metadata *objectMeta `json:"metadata"`
		}
		err = sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &v)
		meta = v.Metadata
	}
	if err != nil {
		return object{}, fmt.Errorf("decoding object: %w", err)
	}
	if meta == nil {
		return object{}, errors.New("object has no metadata")
	}
	return object{Meta: *meta, Type: typ}, nil
}
