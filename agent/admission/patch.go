package admission

import (
	"encoding/json"
	"strings"

	"tugboat.dev/tugboat/agent/ownership"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// LabelPatch returns a JSONPatch that gives an object with the given
// metadata.labels the tracking labels of rel, or nil when it has them
// already. A nil labels map (absent or null in the object) is added whole;
// otherwise each missing or different label is added on its own ("add"
// replaces an existing member), leaving every other label alone.
func LabelPatch(labels map[string]string, rel ownership.Release) ([]byte, error) {
	if ownership.HasLabels(labels, rel) {
		return nil, nil
	}
	if labels == nil {
		return json.Marshal([]jsonPatchOp{{Op: "add", Path: "/metadata/labels", Value: rel.Labels()}})
	}
	ops := make([]jsonPatchOp, 0, 2)
	for _, l := range [...]struct{ key, value string }{
		{tugboatv1alpha1.LabelRelease, rel.Name},
		{tugboatv1alpha1.LabelReleaseNamespace, rel.Namespace},
	} {
		if v, ok := labels[l.key]; !ok || v != l.value {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/labels/" + escapePointer(l.key), Value: l.value})
		}
	}
	return json.Marshal(ops)
}

// pointerEscaper escapes a JSON Pointer reference token (RFC 6901): "~" as
// "~0" first, then "/" as "~1".
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapePointer(token string) string { return pointerEscaper.Replace(token) }
