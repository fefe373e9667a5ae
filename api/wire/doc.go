// Package wire is the agent↔hub protocol, version 1: the JSON bodies the
// spoke agent sends (EventBatch, StateSnapshot), the hub's answers
// (AcceptedResponse, ErrorResponse), strict decoders with size limits and
// field-naming validation, deterministic event ids, and the HMAC request
// signing both sides use.
//
// Endpoints (paths built by EventsPath and StatePath):
//
//	POST /v1/spokes/{spoke}/events   EventBatch     → 202 AcceptedResponse
//	POST /v1/spokes/{spoke}/state    StateSnapshot  → 202 AcceptedResponse
//
// Every request carries X-Tugboat-Timestamp (unix seconds) and
// X-Tugboat-Signature: v1=<hex HMAC-SHA256(key, "v1:" + timestamp + ":" +
// METHOD + ":" + PATH + ":" + body)>. See Sign, SignRequest and Verifier.
//
// The package imports the standard library only, so the agent, the hub, CI
// tooling and tests can share it without pulling in Kubernetes libraries. It
// does not know about the hub's API types (api/v1alpha1): the hub maps wire
// values onto them.
package wire
