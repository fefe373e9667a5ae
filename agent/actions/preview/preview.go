package preview

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"tugboat.dev/tugboat/api/wire"
)

// SensitiveKey matches the keys of values that are never sent.
//
// "key" alone is not sensitive (a toleration's or a selector's key is
// not); keys of the forms apiKey, access_key, signing-key and the like are.
var SensitiveKey = regexp.MustCompile(`(?i)(passw(or)?d|secret|token|credential|private|auth|(api|access|signing|encryption|ssh|tls|master|license)[-_]?key)`)

// MinRedacted is the shortest sensitive value replaced inside a manifest
// diff: shorter ones ("1", "true") would blank out unrelated text. They
// are still redacted in the values diff, where they are matched by path.
const MinRedacted = 4

// Redaction markers.
const (
	Redacted        = "<redacted>"
	RedactedChanged = "<redacted: changed>"
)

// maxValuesDiff bounds the values diff, within the total.
const maxValuesDiff = 64 << 10

// Input is what Compute compares.
type Input struct {
	// Namespace is the release's namespace: the namespace of objects
	// that name none.
	Namespace string
	// LiveManifest and NewManifest are Helm manifests (YAML documents).
	LiveManifest, NewManifest string
	// LiveValues and NewValues are the values each render used, chart
	// defaults included (chartutil.CoalesceValues).
	LiveValues, NewValues map[string]any
}

// object is one parsed manifest document.
type object struct {
	apiVersion, kind, namespace, name string
	body                              map[string]any
}

func (o *object) secret() bool {
	return o.kind == "Secret" && (o.apiVersion == "v1")
}

// key identifies an object across renders: its group (not its version, so
// that moving to a new API version is a change), kind, namespace, name.
func (o *object) key() string {
	gv, _ := schema.ParseGroupVersion(o.apiVersion)
	return gv.Group + "/" + o.kind + "/" + o.namespace + "/" + o.name
}

// Compute returns the change from the live render to the new one.
func Compute(in Input) (*wire.PreviewResult, error) {
	live, err := parse(in.LiveManifest, in.Namespace)
	if err != nil {
		return nil, fmt.Errorf("parsing the live manifest: %w", err)
	}
	next, err := parse(in.NewManifest, in.Namespace)
	if err != nil {
		return nil, fmt.Errorf("parsing the new manifest: %w", err)
	}
	r := newRedactor(live, next, in.LiveValues, in.NewValues)

	var objs []wire.PreviewObject
	lines := 0
	for _, k := range unionKeys(live, next) {
		a, b := live[k], next[k]
		ref := b
		if ref == nil {
			ref = a
		}
		po := wire.PreviewObject{APIVersion: ref.apiVersion, Kind: ref.kind, Namespace: ref.namespace, Name: ref.name}
		switch {
		case a == nil:
			po.Change = wire.ChangeAdded
		case b == nil:
			po.Change = wire.ChangeRemoved
		case reflect.DeepEqual(a.body, b.body) && a.apiVersion == b.apiVersion:
			continue
		default:
			po.Change = wire.ChangeChanged
		}
		if ref.secret() || a != nil && a.secret() {
			// Never a diff, not even of the metadata: only that it changed.
			po.Secret = true
			lines++
		} else {
			d, n, err := r.diff(a, b)
			if err != nil {
				return nil, err
			}
			po.Diff, lines = d, lines+n
		}
		objs = append(objs, po)
	}
	lv, nv := r.values(in.LiveValues, in.NewValues)
	valuesDiff, n, err := unified(lv, nv, "values (live)", "values (promoted)")
	if err != nil {
		return nil, err
	}
	lines += n

	res := &wire.PreviewResult{Objects: objs, ObjectsChanged: len(objs), LinesChanged: lines, ValuesDiff: valuesDiff}
	res.Digest = digest(res)
	bound(res)
	return res, nil
}

