// Package webhook is the webhook promotion strategy: it tells an external
// system (usually a CI pipeline) to promote, with one JSON POST to
// promotion.webhook.url, and leaves the change to it. The Promotion then
// waits for the targets to report the version, as with every strategy.
//
// The request is signed like the agent's requests to the hub (scheme v1 of
// api/wire: X-Tugboat-Timestamp and X-Tugboat-Signature, an HMAC-SHA256 over
// timestamp, method, path and body) with the key under "key" in the Secret
// that promotion.webhook.secretRef names. Without a secretRef the request
// is sent unsigned, and the receiver cannot tell it from a forgery: use that
// only on a trusted network.
//
// X-Tugboat-Delivery carries the Promotion's name. Promote sends the same
// delivery again after a retry or a controller restart, so the receiver must
// treat a delivery it has already acted on as done (that is its idempotency
// key). Redirects are not followed: the signature covers the path.
package webhook
