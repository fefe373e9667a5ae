package heartbeat

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Format names the encoding of a digest (the "format" field); a digest of
// another format is foreign and ignored.
const Format = "tugboat.dev/heartbeats/v1"

// DataKey is the ConfigMap data key holding the encoded digest.
const DataKey = "heartbeats.json"

// LabelDigest marks a digest ConfigMap (value "true"); the hub's cache
// watches only ConfigMaps with it, in the hub's namespace.
const LabelDigest = "tugboat.dev/heartbeats"

// LabelReplica names the replica that writes a digest.
const LabelReplica = "tugboat.dev/heartbeats-replica"

// NamePrefix starts the name of every digest ConfigMap:
// tugboat-heartbeats-<replica>-<shard>.
const NamePrefix = "tugboat-heartbeats-"

// Shard bounds: a shard holds at most MaxShardSpokes spokes and
// MaxShardBytes of encoded digest, far below the API server's 1 MiB limit
// of a ConfigMap (and etcd's 1.5 MiB request limit) whatever the length of
// the names (a spoke name and namespace take at most 253 + 63 bytes).
const (
	MaxShardSpokes = 20000
	MaxShardBytes  = 512 << 10
)

// maxDigestBytes is the largest encoded digest Decode accepts.
const maxDigestBytes = 1 << 20

// Digest is one shard of what a hub replica heard: when each spoke's agent
// was last heard from, in whole seconds.
type Digest struct {
	// Format is always Format.
	Format string `json:"format"`
	// Replica is the hub replica that wrote it.
	Replica string `json:"replica"`
	// Shard is this shard's index, of Shards.
	Shard  int `json:"shard"`
	Shards int `json:"shards"`
	// At is when the replica wrote it (Unix seconds).
	At int64 `json:"at"`
	// Spokes maps "<namespace>/<name>" to how many seconds before At the
	// spoke was last heard from (an age, so the numbers stay short).
	Spokes map[string]int64 `json:"spokes"`
}

// Time returns when the digest was written.
func (d *Digest) Time() time.Time { return time.Unix(d.At, 0) }

// Heard returns the digest's spokes with the time each was heard.
func (d *Digest) Heard() map[types.NamespacedName]time.Time {
	out := make(map[types.NamespacedName]time.Time, len(d.Spokes))
	for k, age := range d.Spokes {
		ns, name, _ := strings.Cut(k, "/")
		out[types.NamespacedName{Namespace: ns, Name: name}] = time.Unix(d.At-age, 0)
	}
	return out
}

// Encode returns the digest's JSON.
func (d *Digest) Encode() ([]byte, error) { return json.Marshal(d) }

// Decode parses and checks an encoded digest. It refuses (with an error
// saying why) anything but a digest of Format whose every entry names a
// valid spoke with an age between 0 and At: a corrupt or foreign object
// is ignored as a whole, never read in part.
func Decode(data []byte) (*Digest, error) {
	if len(data) > maxDigestBytes {
		return nil, fmt.Errorf("digest of %d bytes is larger than %d", len(data), maxDigestBytes)
	}
	var d Digest
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("not a heartbeat digest: %w", err)
	}
	switch {
	case d.Format != Format:
		return nil, fmt.Errorf("format %q is not %q", d.Format, Format)
	case d.Replica == "":
		return nil, errors.New("replica is empty")
	case d.At <= 0:
		return nil, fmt.Errorf("at %d is not a time", d.At)
	case d.Shards < 1 || d.Shard < 0 || d.Shard >= d.Shards:
		return nil, fmt.Errorf("shard %d of %d is not a shard", d.Shard, d.Shards)
	}
	for k, age := range d.Spokes {
		if err := checkKey(k); err != nil {
			return nil, fmt.Errorf("spoke %q: %w", k, err)
		}
		if age < 0 || age > d.At {
			return nil, fmt.Errorf("spoke %q: age %d is not between 0 and %d", k, age, d.At)
		}
	}
	return &d, nil
}

// checkKey checks that k is "<namespace>/<name>" with a valid namespace
// (DNS label) and Spoke name (DNS subdomain).
func checkKey(k string) error {
	ns, name, ok := strings.Cut(k, "/")
	if !ok {
		return errors.New("not <namespace>/<name>")
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("namespace: %s", strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("name: %s", strings.Join(errs, "; "))
	}
	return nil
}

// key is a digest's key of a spoke.
func key(n types.NamespacedName) string { return n.Namespace + "/" + n.Name }

// Shard splits what a replica heard (key → Unix seconds) into digests
// written at at, in key order, each within MaxShardSpokes and
// MaxShardBytes. It returns at least one digest (an empty one when nothing
// was heard), so a replica that heard nothing still writes one shard.
func Shard(replica string, at int64, heard map[string]int64) []*Digest {
	keys := make([]string, 0, len(heard))
	for k := range heard {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// The fixed part of a digest, with a replica name and numbers at
	// their longest, and what each entry adds: the quoted key, a colon, an
	// age (at most 20 digits) and a comma.
	overhead := len(`{"format":"","replica":"","shard":,"shards":,"at":,"spokes":{}}`) + len(Format) + len(replica) + 3*20
	var out []*Digest
	cur := &Digest{Spokes: map[string]int64{}}
	size := overhead
	for _, k := range keys {
		entry := len(k) + 2 + 1 + 20 + 1
		if len(cur.Spokes) > 0 && (len(cur.Spokes) >= MaxShardSpokes || size+entry > MaxShardBytes) {
			out = append(out, cur)
			cur, size = &Digest{Spokes: map[string]int64{}}, overhead
		}
		age := at - heard[k]
		if age < 0 {
			age = 0
		}
		cur.Spokes[k] = age
		size += entry
	}
	out = append(out, cur)
	for i, d := range out {
		d.Format, d.Replica, d.At, d.Shard, d.Shards = Format, replica, at, i, len(out)
	}
	return out
}
