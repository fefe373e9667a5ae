// Package releasehistory records what spokes report into ReleaseHistory
// objects on the hub. Its Recorder is the hub's implementation of
// ingest.Store (the receiver's port, controllers/ingest): it resolves spoke keys, applies event batches and
// state snapshots to one ReleaseHistory per (spoke, namespace, release), and
// coalesces the writes so each ReleaseHistory is written at most once per
// interval however many events arrive.
//
// A Record call returns only after its changes are persisted (or failed), so
// the receiver answers 202 only for what is stored, and an agent whose
// request failed retries. Bounds (revisions, events per revision, message
// length, total size) keep every object far below the API server's object
// size limit.
//
// It is not a controller: nothing here reconciles on watch events. The Spoke
// controller (controllers/spoke) owns Spoke conditions.
package releasehistory
