package admission

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"

	"tugboat.dev/tugboat/agent/ownership"
)

// Paths the webhooks are served on.
const (
	// PathMutateOwnership serves the labeling mutating webhook.
	PathMutateOwnership = "/mutate-ownership"
	// PathObserveOwnership serves the validating webhook that records UIDs
	// of tracked objects.
	PathObserveOwnership = "/observe-ownership"
	// PathValidateReleaseSecrets serves the validating webhook that reports
	// Helm release Secret writes.
	PathValidateReleaseSecrets = "/validate-release-secrets" //nolint:gosec // G101: a URL path, not a credential
)

// Helm's release storage: Secrets of this type, labeled owner=helm.
//
//nolint:gosec // G101: a Secret type and a name prefix, not credentials.
const (
	helmReleaseSecretType = "helm.sh/release.v1"
	helmOwnerLabel        = "owner"
	helmOwnerValue        = "helm"
	helmSecretNamePrefix  = "sh.helm.release.v1."
)

// Result classifies an admission decision, as the "result" label of the
// decisions metric.
type Result string

const (
	// ResultLabeled means the response carries a label patch.
	ResultLabeled Result = "labeled"
	// ResultSkipped means nothing was to be done: not tracked, already
	// labeled, a dry run, an operation the webhook ignores.
	ResultSkipped Result = "skipped"
	// ResultObserved means a validating webhook recorded or reported the
	// object.
	ResultObserved Result = "observed"
	// ResultError means the decision failed; the request was allowed
	// unchanged.
	ResultError Result = "error"
	// ResultInvalid means the HTTP request was not an AdmissionReview and
	// got 400 (or 413).
	ResultInvalid Result = "invalid"
)

// Decision is the outcome of one admission review. Whatever it says, the
// request is allowed.
type Decision struct {
	// Result classifies the decision.
	Result Result
	// Release is the release the object belongs to, if known.
	Release ownership.Release
	// Patch is a JSONPatch to return, nil for none.
	Patch []byte
	// Err is why the decision failed (Result is then ResultError).
	Err error
}

// ReleaseSecretFunc is told of every write of a Helm release Secret: its
// namespace, its name (sh.helm.release.v1.<release>.v<revision>) and the
// operation. It runs inside the admission request, so it must return
// quickly (hand off to a queue); a panic in it is recovered.
type ReleaseSecretFunc func(namespace, name string, op admissionv1.Operation)

// Webhooks holds what the agent's webhooks need. The zero value of every
// field but Index is usable.
type Webhooks struct {
	// Index is read and fed by the ownership webhooks. Required.
	Index *ownership.Index
	// Fallback, when set, resolves an owner the index does not know with a
	// bounded API read.
	Fallback *ownership.Fallback
	// OnReleaseSecret, when set, is called for Helm release Secret writes.
	OnReleaseSecret ReleaseSecretFunc
	// Metrics, when set, counts decisions and their latency.
	Metrics *Metrics
	// Log receives failed decisions.
	Log logr.Logger
	// MaxBodyBytes bounds a request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
}

// Handler returns the webhooks' HTTP handler, routing by path.
func (w *Webhooks) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(PathMutateOwnership, w.serve(webhookName(PathMutateOwnership), w.Mutate))
	mux.Handle(PathObserveOwnership, w.serve(webhookName(PathObserveOwnership), w.Observe))
	mux.Handle(PathValidateReleaseSecrets, w.serve(webhookName(PathValidateReleaseSecrets), w.ReleaseSecret))
	return mux
}

func webhookName(path string) string { return strings.TrimPrefix(path, "/") }

var errNoIndex = errors.New("webhook has no ownership index")