// parse splits a manifest into objects by key. Documents without a kind
// (empty ones, comments) are skipped.
func parse(manifest, namespace string) (map[string]*object, error) {
	out := map[string]*object{}
	for _, doc := range releaseutil.SplitManifests(manifest) {
		var body map[string]any
		if err := yaml.Unmarshal([]byte(doc), &body); err != nil {
			return nil, err
		}
		kind, _ := body["kind"].(string)
		if kind == "" {
			continue
		}
		o := &object{kind: kind, body: body}
		o.apiVersion, _ = body["apiVersion"].(string)
		if md, ok := body["metadata"].(map[string]any); ok {
			o.name, _ = md["name"].(string)
			o.namespace, _ = md["namespace"].(string)
		}
		if o.namespace == "" {
			o.namespace = namespace
		}
		out[o.key()] = o
	}
	return out, nil
}

// unionKeys returns the keys of a and b, sorted by kind, namespace, name.
func unionKeys(a, b map[string]*object) []string {
	seen := map[string]*object{}
	for k, o := range a {
		seen[k] = o
	}
	for k, o := range b {
		seen[k] = o
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int {
		ox, oy := seen[x], seen[y]
		return cmp.Or(cmp.Compare(ox.kind, oy.kind), cmp.Compare(ox.namespace, oy.namespace), cmp.Compare(ox.name, oy.name), cmp.Compare(x, y))
	})
	return keys
}

// redactor knows the sensitive strings of both renders.
type redactor struct {
	// secrets are the values of every Secret's data and stringData,
	// decoded; strings are those and the sensitive values, longest first,
	// of at least MinRedacted bytes.
	secrets map[string]bool
	strs    []string
}

func newRedactor(live, next map[string]*object, lv, nv map[string]any) *redactor {
	r := &redactor{secrets: map[string]bool{}}
	for _, objs := range []map[string]*object{live, next} {
		for _, o := range objs {
			if !o.secret() {
				continue
			}
			if data, ok := o.body["data"].(map[string]any); ok {
				for _, v := range data {
					s, _ := v.(string)
					if b, err := base64.StdEncoding.DecodeString(s); err == nil {
						r.secrets[string(b)] = true
					}
					r.secrets[s] = true
				}
			}
			if data, ok := o.body["stringData"].(map[string]any); ok {
				for _, v := range data {
					if s, ok := v.(string); ok {
						r.secrets[s] = true
					}
				}
			}
		}
	}
	set := map[string]bool{}
	for s := range r.secrets {
		set[s] = true
	}
	for _, v := range []map[string]any{lv, nv} {
		collectSensitive(v, false, set)
	}
	for s := range set {
		// Multi-line values are matched line by line, as a diff shows them.
		for _, line := range strings.Split(s, "\n") {
			if line = strings.TrimSpace(line); len(line) >= MinRedacted {
				r.strs = append(r.strs, line)
			}
		}
	}
	slices.SortFunc(r.strs, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), cmp.Compare(a, b)) })
	r.strs = slices.Compact(r.strs)
	return r
}

// collectSensitive adds to set the leaf values under sensitive keys.
func collectSensitive(v any, sensitive bool, set map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			collectSensitive(x, sensitive || SensitiveKey.MatchString(k), set)
		}
	case []any:
		for _, x := range v {
			collectSensitive(x, sensitive, set)
		}
	case nil:
	default:
		if sensitive {
			set[fmt.Sprint(v)] = true
		}
	}
}

// feedsSecret reports whether leaf value v is, or is part of, a Secret's
// data.
func (r *redactor) feedsSecret(v any) bool {
	s, ok := v.(string)
	if !ok {
		s = fmt.Sprint(v)
	}
	if s == "" {
		return false
	}
	if r.secrets[s] {
		return true
	}
	if len(s) < MinRedacted {
		return false
	}
	for d := range r.secrets {
		if strings.Contains(d, s) {
			return true
		}
	}
	return false
}

// text redacts every sensitive string in s.
func (r *redactor) text(s string) string {
	for _, x := range r.strs {
		if strings.Contains(s, x) {
			s = strings.ReplaceAll(s, x, Redacted)
		}
	}
	return s
}

// missing marks a value absent on one side.
type missingT struct{}

var missing = missingT{}

// values returns the two values trees as YAML with sensitive leaves
// replaced.
func (r *redactor) values(live, next map[string]any) (string, string) {
	a, b := r.redactPair(live, next, false)
	return toYAML(a), toYAML(b)
}

