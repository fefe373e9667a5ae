// Package pipelineapi is the hub's HTTP API for external CI systems acting
// on one Pipeline:
//
//	POST /v1/pipelines/{namespace}/{name}/promotions  {"environment", "version", "requester"}
//	POST /v1/pipelines/{namespace}/{name}/approvals   {"promotion", "approve", "message"}
//	POST /v1/pipelines/{namespace}/{name}/steps       {"promotion", "step", "delivery", "result", "message"}
//
// The first asks for a Promotion (requestedBy: ci) and answers 201, or 200
// when an unfinished one of that version into that environment already
// existed; the second records a CI vote (approve or reject) on a Promotion
// waiting for approval, in its status.approvals. Both do their work
// through controllers/promotion/request, like the CLI; the strategy runs
// later, in the Promotion reconciler, never in a handler, and so does the
// counting of votes. The third reports the result of a webhook step whose
// receiver answered 202 Accepted (controllers/promotion ReportStep): it
// finishes the attempt's LifecycleEvent, and the Promotion reconciler
// completes the step from it.
//
// Promotions are authenticated by the Secret the Pipeline's spec.secretRef
// names, approvals only by the approval credentials of
// spec.approvalSecretRef: each key of that Secret is a credential's name,
// its value the credential's bearer token or HMAC key. The vote is recorded
// under that name (source CI), never a name from the body (an "approver"
// field is refused), and only when the name is listed in the destination
// environment's gates.approvers.ciCredentials (else 403). The request
// credential cannot approve: an approval that authenticates with it is
// answered 403 saying so, and an approval credential cannot request
// promotions. Step reports are authenticated by the request credential or
// by the signing key of a webhook step of that name (its webhook.secretRef,
// the key the hub signed the step's call with: the body's "step" is peeked
// at to find it), recorded by the credential's name, never the body's; a
// step key reports only its own step (else 403). The Pipeline is read from the manager's cache and the Secrets
// from the API server, kept (or their absence) for Options.SecretCacheTTL
// (10s: a rotated or revoked secret takes effect within it), so anonymous
// calls cost the API server next to nothing: "Authorization:
// Bearer <token>" matched in constant time, or the tugboat request
// signature (X-Tugboat-Timestamp and X-Tugboat-Signature: v1=..., see
// api/wire) within a ±5 minute window. When an Authorization header is
// present it alone decides. Every other authentication failure, an
// unknown Pipeline included, gets the same 401 body, so the API reveals
// neither which check failed nor which Pipelines exist; 404 for an
// unknown Promotion comes only after authentication.
//
// Checks run in this order: path (404), method (405), the client's rate
// limit (429 with Retry-After; a token bucket per client address,
// Options.RateLimit and RateBurst), Content-Type (415), body size (413,
// 64 KiB), authentication (401; 403 for the request credential on
// approvals), body (400, naming the field), then the request's own
// outcome (404, 403 for a credential that may not approve or a key of
// another step, 409 for a decision already made, a stale delivery or a
// step not waiting for a report). Errors are
// wire.ErrorResponse bodies. Credentials are never logged.
//
// The handler is mounted on the hub's receiver (webhook/receiver
// Options.Mounts) under "/v1/pipelines/"; it is not a server of its own.
package pipelineapi