// Mutate is the decision of the mutating webhook: for CREATE and UPDATE of
// an object that names its release through Helm's annotations, or whose
// owner the index (or Fallback) knows, a patch setting the tracking labels
// where they are missing or differ. It records the object in the index: by
// name at CREATE (the UID is not assigned yet), by UID and name at UPDATE;
// Pods, which own nothing, and dry runs are not recorded.
func (w *Webhooks) Mutate(ctx context.Context, req *admissionv1.AdmissionRequest) Decision {
	if (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) || req.SubResource != "" {
		return Decision{Result: ResultSkipped}
	}
	if w.Index == nil {
		return failed(errNoIndex)
	}
	obj, err := decodeObject(req.Object.Raw, false)
	if err != nil {
		return failed(err)
	}
	m := &obj.Meta
	ref := ownership.ObjectRef{Group: req.Kind.Group, Kind: req.Kind.Kind, Namespace: m.Namespace, Name: m.Name}
	if ref.Namespace == "" {
		ref.Namespace = req.Namespace
	}
	if ref.Name == "" {
		ref.Name = req.Name
	}
	isPod := ref.Group == "" && ref.Kind == "Pod"
	record := !isDryRun(req) && !isPod

	rel, ok := ownership.ReleaseFrom(m.Labels, m.Annotations)
	if !ok && len(m.OwnerReferences) > 0 {
		rel, ok = w.Index.Owner(ref.Namespace, m.OwnerReferences)
		if !ok && w.Fallback != nil {
			rel, ok = w.Fallback.Resolve(ctx, ref.Namespace, m.OwnerReferences)
		}
	}
	if !ok {
		if record {
			// Whatever the index held under this name or UID was another
			// object (or this one, no longer tracked).
			if m.UID != "" {
				w.Index.Forget(m.UID)
			}
			if ref.Name != "" {
				w.Index.ForgetRef(ref)
			}
		}
		return Decision{Result: ResultSkipped}
	}
	if record {
		w.Index.Record(m.UID, ref, rel)
	}
	patch, err := LabelPatch(m.Labels, rel)
	if err != nil {
		return failed(err)
	}
	if patch == nil {
		return Decision{Result: ResultSkipped, Release: rel}
	}
	return Decision{Result: ResultLabeled, Release: rel, Patch: patch}
}

// Observe is the decision of the validating ownership webhook: at CREATE
// (and UPDATE) it records the tracked object's UID, which validating
// admission sees and mutating admission does not; at DELETE it forgets it.
// Dry runs are ignored.
func (w *Webhooks) Observe(_ context.Context, req *admissionv1.AdmissionRequest) Decision {
	if w.Index == nil {
		return failed(errNoIndex)
	}
	if isDryRun(req) || req.SubResource != "" {
		return Decision{Result: ResultSkipped}
	}
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update:
		obj, err := decodeObject(req.Object.Raw, false)
		if err != nil {
			return failed(err)
		}
		m := &obj.Meta
		rel, ok := ownership.ReleaseFrom(m.Labels, m.Annotations)
		if !ok {
			w.Index.Forget(m.UID)
			return Decision{Result: ResultSkipped}
		}
		if m.UID == "" {
			return Decision{Result: ResultSkipped, Release: rel}
		}
		ns := m.Namespace
		if ns == "" {
			ns = req.Namespace
		}
		w.Index.Record(m.UID, ownership.ObjectRef{Group: req.Kind.Group, Kind: req.Kind.Kind, Namespace: ns, Name: m.Name}, rel)
		return Decision{Result: ResultObserved, Release: rel}
	case admissionv1.Delete:
		obj, err := decodeObject(req.OldObject.Raw, false)
		if errors.Is(err, errNoObject) {
			return Decision{Result: ResultSkipped}
		}
		if err != nil {
			return failed(err)
		}
		w.Index.Forget(obj.Meta.UID)
		return Decision{Result: ResultObserved}
	}
	return Decision{Result: ResultSkipped}
}

// ReleaseSecret is the decision of the validating webhook on Secrets: a
// write (CREATE, UPDATE, DELETE) of a Helm release Secret is reported to
// OnReleaseSecret. Dry runs and other Secrets are ignored.
func (w *Webhooks) ReleaseSecret(_ context.Context, req *admissionv1.AdmissionRequest) Decision {
	if isDryRun(req) || req.SubResource != "" || w.OnReleaseSecret == nil {
		return Decision{Result: ResultSkipped}
	}
	raw := req.Object.Raw
	if req.Operation == admissionv1.Delete {
		raw = req.OldObject.Raw
	}
	obj, err := decodeObject(raw, true)
	switch {
	case errors.Is(err, errNoObject) && req.Operation == admissionv1.Delete:
		// No old object: go by Helm's naming scheme alone.
		if !strings.HasPrefix(req.Name, helmSecretNamePrefix) {
			return Decision{Result: ResultSkipped}
		}
	case err != nil:
		return failed(err)
	case obj.Type != helmReleaseSecretType || obj.Meta.Labels[helmOwnerLabel] != helmOwnerValue:
		return Decision{Result: ResultSkipped}
	}
	ns, name := obj.Meta.Namespace, obj.Meta.Name
	if ns == "" {
		ns = req.Namespace
	}
	if name == "" {
		name = req.Name
	}
	w.OnReleaseSecret(ns, name, req.Operation)
	return Decision{Result: ResultObserved}
}

func isDryRun(req *admissionv1.AdmissionRequest) bool {
	return req.DryRun != nil && *req.DryRun
}

func failed(err error) Decision { return Decision{Result: ResultError, Err: err} }