func toYAML(v any) string {
	if v == missing || v == nil {
		return ""
	}
	if m, ok := v.(map[string]any); ok && len(m) == 0 {
		return ""
	}
	out, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("# cannot show the values: %v\n", err)
	}
	return string(out)
}

// redactPair walks a and b together (either may be missing) and returns
// copies with sensitive leaves replaced.
func (r *redactor) redactPair(a, b any, sensitive bool) (any, any) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if (aok || a == missing || a == nil) && (bok || b == missing || b == nil) && (aok || bok) {
		ra, rb := map[string]any{}, map[string]any{}
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			x, okx := am[k]
			y, oky := bm[k]
			if !okx {
				x = missing
			}
			if !oky {
				y = missing
			}
			x, y = r.redactPair(x, y, sensitive || SensitiveKey.MatchString(k))
			if x != missing {
				ra[k] = x
			}
			if y != missing {
				rb[k] = y
			}
		}
		if !aok && a == missing {
			return missing, rb
		}
		if !bok && b == missing {
			return ra, missing
		}
		return ra, rb
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if (aok || a == missing) && (bok || b == missing) && (aok || bok) && !sensitive {
		ra, rb := make([]any, 0, len(al)), make([]any, 0, len(bl))
		for i := range max(len(al), len(bl)) {
			var x, y any = missing, missing
			if i < len(al) {
				x = al[i]
			}
			if i < len(bl) {
				y = bl[i]
			}
			x, y = r.redactPair(x, y, false)
			if x != missing {
				ra = append(ra, x)
			}
			if y != missing {
				rb = append(rb, y)
			}
		}
		if !aok {
			return missing, rb
		}
		if !bok {
			return ra, missing
		}
		return ra, rb
	}
	if !sensitive && !r.leafSensitive(a) && !r.leafSensitive(b) {
		return r.plain(a), r.plain(b)
	}
	x, y := any(missing), any(missing)
	if a != missing {
		x = Redacted
	}
	if b != missing {
		y = Redacted
		if a != missing && !reflect.DeepEqual(a, b) {
			y = RedactedChanged
		}
	}
	return x, y
}

// leafSensitive reports whether a leaf (or a whole list or map reached as
// a leaf) holds a value that feeds a Secret.
func (r *redactor) leafSensitive(v any) bool {
	switch v := v.(type) {
	case missingT, nil:
		return false
	case map[string]any:
		for _, x := range v {
			if r.leafSensitive(x) {
				return true
			}
		}
		return false
	case []any:
		for _, x := range v {
			if r.leafSensitive(x) {
				return true
			}
		}
		return false
	default:
		return r.feedsSecret(v)
	}
}

// plain returns v with any nested sensitive leaves redacted (for a list or
// map met on one side only).
func (r *redactor) plain(v any) any {
	switch v.(type) {
	case map[string]any, []any:
		x, _ := r.redactPair(v, missing, false)
		return x
	}
	return v
}

// diff returns the unified diff of one object's manifests (either may be
// nil), redacted, and the number of lines changed.
func (r *redactor) diff(a, b *object) (string, int, error) {
	var as, bs string
	if a != nil {
		as = toYAML(a.body)
	}
	if b != nil {
		bs = toYAML(b.body)
	}
	as, bs = r.text(as), r.text(bs)
	if as == bs {
		return "# only redacted (sensitive) values changed\n", 1, nil
	}
	name := "object"
	if ref := cmp.Or(b, a); ref != nil {
		name = ref.kind + " " + ref.namespace + "/" + ref.name
	}
	return unified(as, bs, name+" (live)", name+" (promoted)")
}

// unified is the unified diff of a and b with 3 lines of context, and the
// number of lines it adds and removes.
func unified(a, b, from, to string) (string, int, error) {
	if a == b {
		return "", 0, nil
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b), FromFile: from, ToFile: to, Context: 3,
	})
	if err != nil {
		return "", 0, err
	}
	n := 0
	for i, line := range strings.Split(d, "\n") {
		if i < 2 {
			continue // the --- and +++ headers
		}
		if strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-") {
			n++
		}
	}
	return d, n, nil
}

