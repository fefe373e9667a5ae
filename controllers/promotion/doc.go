// Package promotion holds the Promotion reconciler. It walks a Promotion
// through its phases: Pending → WaitingApproval (when the destination's gate
// requires approval) → Running (the strategy is called, with retries and
// backoff, never from an HTTP handler) → Verifying (until every target of
// the destination reports the version, deployed and healthy) → Succeeded,
// or Failed (strategy error or timeout, naming the laggard targets), or
// Aborted (rejected, superseded, or its Pipeline gone).
//
// The approval gate counts the authenticated votes people add to
// status.approvals (request.Count): one rejection aborts, gates.approvals
// distinct approvers (never the requester of a manual promotion) start
// it. The reconciler alone writes the outcome, status.approval; until
// then the Ready message says who approved and what is missing.
//
// With a rollout (the destination environment's, resolved into
// status.rollout.resolved at start), Running acts wave by wave
// (promotion_rollout.go): the strategy gets the current wave's targets,
// the wave planner (package rollout) judges them on the revision their
// action produced and soaks them, and the next wave is acted on in the
// same reconcile; Verifying once the last wave was acted on. A spent
// failure budget moves it to Paused, where nothing more is acted on until
// it is aborted. The Pipeline's timeout does not bound a rollout.
//
// For the helm strategy, Verifying also queues an agent action per target
// (its PromotionTarget's status.action, Pending) for the spoke's agent to fetch through
// the hub's receiver (controllers/promotion/actions); an agent that refuses
// or fails its action fails the Promotion, naming the target and the
// agent's reason. Those status writes use optimistic locking, since the
// receiver writes the actions too.
package promotion
