package heartbeat_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"tugboat.dev/tugboat/controllers/heartbeat"
)

// TestShard_keepsEveryShardWithinItsBounds: whatever the names' length,
// each shard holds at most MaxShardSpokes spokes and encodes to at most
// MaxShardBytes; every spoke is in exactly one shard, with its time.
func TestShard_keepsEveryShardWithinItsBounds(t *testing.T) {
	g := NewWithT(t)
	at := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC).Unix()
	for _, c := range []struct {
		name string
		n    int
		key  func(i int) string
	}{
		{"short names", 50000, func(i int) string { return fmt.Sprintf("fleet/s-%d", i) }},
		{"longest names", 5000, func(i int) string {
			return fmt.Sprintf("%063d/%0253d", i, i)
		}},
	} {
		heard := map[string]int64{}
		for i := range c.n {
			heard[c.key(i)] = at - int64(i%90)
		}
		digests := heartbeat.Shard("hub-a", at, heard)
		g.Expect(len(digests)).To(BeNumerically(">", 1), c.name)
		seen := map[string]int64{}
		for i, d := range digests {
			g.Expect(d.Shard).To(Equal(i))
			g.Expect(d.Shards).To(Equal(len(digests)))
			g.Expect(len(d.Spokes)).To(BeNumerically("<=", heartbeat.MaxShardSpokes), c.name)
			raw, err := d.Encode()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(len(raw)).To(BeNumerically("<=", heartbeat.MaxShardBytes), c.name)
			back, err := heartbeat.Decode(raw)
			g.Expect(err).NotTo(HaveOccurred(), c.name)
			for k, when := range back.Heard() {
				key := k.Namespace + "/" + k.Name
				if _, twice := seen[key]; twice {
					t.Fatalf("%s: %s is in two shards", c.name, key)
				}
				seen[key] = when.Unix()
			}
		}
		g.Expect(len(seen)).To(Equal(len(heard)), c.name)
		for k, s := range heard {
			if seen[k] != s {
				t.Fatalf("%s: %s heard at %d, the digests say %d", c.name, k, s, seen[k])
			}
		}
	}
	// Nothing heard is one empty shard.
	g.Expect(heartbeat.Shard("hub-a", at, nil)).To(HaveLen(1))
}

// TestDecode_refusesWhatIsNotADigest: every check of Decode names what is
// wrong.
func TestDecode_refusesWhatIsNotADigest(t *testing.T) {
	g := NewWithT(t)
	for raw, want := range map[string]string{
		`not json`: "not a heartbeat digest",
		`{"format":"example.com/other","replica":"a","shards":1,"at":100,"spokes":{}}`:                      `format "example.com/other"`,
		`{"format":"tugboat.dev/heartbeats/v1","shards":1,"at":100,"spokes":{}}`:                            "replica is empty",
		`{"format":"tugboat.dev/heartbeats/v1","replica":"a","shards":1,"spokes":{}}`:                       "is not a time",
		`{"format":"tugboat.dev/heartbeats/v1","replica":"a","shard":1,"shards":1,"at":100}`:                "is not a shard",
		`{"format":"tugboat.dev/heartbeats/v1","replica":"a","shards":1,"at":100,"spokes":{"fleet/a":-1}}`:  "is not between",
		`{"format":"tugboat.dev/heartbeats/v1","replica":"a","shards":1,"at":100,"spokes":{"fleet/a":101}}`: "is not between",
		`{"format":"tugboat.dev/heartbeats/v1","replica":"a","shards":1,"at":100,"spokes":{"fleet":1}}`:     "not <namespace>/<name>",
		`{"format":"tugboat.dev/heartbeats/v1","replica":"a","shards":1,"at":100,"spokes":{"Fleet/a":1}}`:   "namespace",
		`{"format":"tugboat.dev/heartbeats/v1","replica":"a","shards":1,"at":100,"spokes":{"fleet/a/b":1}}`: "name",
	} {
		_, err := heartbeat.Decode([]byte(raw))
		g.Expect(err).To(MatchError(ContainSubstring(want)), raw)
	}
	d, err := heartbeat.Decode([]byte(`{"format":"tugboat.dev/heartbeats/v1","replica":"a","shards":1,"at":100,"spokes":{"fleet/edge-1":30}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Heard()).To(Equal(map[types.NamespacedName]time.Time{{Namespace: "fleet", Name: "edge-1"}: time.Unix(70, 0)}))
}

// FuzzDecode: Decode never panics, and what it accepts encodes to a digest
// it accepts again, unchanged. Seeds: testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"format":"tugboat.dev/heartbeats/v1","replica":"a","shards":1,"at":100,"spokes":{"fleet/edge-1":30}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := heartbeat.Decode(raw)
		if err != nil {
			return
		}
		again, err := d.Encode()
		if err != nil {
			t.Fatalf("encoding an accepted digest: %v", err)
		}
		back, err := heartbeat.Decode(again)
		if err != nil {
			t.Fatalf("an accepted digest, encoded again, is refused: %v", err)
		}
		if fmt.Sprint(back.Heard()) != fmt.Sprint(d.Heard()) || back.At != d.At || back.Replica != d.Replica {
			t.Fatalf("the digest changed on the way: %+v, then %+v", d, back)
		}
	})
}

// TestDefaultReplica_namesValidObjects: a replica's default name is a valid
// label value, its digests' names valid ConfigMap names, and two calls
// differ (two processes on one host never share a digest).
func TestDefaultReplica_namesValidObjects(t *testing.T) {
	g := NewWithT(t)
	a, b := heartbeat.DefaultReplica(), heartbeat.DefaultReplica()
	g.Expect(a).NotTo(Equal(b))
	g.Expect(validation.IsValidLabelValue(a)).To(BeEmpty())
	g.Expect(validation.IsDNS1123Subdomain(heartbeat.Name(a, 12))).To(BeEmpty())
}
