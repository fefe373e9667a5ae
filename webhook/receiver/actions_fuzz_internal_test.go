package receiver

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"tugboat.dev/tugboat/api/wire"
)

// FuzzDecodeActionOutcome feeds arbitrary bodies to the decoder of action
// outcomes (previews included). It never panics; every error matches
// wire.ErrInvalid; an accepted outcome is within the preview bounds, never
// carries a Secret's diff, and encodes and decodes again to itself. Seeds:
// testdata/fuzz/FuzzDecodeActionOutcome.
func FuzzDecodeActionOutcome(f *testing.F) {
	f.Add([]byte(`{"id":"0123456789abcdef0123456789abcdef","result":"Succeeded","time":"2026-11-28T09:00:00Z"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := decodeActionOutcome(body)
		if err != nil {
			if !errors.Is(err, wire.ErrInvalid) {
				t.Fatalf("error %v does not match wire.ErrInvalid", err)
			}
			if o != nil {
				t.Fatal("an outcome with an error")
			}
			return
		}
		if p := o.Preview; p != nil {
			if o.Result != wire.ActionSucceeded {
				t.Fatalf("a %s outcome with a preview", o.Result)
			}
			if len(p.Objects) > wire.MaxPreviewObjects {
				t.Fatalf("%d objects", len(p.Objects))
			}
			total := len(p.ValuesDiff)
			for _, obj := range p.Objects {
				if len(obj.Diff) > wire.MaxPreviewObjectDiff {
					t.Fatalf("a diff of %d bytes", len(obj.Diff))
				}
				if (obj.Secret || obj.Kind == "Secret" && obj.APIVersion == "v1") && obj.Diff != "" {
					t.Fatal("a Secret's diff was accepted")
				}
				total += len(obj.Diff)
			}
			if total > wire.MaxPreviewTotal {
				t.Fatalf("diffs of %d bytes", total)
			}
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		again, err := decodeActionOutcome(b)
		if err != nil {
			t.Fatalf("the re-encoded outcome %s is refused: %v", b, err)
		}
		if again.Time.Equal(o.Time) {
			again.Time = o.Time
		}
		if !reflect.DeepEqual(again, o) {
			t.Fatalf("round trip changed the outcome: %+v != %+v", again, o)
		}
	})
}
