// Package promotion holds the Promotion reconciler. It walks a Promotion
// through its phases: Pending → WaitingApproval (when the destination's gate
// requires approval) → Running (the strategy is called, with retries and
// backoff, never from an HTTP handler) → Verifying (until every target of
// the destination reports the version, deployed and healthy) → Succeeded,
// or Failed (strategy error or timeout, naming the laggard targets), or
// Aborted (rejected, superseded, or its Pipeline gone).
package promotion
