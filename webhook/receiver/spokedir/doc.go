// Package spokedir is the hub's receiver.SpokeDirectory: it finds the
// Spokes a request path names (every namespace), reads their agent and Flux
// keys from their key Secrets (once, then again only when the Spoke's
// tugboat.dev/keys-updated-at annotation changes, a request fails to verify
// (capped per Spoke and over all Spokes: Options), or the TTL passes: see
// Directory), and the takenAt of the last state
// snapshot persisted on the Spoke's status (status.lastSnapshotTakenAt,
// which the recorder writes with the heartbeat).
//
// It is not the recorder (controllers/releasehistory writes what spokes
// report) and it decides nothing: the receiver picks, among the Spokes of a
// name, the one whose key verifies the request.
//
// RBAC: get, list and watch spokes, patch spokes/status and get secrets, which
// the hub's role already grants (markers in controllers/releasehistory).
package spokedir
