// Package request carries out what people and CI systems ask of a Pipeline:
// a manual or CI Promotion (Create, Ensure), an approval decision (Approve,
// Reject) and the release of a rollback hold (Resume). The hub's CI API
// (webhook/pipelineapi) and the CLI (`tugboat promote`, `approve`, `reject`)
// both call it, so they validate and behave the same.
//
// It is not a controller: it only writes the objects the request names
// (a Promotion, its status.approval, a Pipeline annotation) and leaves every
// decision that follows to the Pipeline and Promotion reconcilers. Its errors
// are typed (ErrInvalid, ErrNotFound, ErrNotWaiting) so callers can map them
// to HTTP status codes or clear CLI messages.
package request
