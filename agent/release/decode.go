package release

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	rspb "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
)

const (
	// DefaultMaxEncodedBytes is the default limit on the encoded payload (the
	// base64 text under the "release" key). The API server caps a Secret or
	// ConfigMap at 1 MiB, so a real object is far below it.
	DefaultMaxEncodedBytes = 4 << 20
	// DefaultMaxDecompressedBytes is the default limit on the release JSON
	// after base64 and gzip decoding.
	DefaultMaxDecompressedBytes = 16 << 20
)

// gzipMagic starts every gzip stream (RFC 1952). Helm compresses only since
// v3.1 and decodes uncompressed payloads when the magic is absent; so do we.
var gzipMagic = []byte{0x1f, 0x8b}

// DecodeOptions bound the work and memory of decoding one object. The zero
// value uses the defaults.
type DecodeOptions struct {
	// MaxEncodedBytes limits the encoded payload. 0 means
	// DefaultMaxEncodedBytes.
	MaxEncodedBytes int
	// MaxDecompressedBytes limits the release JSON once decoded and
	// decompressed; decompression stops as soon as it is exceeded, so a gzip
	// bomb costs at most this much memory. 0 means
	// DefaultMaxDecompressedBytes.
	MaxDecompressedBytes int
}

func (o DecodeOptions) maxEncoded() int {
	if o.MaxEncodedBytes > 0 {
		return o.MaxEncodedBytes
	}
	return DefaultMaxEncodedBytes
}

func (o DecodeOptions) maxDecompressed() int {
	if o.MaxDecompressedBytes > 0 {
		return o.MaxDecompressedBytes
	}
	return DefaultMaxDecompressedBytes
}

// DecodeSecret decodes a Helm release Secret (Helm's default "secret"
// storage driver). The Secret must have type helm.sh/release.v1 and hold the
// encoded release under .data["release"]; the type is what marks Helm's
// Secrets, so the owner=helm label is not required here (IsReleaseSecret,
// for informer filters, checks both). The error, if any, is a *DecodeError.
// It never panics, whatever the Secret holds.
func DecodeSecret(s *corev1.Secret, opts DecodeOptions) (*Release, error) {
	if s == nil {
		return nil, &DecodeError{Kind: "secret", Stage: StageMissing, Err: errors.New("nil Secret")}
	}
	if s.Type != SecretType {
		return nil, &DecodeError{Kind: "secret", Namespace: s.Namespace, Name: s.Name, Stage: StageType,
			Err: fmt.Errorf("type is %q, want %q", s.Type, SecretType)}
	}
	data, ok := s.Data[DataKey]
	r, err := decodeObject("secret", s.Namespace, s.Name, data, ok, opts)
	if r != nil {
		r.StorageUID = string(s.UID)
	}
	return r, err
}

// DecodeConfigMap decodes a Helm release ConfigMap (Helm's "configmap"
// storage driver, HELM_DRIVER=configmap). The ConfigMap must carry the label
// owner=helm and hold the encoded release under .data["release"]. The error,
// if any, is a *DecodeError. It never panics, whatever the ConfigMap holds.
func DecodeConfigMap(cm *corev1.ConfigMap, opts DecodeOptions) (*Release, error) {
	if cm == nil {
		return nil, &DecodeError{Kind: "configmap", Stage: StageMissing, Err: errors.New("nil ConfigMap")}
	}
	if cm.Labels[OwnerLabel] != OwnerValue {
		return nil, &DecodeError{Kind: "configmap", Namespace: cm.Namespace, Name: cm.Name, Stage: StageType,
			Err: fmt.Errorf("label %s=%s is missing", OwnerLabel, OwnerValue)}
	}
	data, ok := cm.Data[DataKey]
	r, err := decodeObject("configmap", cm.Namespace, cm.Name, []byte(data), ok, opts)
	if r != nil {
		r.StorageUID = string(cm.UID)
	}
	return r, err
}

// decodeObject decodes the payload of one storage object and fills in what
// the object's metadata says when the release JSON does not.
func decodeObject(kind, namespace, name string, data []byte, present bool, opts DecodeOptions) (*Release, error) {
	wrap := func(se *stageError) error {
		return &DecodeError{Kind: kind, Namespace: namespace, Name: name, Stage: se.stage, Err: se.err}
	}
	if !present {
		return nil, wrap(failf(StageMissing, "no %q key in .data", DataKey))
	}
	rls, se := decodePayload(data, opts)
	if se != nil {
		return nil, wrap(se)
	}
	r, se := fromHelm(rls, namespace, name)
	if se != nil {
		return nil, wrap(se)
	}
	return r, nil
}

// decodePayload undoes Helm's encoding: base64, then gzip when the payload
// starts with the gzip magic, then JSON. It enforces both size limits.
func decodePayload(data []byte, opts DecodeOptions) (*rspb.Release, *stageError) {
	maxEnc, maxDec := opts.maxEncoded(), opts.maxDecompressed()
	if len(data) == 0 {
		return nil, failf(StageMissing, "%q is empty", DataKey)
	}
	if len(data) > maxEnc {
		return nil, failf(StageTooLarge, "encoded payload is %d bytes, over the limit of %d", len(data), maxEnc)
	}
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(data)))
	n, err := base64.StdEncoding.Decode(raw, data)
	if err != nil {
		return nil, fail(StageBase64, err)
	}
	raw = raw[:n]

	body := raw
	if bytes.HasPrefix(raw, gzipMagic) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fail(StageGzip, err)
		}
		// Read one byte past the limit to tell "exactly at" from "over".
		body, err = io.ReadAll(io.LimitReader(zr, int64(maxDec)+1))
		if err != nil {
			return nil, fail(StageGzip, err)
		}
		if len(body) > maxDec {
			return nil, failf(StageTooLarge, "decompressed payload is over the limit of %d bytes", maxDec)
		}
		// Reaching the end above verified the gzip checksum and size.
	} else if len(body) > maxDec {
		return nil, failf(StageTooLarge, "payload is %d bytes, over the limit of %d", len(body), maxDec)
	}

	var rls rspb.Release
	dec := json.NewDecoder(bytes.NewReader(body))
	// Numbers stay as written, so the values digest is exact for integers
	// beyond float64's precision.
	dec.UseNumber()
	if err := dec.Decode(&rls); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, failf(StageJSON, "no JSON value in the payload")
		}
		return nil, fail(StageJSON, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, failf(StageJSON, "unexpected data after the release object")
	}
	return &rls, nil
}
