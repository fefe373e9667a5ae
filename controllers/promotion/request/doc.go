// Package request carries out what people and CI systems ask of a Pipeline:
// a manual or CI Promotion (Create, Ensure), an authenticated approval vote
// (Decide, with MayApprove for Slack and CI identities; Count tallies the
// votes for the Promotion controller) and the release of a rollback hold
// (Resume). The hub's CI API (webhook/pipelineapi), its Slack endpoint and
// the CLI (`tugboat promote`, `approve`, `reject`) all call it, so they
// validate and behave the same.
//
// It is not a controller: it only writes the objects the request names (a
// Promotion, a vote in its status.approvals, a Pipeline annotation) and
// leaves every decision that follows to the Pipeline and Promotion
// reconcilers. It does not authenticate anyone either: a vote names an
// identity its caller verified (the API server for Kubernetes users, see
// the hub chart's approvals policy). Its errors are typed (ErrInvalid, ErrNotFound,
// ErrNotWaiting, ErrNotAllowed) so callers can map them to HTTP status
// codes or clear CLI messages.
package request
