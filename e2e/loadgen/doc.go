// Package loadgen drives a hub's receiver with the traffic of a simulated
// fleet: N spokes × M Helm releases whose agents send signed requests as the
// real agent does (wire protocol v1):
//
//   - on start, a state snapshot of every release (Announce);
//   - then, per spoke, one request in flight at a time: event batches that
//     advance rollouts (ReleaseStarted, object events, ReleaseStatus and
//     HealthChanged carrying the release's State, the previous revision
//     superseded; one rollout in ten ends Failed), and every StateInterval
//     a full state snapshot, the heartbeat.
//
// With Options.ChangeInterval set, Run paces each spoke as a fleet's
// agent: one release change at a time (three event batches StepInterval
// apart: upgrade started, deployed, health), the next change about
// ChangeInterval later (jittered ±50%), and a snapshot every StateInterval
// (jittered ±10%). Intervals shorter than an agent's compress time.
//
// A Generator keeps each release's simulated state between Announce and
// Run, so the hub sees one consistent history. Run is bounded in time
// (Options.Duration) and in requests (Options.MaxRequests), answers 429 and
// 503 by waiting Retry-After and resending (as the agent does), records
// every request's latency and counts answers by status code.
//
// ServeActions has the spokes do what an agent with --actions-enabled does
// for the helm strategy: long-poll the hub for their actions (answers
// verified with the spoke's key), carry out each upgrade (ReleaseStarted,
// the outcome Succeeded with the next revision after a delay, then that
// revision deployed and Current), refuse other actions, and keep posting
// their snapshots. BenchmarkRollout_fleet rolls a Promotion out into such
// spokes.
//
// Register creates the Spokes on the hub (RegisterLabeled with labels, for
// a Pipeline's spokeSelector) and reads the keys the hub generates for
// them.
//
// It is a benchmark tool, not a test double: it talks to loopback
// addresses only and refuses any other URL, so a mistyped flag cannot
// flood a real hub.
package loadgen
