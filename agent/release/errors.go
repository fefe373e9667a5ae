package release

import (
	"fmt"
	"strings"
)

// Stage says which step of decoding a storage object failed.
type Stage string

// The stages of decoding, in the order they run (StageType and StageMissing
// are checks on the object itself).
const (
	// StageType: the object is not Helm release storage (a Secret whose type
	// is not helm.sh/release.v1, a ConfigMap without the owner=helm label).
	StageType Stage = "type"
	// StageMissing: the object, its "release" key or an essential field of
	// the decoded release (name, revision, chart metadata) is absent.
	StageMissing Stage = "missing"
	// StageTooLarge: the encoded or the decompressed payload is over its
	// limit (see DecodeOptions).
	StageTooLarge Stage = "too-large"
	// StageBase64: the payload is not standard base64.
	StageBase64 Stage = "base64"
	// StageGzip: the payload starts with the gzip magic bytes but is not a
	// valid gzip stream.
	StageGzip Stage = "gzip"
	// StageJSON: the (decompressed) payload is not the JSON of a Helm
	// release.
	StageJSON Stage = "json"
)

// DecodeError is why a storage object could not be decoded. Its message names
// the object and the stage, e.g.
// "secret apps/sh.helm.release.v1.web.v7: gzip: unexpected EOF".
type DecodeError struct {
	// Kind is "secret" or "configmap".
	Kind string
	// Namespace of the object.
	Namespace string
	// Name of the object.
	Name string
	// Stage is the step that failed.
	Stage Stage
	// Err is the underlying error.
	Err error
}

// Error returns "<kind> <namespace>/<name>: <stage>: <cause>".
func (e *DecodeError) Error() string {
	cause := "<nil>"
	if e.Err != nil {
		// compress/gzip and encoding/json prefix their errors with their
		// name, which would repeat the stage ("gzip: gzip: invalid checksum").
		cause = strings.TrimPrefix(e.Err.Error(), string(e.Stage)+": ")
	}
	return fmt.Sprintf("%s %s/%s: %s: %s", e.Kind, e.Namespace, e.Name, e.Stage, cause)
}

// Unwrap returns the underlying error.
func (e *DecodeError) Unwrap() error { return e.Err }

// stageError is an error from a step that does not know which object it is
// decoding; decodeObject wraps it into a *DecodeError.
type stageError struct {
	stage Stage
	err   error
}

func failf(stage Stage, format string, args ...any) *stageError {
	return &stageError{stage: stage, err: fmt.Errorf(format, args...)}
}

func fail(stage Stage, err error) *stageError {
	return &stageError{stage: stage, err: err}
}
