package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"tugboat.dev/tugboat/api/clip"
)

// DecodeEventBatch reads one EventBatch from r, strictly, and validates it.
// It reads at most limit bytes (DefaultEventBatchLimit when limit <= 0) and
// fails with ErrTooLarge past that. The body must be exactly one JSON object
// with no unknown fields and nothing after it. Errors for bad bodies match
// ErrInvalid and name the field when there is one. It never panics.
func DecodeEventBatch(r io.Reader, limit int64) (*EventBatch, error) {
	if limit <= 0 {
		limit = DefaultEventBatchLimit
	}
	var b EventBatch
	if err := decodeStrict(r, limit, &b); err != nil {
		return nil, err
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return &b, nil
}

// DecodeStateSnapshot reads one StateSnapshot from r, strictly, and validates
// it, with the same rules as DecodeEventBatch (DefaultStateSnapshotLimit when
// limit <= 0).
func DecodeStateSnapshot(r io.Reader, limit int64) (*StateSnapshot, error) {
	if limit <= 0 {
		limit = DefaultStateSnapshotLimit
	}
	var s StateSnapshot
	if err := decodeStrict(r, limit, &s); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// decodeStrict reads at most limit bytes from r and decodes exactly one JSON
// object into v (a pointer to a struct), rejecting unknown fields and
// trailing data.
func decodeStrict(r io.Reader, limit int64, v any) error {
	if r == nil {
		return invalid("", "body required")
	}
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, mbe.Limit)
		}
		return fmt.Errorf("wire: reading body: %w", err)
	}
	if int64(len(body)) > limit {
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(trimmed) == 0:
		return invalid("", "body required: a JSON object")
	case trimmed[0] != '{':
		return invalid("", "body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return explain(err, body, reflect.TypeOf(v).Elem())
	}
	if off := dec.InputOffset(); len(bytes.TrimLeft(body[off:], " \t\r\n")) != 0 {
		return invalid("", fmt.Sprintf("unexpected data after the JSON object, at offset %d", off))
	}
	return nil
}

// explain turns a json decoding error into an *InvalidError that names the
// field where it can. encoding/json reports unknown fields and bad times
// without a path, and type errors without list indices, so on those paths the
// body (already known to be syntactically valid) is walked again, generically,
// against the target type to find the first offending field.
func explain(err error, body []byte, t reflect.Type) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return invalid("", fmt.Sprintf("malformed JSON at offset %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: ")))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return invalid("", "malformed JSON: unexpected end of input")
	}
	var generic any
	if json.Unmarshal(body, &generic) == nil {
		if fe, found := firstMismatch(generic, t, ""); found {
			return &InvalidError{Errors: []FieldError{fe}}
		}
	}
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		return invalid(ute.Field, "must be "+describe(ute.Type))
	}
	return invalid("", strings.TrimPrefix(err.Error(), "json: "))
}

var timeType = reflect.TypeFor[time.Time]()

// firstMismatch walks a generically decoded JSON value v alongside the Go
// type t and returns the first value that does not fit, with its path.
func firstMismatch(v any, t reflect.Type, path string) (FieldError, bool) {
	for t.Kind() == reflect.Pointer {
		if v == nil {
			return FieldError{}, false
		}
		t = t.Elem()
	}
	if v == nil {
		return FieldError{}, false // null leaves the zero value; Validate judges it
	}
	bad := func() (FieldError, bool) {
		return FieldError{Field: path, Detail: "must be " + describe(t)}, true
	}
	if t == timeType {
		s, ok := v.(string)
		if !ok {
			return bad()
		}
		var tt time.Time
		if err := tt.UnmarshalText([]byte(s)); err != nil {
			return FieldError{Field: path, Detail: fmt.Sprintf("invalid time %q: must be RFC 3339", clip.String(s, quoteLimit))}, true
		}
		return FieldError{}, false
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		fields := jsonFields(t)
		keys := slices.Sorted(maps.Keys(obj))
		// Report unknown fields first.
		for _, k := range keys {
			if _, ok := lookupField(fields, k); !ok {
				return FieldError{Field: join(path, clip.String(k, quoteLimit)), Detail: "unknown field"}, true
			}
		}
		for _, f := range fields {
			for _, k := range keys {
				if k == f.name || strings.EqualFold(k, f.name) {
					if fe, found := firstMismatch(obj[k], f.typ, join(path, f.name)); found {
						return fe, true
					}
				}
			}
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			return bad()
		}
		for i, ev := range arr {
			if fe, found := firstMismatch(ev, t.Elem(), path+"["+strconv.Itoa(i)+"]"); found {
				return fe, true
			}
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return bad()
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return bad()
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		f, ok := v.(float64)
		if !ok || f != math.Trunc(f) {
			return bad()
		}
		// float64 cannot hold every int64 exactly; anything past ±2^63 is
		// certainly out of range.
		if f >= math.MaxInt64 || f < math.MinInt64 || (t.Kind() == reflect.Int32 && (f > math.MaxInt32 || f < math.MinInt32)) {
			return FieldError{Field: path, Detail: "number out of range"}, true
		}
	}
	return FieldError{}, false
}

type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields lists t's fields by JSON name, in declaration order. The wire
// types embed nothing, so there is no promotion to handle.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out = append(out, jsonField{name: name, typ: sf.Type})
	}
	return out
}

// lookupField matches a JSON key as encoding/json does: exactly, else
// case-insensitively.
func lookupField(fields []jsonField, key string) (jsonField, bool) {
	for _, f := range fields {
		if f.name == key {
			return f, true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return jsonField{}, false
}

// describe names the JSON shape a Go type expects.
func describe(t reflect.Type) string {
	if t == nil {
		return "a valid value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType {
		return "an RFC 3339 time string"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a valid " + t.Kind().String()
}
