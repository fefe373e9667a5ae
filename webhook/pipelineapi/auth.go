package pipelineapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
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
	// reasonRequestCredential: an approval authenticated with the Pipeline's
	// promotion-request credential (spec.secretRef), which cannot approve.
	// It is answered 403, not 401: the caller holds a valid credential.
	reasonRequestCredential = "request_credential_cannot_approve"
	reasonNoApprovalRef     = "no_approval_secret_ref"
	reasonMissingApproval   = "missing_approval_secret"
)

// authenticate checks r against the Pipeline's credentials and returns the
// Pipeline and, for an approval, the name of the approval credential that
// authenticated it. Promotions are authenticated by the Secret of
// spec.secretRef; approvals only by one of the credentials of
// spec.approvalSecretRef (each key a credential's name, its value the
// bearer token or HMAC key). It returns a non-empty reason when the
// request is not authenticated (reasonRequestCredential when an approval
// came with the promotion-request credential), and an error only when the
// check itself could not be made (the API server failed).
func (h *Handler) authenticate(ctx context.Context, r *http.Request, namespace, name, endpoint string, body []byte) (*tugboatv1alpha1.Pipeline, string, string, error) {
	if len(validation.IsDNS1123Label(namespace)) > 0 || len(name) > 63 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return nil, "", reasonUnknownPipeline, nil // no such object can exist
	}
	p := &tugboatv1alpha1.Pipeline{}
	if err := h.cached.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", reasonUnknownPipeline, nil
		}
		return nil, "", "", err
	}
	if endpoint == endpointSteps {
		keySecret, reason, err := h.checkStepCredential(ctx, r, p, body)
		if err != nil || reason != "" {
			return nil, "", reason, err
		}
		return p, keySecret, "", nil
	}
	if endpoint != endpointApprovals {
		reason, err := h.checkRequestCredential(ctx, r, p, body)
		if err != nil || reason != "" {
			return nil, "", reason, err
		}
		return p, "", "", nil
	}
	credential, reason, err := h.checkApprovalCredential(ctx, r, p, body)
	if err != nil {
		return nil, "", "", err
	}
	if reason == "" {
		return p, credential, "", nil
	}
	// Not an approval credential. The request credential is told apart so
	// that CI moving from the old scheme learns why.
	if again, err := h.checkRequestCredential(ctx, r, p, body); err == nil && again == "" {
		return nil, "", reasonRequestCredential, nil
	}
	return nil, "", reason, nil
}

// checkRequestCredential checks r against the Secret of spec.secretRef.
func (h *Handler) checkRequestCredential(ctx context.Context, r *http.Request, p *tugboatv1alpha1.Pipeline, body []byte) (string, error) {
	if p.Spec.SecretRef == nil || p.Spec.SecretRef.Name == "" {
		return reasonNoSecretRef, nil
	}
	secret, err := h.secrets.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.SecretRef.Name})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return reasonMissingSecret, nil
		}
		return "", err
	}
	return h.checkCredentials(r, secret, body), nil
}

// checkApprovalCredential checks r against each credential of the Secret
// of spec.approvalSecretRef, in the order of their names, and returns the
// name of the first that matches. Every credential is tried, so the time
// taken does not tell which one matched.
func (h *Handler) checkApprovalCredential(ctx context.Context, r *http.Request, p *tugboatv1alpha1.Pipeline, body []byte) (string, string, error) {
	if p.Spec.ApprovalSecretRef == nil || p.Spec.ApprovalSecretRef.Name == "" {
		return "", reasonNoApprovalRef, nil
	}
	secret, err := h.secrets.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.ApprovalSecretRef.Name})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", reasonMissingApproval, nil
		}
		return "", "", err
	}
	matched, reason := "", reasonNoCredentials
	for _, name := range slices.Sorted(maps.Keys(secret.Data)) {
		value := secret.Data[name]
		one := &corev1.Secret{Data: map[string][]byte{TokenKey: value, HMACKey: value}}
		switch got := h.checkCredentials(r, one, body); {
		case got == "" && matched == "":
			matched = name
		case (got != "" && reason == reasonNoCredentials) || got == "stale_timestamp":
			reason = got // the most telling reason, for the metrics
		}
	}
	if matched != "" {
		return matched, "", nil
	}
	return "", reason, nil
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
	if len(want) < wire.MinKeySize {
		// No token, or one too short to be a credential: refused like none.
		return reasonNoToken
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	exp := sha256.Sum256(want)
	if subtle.ConstantTimeCompare(got[:], exp[:]) != 1 {
		return reasonBadToken
	}
	return ""
}

// checkStepCredential checks a step report: first against the Pipeline's
// request credential (spec.secretRef), then against the signing key of each
// webhook step of the Pipeline named like the body's "step" (its
// webhook.secretRef: the key the hub signed that step's call with, so the
// receiver that answered 202 reports with the key it verified the call
// with). It returns the name of the step's Secret that matched, empty when
// the request credential did; the report handler checks that the Secret is
// the reported step's own. The body is only peeked at here; it is decoded
// and checked after authentication.
func (h *Handler) checkStepCredential(ctx context.Context, r *http.Request, p *tugboatv1alpha1.Pipeline, body []byte) (string, string, error) {
	reason, err := h.checkRequestCredential(ctx, r, p, body)
	if err != nil || reason == "" {
		return "", reason, err
	}
	var peek struct {
		Step string `json:"step"`
	}
	if json.Unmarshal(body, &peek) != nil || peek.Step == "" {
		return "", reason, nil
	}
	for _, name := range stepKeySecrets(p, peek.Step) {
		secret, err := h.secrets.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: name})
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return "", "", err
		}
		switch got := h.checkCredentials(r, secret, body); got {
		case "":
			return name, "", nil
		case "stale_timestamp":
			reason = got // the most telling reason, for the metrics
		}
	}
	return "", reason, nil
}

// stepKeySecrets returns the Secrets of the signing keys of p's webhook
// steps named step, in any environment, sorted and without repeats.
func stepKeySecrets(p *tugboatv1alpha1.Pipeline, step string) []string {
	var names []string
	for _, env := range p.Spec.Environments {
		if env.Steps == nil {
			continue
		}
		for _, s := range slices.Concat(env.Steps.Pre, env.Steps.Post) {
			if s.Name == step && s.Type == tugboatv1alpha1.StepWebhook && s.Webhook != nil && s.Webhook.SecretRef != nil && s.Webhook.SecretRef.Name != "" {
				names = append(names, s.Webhook.SecretRef.Name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
