package receiver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"tugboat.dev/tugboat/api/clip"
	"tugboat.dev/tugboat/api/wire"
)

// Bounds of a preview answer as the hub accepts it (wire.PreviewResult).
// An agent cuts its answer to the wire bounds; anything over them is bad
// input, never stored.
const (
	maxPreviewName    = 253
	maxPreviewKind    = 63
	maxPreviewVersion = 128
)

// checkPreview decodes the preview of an outcome strictly (no unknown
// fields) and checks its bounds and shape: at most wire.MaxPreviewObjects
// objects, each diff at most wire.MaxPreviewObjectDiff bytes, all diffs at
// most wire.MaxPreviewTotal, a change of Added, Removed or Changed, a
// Secret with no diff (its data is never sent), a 64-hex-digit digest.
// The errors name the field.
func checkPreview(raw json.RawMessage, result string) (*wire.PreviewResult, []wire.FieldError) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var p wire.PreviewResult
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, []wire.FieldError{{Field: "preview", Detail: "must be a preview object: " + clip.String(err.Error(), quoteLimit)}}
	}
	var errs []wire.FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, wire.FieldError{Field: "preview." + field, Detail: fmt.Sprintf(format, args...)})
	}
	if result != wire.ActionSucceeded {
		bad("", "only a Succeeded outcome carries a preview")
	}
	if len(p.Digest) != 64 || !isLowerHex(p.Digest) {
		bad("digest", "must be 64 lowercase hex digits")
	}
	switch p.DryRun {
	case "", wire.DryRunServer, wire.DryRunClient:
	default:
		bad("dryRun", "must be %s or %s", wire.DryRunServer, wire.DryRunClient)
	}
	if len(p.FromVersion) > maxPreviewVersion {
		bad("fromVersion", "must be at most %d bytes", maxPreviewVersion)
	}
	if p.Revision < 0 || p.Revision > 1<<31-1 {
		bad("revision", "must be between 0 and 2147483647")
	}
	if p.ObjectsChanged < len(p.Objects) || p.LinesChanged < 0 {
		bad("objectsChanged", "must count at least the objects listed, and linesChanged may not be negative")
	}
	if len(p.Note) > wire.MaxPreviewNote {
		bad("note", "must be at most %d bytes", wire.MaxPreviewNote)
	}
	if len(p.Objects) > wire.MaxPreviewObjects {
		bad("objects", "must list at most %d objects", wire.MaxPreviewObjects)
		return nil, errs
	}
	total := len(p.ValuesDiff)
	if !utf8.ValidString(p.ValuesDiff) {
		bad("valuesDiff", "must be UTF-8")
	}
	for i, o := range p.Objects {
		f := func(name string) string { return fmt.Sprintf("objects[%d].%s", i, name) }
		switch o.Change {
		case wire.ChangeAdded, wire.ChangeRemoved, wire.ChangeChanged:
		default:
			bad(f("change"), "must be %s, %s or %s", wire.ChangeAdded, wire.ChangeRemoved, wire.ChangeChanged)
		}
		if o.Kind == "" || len(o.Kind) > maxPreviewKind || o.Name == "" || len(o.Name) > maxPreviewName ||
			len(o.Namespace) > maxPreviewName || len(o.APIVersion) > maxPreviewName {
			bad(f("name"), "kind and name are required; kind at most %d bytes, apiVersion, namespace and name at most %d", maxPreviewKind, maxPreviewName)
		}
		if len(o.Diff) > wire.MaxPreviewObjectDiff {
			bad(f("diff"), "must be at most %d bytes", wire.MaxPreviewObjectDiff)
		}
		if !utf8.ValidString(o.Diff) {
			bad(f("diff"), "must be UTF-8")
		}
		if (o.Secret || o.Kind == "Secret" && o.APIVersion == "v1") && o.Diff != "" {
			bad(f("diff"), "a Secret's diff is never sent")
		}
		total += len(o.Diff)
	}
	if total > wire.MaxPreviewTotal {
		bad("objects", "the diffs must total at most %d bytes", wire.MaxPreviewTotal)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &p, nil
}
