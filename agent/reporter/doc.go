// Package reporter is the spoke agent's link to the hub: it delivers the
// agent's events at least once, in signed batches, and keeps the hub's view
// of the spoke's releases whole with full state snapshots.
//
// Events go into a bounded in-memory outbox (Enqueue never blocks). A single
// loop sends them as batches (POST /v1/spokes/{spoke}/events, signed with
// wire.SignRequest) when a batch fills or its oldest event has waited
// BatchMaxWait, and removes them only once the hub answered 2xx. Failures are
// retried with capped exponential backoff and full jitter, or after the
// hub's Retry-After on 429 and 503; a retry resends the same events, which is
// harmless because event ids are deterministic and the hub de-duplicates.
// A 400 or 413 drops the batch (retrying cannot help); a 401 is retried, as
// keys may be rotating, and the key file is re-read whenever it changes.
//
// The state snapshot (POST /v1/spokes/{spoke}/state) is the level-based
// truth that makes losses harmless: it is posted on start, after every
// reconnect, after events were dropped (outbox overflow) or rejected (at most
// once a second), and every StateInterval as the heartbeat. Events queued before a snapshot was
// taken are delivered before it is posted, so the hub's last word is the
// snapshot.
//
// The Reporter is a controller-runtime manager.Runnable that does not need
// leader election. Its metrics (prefix tugboat_agent_reporter_, labeled by
// spoke) are registered once in controller-runtime's metrics registry.
//
// The package does not decide what to report (the agent's release and
// ownership trackers do), does not persist the outbox across restarts (the
// state post at start covers what a restart lost), and never logs the key
// or signatures.
package reporter
