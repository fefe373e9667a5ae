package releasehistory

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Options bound what a ReleaseHistory keeps and how often it is written.
type Options struct {
	// RevisionLimit is how many revisions each ReleaseHistory keeps.
	RevisionLimit int
	// EventLimit is how many (compacted) events each revision keeps.
	EventLimit int
	// WriteInterval is the least time between two writes of one
	// ReleaseHistory; updates arriving meanwhile are coalesced.
	WriteInterval time.Duration
	// KeyCacheTTL is the longest the hub trusts the spoke keys it read
	// (and the Spoke controller a key Secret it checked). Keys are read
	// again at once when the Spoke's tugboat.dev/keys-updated-at annotation
	// changes, which whoever writes keys sets, and when a request fails to
	// verify (webhook/receiver/spokedir): the TTL bounds only hand edits of
	// the Secret that set no annotation.
	KeyCacheTTL time.Duration
	// MaxStatusBytes caps the serialized status; the oldest events are
	// dropped first to stay below it.
	MaxStatusBytes int
	// Workers is the number of concurrent writers.
	Workers int
	// APITimeout bounds each write of a ReleaseHistory (its read, create
	// and status update together), each heartbeat and each key read; a call
	// that runs out of it marks the recorder stalled (/readyz fails) until
	// one succeeds. The hub also sets it as rest.Config.Timeout of the
	// recorder's client.
	APITimeout time.Duration
	// HeartbeatRefresh is how old the Spoke's recorded status.lastSeen may
	// grow before a state snapshot that changes nothing else writes it
	// again (with the replay floor, status.lastSnapshotTakenAt). A snapshot
	// that changes the agent's or Kubernetes version, the release count,
	// the signing key or the protocol version always writes, and so does
	// one of a Spoke waiting for a heartbeat (Ready Unknown). 0 writes every
	// snapshot. With heartbeat digests (controllers/heartbeat) readiness
	// does not depend on it; without them the hub caps it at half the
	// Spoke heartbeat timeout, so a live spoke never looks stale.
	HeartbeatRefresh time.Duration
	// HeartbeatRefreshWithoutDigest caps HeartbeatRefresh while the
	// heartbeat digest (Recorder.Heartbeats) fails to be written, so that
	// readiness, then judged by lastSeen alone, holds. Not a flag: the hub
	// sets it to half the Spoke heartbeat timeout (and HeartbeatRefresh to
	// it when it writes no digest at all).
	HeartbeatRefreshWithoutDigest time.Duration
}

// NewOptions returns the defaults.
func NewOptions() Options {
	return Options{
		RevisionLimit:  tugboatv1alpha1.DefaultRevisionLimit,
		EventLimit:     tugboatv1alpha1.MaxEventsPerRevision,
		WriteInterval:  100 * time.Millisecond,
		KeyCacheTTL:    5 * time.Minute,
		MaxStatusBytes: 256 << 10,
		Workers:        8,
		APITimeout:     15 * time.Second,
		// The heartbeat digests tell the Spoke controller which spokes are
		// heard from: lastSeen is written every 5 minutes (one write per
		// spoke per ten 30 s snapshots), and on every change of readiness.
		HeartbeatRefresh: 5 * time.Minute,
		// Half the default Spoke heartbeat timeout (90 s).
		HeartbeatRefreshWithoutDigest: 45 * time.Second,
	}
}

// BindFlags binds the options to flags.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.RevisionLimit, "history-revisions", o.RevisionLimit, "revisions kept per ReleaseHistory")
	fs.IntVar(&o.EventLimit, "history-events", o.EventLimit, "events kept per revision (repeats are compacted)")
	fs.DurationVar(&o.WriteInterval, "history-write-interval", o.WriteInterval, "least time between two writes of one ReleaseHistory")
	fs.DurationVar(&o.KeyCacheTTL, "spoke-key-cache-ttl", o.KeyCacheTTL, "the longest spoke keys read from their Secret are trusted: a hand edit of the Secret takes effect within it, or at once with the Spoke annotated tugboat.dev/keys-updated-at (tugboat's own key writes set it; a new key also works at once); 0 reads them on every request")
	fs.IntVar(&o.Workers, "history-writers", o.Workers, "concurrent ReleaseHistory writers")
	fs.DurationVar(&o.HeartbeatRefresh, "spoke-heartbeat-refresh", o.HeartbeatRefresh, "how old a Spoke's recorded status.lastSeen (and the replay floor status.lastSnapshotTakenAt) may grow before an unchanged state snapshot writes it again (0: every snapshot); readiness comes from the heartbeat digests (--heartbeat-digest-interval), and without them the hub caps this at half of --spoke-heartbeat-timeout")
	fs.DurationVar(&o.APITimeout, "history-api-timeout", o.APITimeout, "deadline of each ReleaseHistory write, heartbeat and key read; running out of it makes /readyz fail until a call succeeds")
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	switch {
	case o.RevisionLimit < 1 || o.RevisionLimit > tugboatv1alpha1.MaxRevisions:
		return fmt.Errorf("--history-revisions must be between 1 and %d, got %d", tugboatv1alpha1.MaxRevisions, o.RevisionLimit)
	case o.EventLimit < 1 || o.EventLimit > tugboatv1alpha1.MaxEventsPerRevision:
		return fmt.Errorf("--history-events must be between 1 and %d, got %d", tugboatv1alpha1.MaxEventsPerRevision, o.EventLimit)
	case o.WriteInterval < 0:
		return fmt.Errorf("--history-write-interval must not be negative")
	case o.KeyCacheTTL < 0:
		return fmt.Errorf("--spoke-key-cache-ttl must not be negative")
	case o.APITimeout <= 0:
		return fmt.Errorf("--history-api-timeout must be positive")
	case o.HeartbeatRefresh < 0 || o.HeartbeatRefreshWithoutDigest < 0:
		return fmt.Errorf("--spoke-heartbeat-refresh must not be negative")
	case o.Workers < 1:
		return fmt.Errorf("--history-writers must be at least 1")
	case o.MaxStatusBytes < 16<<10:
		return fmt.Errorf("status size cap must be at least 16KiB")
	}
	return nil
}
