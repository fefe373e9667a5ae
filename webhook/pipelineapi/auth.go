package pipelineapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// Keys of the Pipeline's Secret.
const (
	// TokenKey holds the bearer token.
	TokenKey = "token"
	// HMACKey holds the request signing key (at least 16 bytes).
	HMACKey = "key"
)

// Reasons an authentication fails, for the metrics and the debug log only.
const (
	reasonUnknownPipeline = "unknown_pipeline"
	reasonNoSecretRef     = "no_secret_ref"
	reasonMissingSecret   = "missing_secret"
	reasonNoCredentials   = "no_credentials"
	reasonMalformedAuth   = "malformed_authorization"
	reasonNoToken         = "no_token_in_secret" //nolint:gosec // a metrics label, not a credential
	reasonBadToken        = "token_mismatch"
	reasonNoKey           = "no_usable_key_in_secret"
)

// authenticate checks r against the Pipeline's Secret and returns the
// Pipeline. It returns a non-empty reason when the request is not
// authenticated, and an error only when the check itself could not be made
// (the API server failed).
func (h *Handler) authenticate(ctx context.Context, r *http.Request, namespace, name string, body []byte) (*tugboatv1alpha1.Pipeline, string, error) {
	if len(validation.IsDNS1123Label(namespace)) > 0 || len(name) > 63 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return nil, reasonUnknownPipeline, nil // no such object can exist
	}
	p := &tugboatv1alpha1.Pipeline{}
	if err := h.cached.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, reasonUnknownPipeline, nil
		}
		return nil, "", err
	}
	if p.Spec.SecretRef == nil || p.Spec.SecretRef.Name == "" {
		return nil, reasonNoSecretRef, nil
	}
	secret, err := h.secrets.get(ctx, types.NamespacedName{Namespace: namespace, Name: p.Spec.SecretRef.Name})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, reasonMissingSecret, nil
		}
		return nil, "", err
	}
	if reason := h.checkCredentials(r, secret, body); reason != "" {
		return nil, reason, nil
	}
	return p, "", nil
}

// checkCredentials checks the bearer token, when an Authorization header
// is present, else the request signature.
func (h *Handler) checkCredentials(r *http.Request, secret *corev1.Secret, body []byte) string {
	if auth := r.Header.Get("Authorization"); auth != "" {
		return checkBearer(auth, secret.Data[TokenKey])
	}
	if r.Header.Get(wire.HeaderSignature) == "" && r.Header.Get(wire.HeaderTimestamp) == "" {
		return reasonNoCredentials
	}
	v, err := wire.NewVerifier(secret.Data[HMACKey], nil, wire.WithWindow(h.opts.Window), wire.WithClock(h.opts.Clock))
	if err != nil {
		return reasonNoKey
	}
	if err := v.VerifyRequest(r, body); err != nil {
		var ve *wire.VerifyError
		if errors.As(err, &ve) {
			return ve.Reason()
		}
		return "signature"
	}
	return ""
}

// checkBearer compares an Authorization header's bearer token with want in
// constant time (digests are compared, so lengths do not leak either).
// Whitespace around the stored token (a trailing newline from a file) is
// ignored.
func checkBearer(header string, want []byte) string {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return reasonMalformedAuth
	}
	want = bytes.TrimSpace(want)
	if len(want) == 0 {
		return reasonNoToken
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	exp := sha256.Sum256(want)
	if subtle.ConstantTimeCompare(got[:], exp[:]) != 1 {
		return reasonBadToken
	}
	return ""
}
