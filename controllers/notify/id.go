package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// ID identifies a notice: the same for every delivery of it (and for
// every notifier), different for another event. It hashes the event, the
// summary flag, the pipeline, the subject (promotion, hold or deployment
// revision) and the event's time.
func ID(n Notice) string {
	parts := []string{string(n.Event), strconv.FormatBool(n.Summary), n.Namespace, n.Pipeline}
	if p := n.Promotion; p != nil {
		parts = append(parts, "promotion", p.Name)
	}
	if h := n.Hold; h != nil {
		parts = append(parts, "hold", h.Environment, h.Version, strconv.FormatInt(h.Since.UnixNano(), 10))
	}
	if d := n.Deployment; d != nil {
		parts = append(parts, "deployment", d.Spoke, d.Namespace, d.Release, strconv.Itoa(int(d.Revision)))
	}
	parts = append(parts, strconv.FormatInt(n.Time.UnixNano(), 10))
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:16])
}