// digest is the hex SHA-256 of the change as sent, before any cut.
func digest(res *wire.PreviewResult) string {
	b, _ := json.Marshal(struct {
		Objects    []wire.PreviewObject `json:"objects"`
		ValuesDiff string               `json:"valuesDiff"`
	}{res.Objects, res.ValuesDiff})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// bound cuts res to the wire bounds and says what it cut.
func bound(res *wire.PreviewResult) {
	var notes []string
	if len(res.Objects) > wire.MaxPreviewObjects {
		notes = append(notes, fmt.Sprintf("%d objects not listed (at most %d are)", len(res.Objects)-wire.MaxPreviewObjects, wire.MaxPreviewObjects))
		res.Objects = res.Objects[:wire.MaxPreviewObjects]
		res.Truncated = true
	}
	cutObjects := 0
	if d, cut := Cut(res.ValuesDiff, maxValuesDiff); cut {
		res.ValuesDiff, res.Truncated = d, true
		notes = append(notes, fmt.Sprintf("the values diff was cut at %d KiB", maxValuesDiff>>10))
	}
	total := len(res.ValuesDiff)
	dropped := 0
	for i := range res.Objects {
		o := &res.Objects[i]
		if d, cut := Cut(o.Diff, wire.MaxPreviewObjectDiff); cut {
			o.Diff, o.Truncated = d, true
			cutObjects++
		}
		if total+len(o.Diff) > wire.MaxPreviewTotal {
			o.Diff, o.Truncated = "", true
			dropped++
			continue
		}
		total += len(o.Diff)
	}
	if cutObjects > 0 {
		notes = append(notes, fmt.Sprintf("%d diffs cut at %d KiB", cutObjects, wire.MaxPreviewObjectDiff>>10))
	}
	if dropped > 0 {
		notes = append(notes, fmt.Sprintf("%d diffs left out to stay within %d KiB", dropped, wire.MaxPreviewTotal>>10))
	}
	if len(notes) > 0 {
		res.Truncated = true
		res.Note = "truncated: " + strings.Join(notes, "; ")
		if len(res.Note) > wire.MaxPreviewNote {
			res.Note = res.Note[:wire.MaxPreviewNote]
		}
	}
}

// Cut shortens diff to at most limit bytes, on a line boundary, with a
// last line saying how much was cut. It reports whether it cut.
func Cut(diff string, limit int) (string, bool) {
	if len(diff) <= limit {
		return diff, false
	}
	const marker = "... cut: %d more bytes\n"
	keep := limit - len(fmt.Sprintf(marker, len(diff)))
	if keep < 0 {
		keep = 0
	}
	if i := strings.LastIndexByte(diff[:keep], '\n'); i >= 0 {
		keep = i + 1
	} else {
		keep = 0
	}
	return diff[:keep] + fmt.Sprintf(marker, len(diff)-keep), true
}

// MaxEncoded bounds a preview as JSON, in bytes: well within the hub
// receiver's body limit (1 MiB by default), whatever JSON's escaping of a
// diff's characters costs ("<" takes 6 bytes).
const MaxEncoded = 512 << 10

// Fit leaves out the largest diffs of res until it encodes as JSON in at
// most limit bytes, marking what it left out and saying so in the note.
func Fit(res *wire.PreviewResult, limit int) {
	size := func() int {
		b, _ := json.Marshal(res)
		return len(b)
	}
	dropped := 0
	for size() > limit {
		largest := -1
		for i := range res.Objects {
			if res.Objects[i].Diff != "" && (largest < 0 || len(res.Objects[i].Diff) > len(res.Objects[largest].Diff)) {
				largest = i
			}
		}
		switch {
		case largest >= 0 && (res.ValuesDiff == "" || len(res.Objects[largest].Diff) >= len(res.ValuesDiff)):
			res.Objects[largest].Diff, res.Objects[largest].Truncated = "", true
		case res.ValuesDiff != "":
			res.ValuesDiff = ""
		default:
			return // nothing left to drop: the listing alone is bounded
		}
		dropped++
	}
	if dropped > 0 {
		res.Truncated = true
		note := fmt.Sprintf("%d diffs left out to keep the answer within %d KiB of JSON", dropped, limit>>10)
		if res.Note == "" {
			res.Note = "truncated: " + note
		} else {
			res.Note += "; " + note
		}
		if len(res.Note) > wire.MaxPreviewNote {
			res.Note = res.Note[:wire.MaxPreviewNote]
		}
	}
}
