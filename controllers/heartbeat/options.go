package heartbeat

import (
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Options configure the heartbeat digests of a hub replica.
type Options struct {
	// Interval is the time between two writes of this replica's digest
	// (each written only when a spoke was heard from since the last). 0
	// turns the digests off: the hub then writes every Spoke's lastSeen
	// at least every half heartbeat timeout, as before digests.
	Interval time.Duration
	// Namespace holds the digests: the hub's own namespace. Empty: the
	// leader election namespace, else the namespace of the Pod's
	// ServiceAccount; a hub that has none (run outside a cluster without
	// --leader-election-namespace) writes no digest.
	Namespace string
	// Replica names this replica's digests. Not a flag; empty: the host
	// name (the Pod's name) and a random suffix, so that two processes
	// never share a digest.
	Replica string
	// Expiry is how long a digest keeps a spoke it no longer hears from,
	// and how long after its last write another replica deletes the
	// digest of a replica that is gone. Not a flag; the hub keeps it above
	// twice the heartbeat timeout.
	Expiry time.Duration
}

// NewOptions returns the defaults: a write every 5 s, entries kept 10 min.
func NewOptions() Options {
	return Options{Interval: 5 * time.Second, Expiry: 10 * time.Minute}
}

// BindFlags binds the options to flags.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.Interval, "heartbeat-digest-interval", o.Interval,
		"how often each hub replica writes the digest of the spokes it heard from (ConfigMaps tugboat-heartbeats-<replica>-<shard> in the hub's namespace), "+
			"which the Spoke controller reads for readiness instead of a status write per heartbeat; 0 turns digests off (lastSeen is then written every half --spoke-heartbeat-timeout)")
	fs.StringVar(&o.Namespace, "heartbeat-namespace", o.Namespace,
		"namespace of the heartbeat digests (default: --leader-election-namespace, else the Pod's namespace; none: no digests)")
}

// Validate reports an invalid option.
func (o *Options) Validate() error {
	switch {
	case o.Interval < 0:
		return fmt.Errorf("--heartbeat-digest-interval must not be negative")
	case o.Expiry < 0:
		return fmt.Errorf("the heartbeat digest expiry must not be negative")
	}
	return nil
}

// inClusterNamespace is where a Pod finds its namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ResolveNamespace returns the digests' namespace: o.Namespace, else
// leaderElection, else the Pod's namespace, else "" (no digests).
func (o *Options) ResolveNamespace(leaderElection string) string {
	if o.Namespace != "" {
		return o.Namespace
	}
	if leaderElection != "" {
		return leaderElection
	}
	if raw, err := os.ReadFile(inClusterNamespace); err == nil {
		return strings.TrimSpace(string(raw))
	}
	return ""
}

// DefaultReplica returns a replica name: the host name, made a valid
// label value and cut to 40 characters, and 5 random ones.
func DefaultReplica() string {
	host, _ := os.Hostname()
	var b strings.Builder
	for _, c := range strings.ToLower(host) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	h := strings.Trim(b.String(), "-")
	if len(h) > 40 {
		h = strings.Trim(h[:40], "-")
	}
	if h == "" {
		h = "hub"
	}
	return h + "-" + strings.ToLower(rand.Text()[:5])
}
