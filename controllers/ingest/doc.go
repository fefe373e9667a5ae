// Package ingest holds the ports of the hub's ingest path: what the receiver
// (webhook/receiver) needs from the domain, and what it hands over.
//
//   - Spoke: the Spoke a request was authenticated as, as an explicit value
//     (namespace, name, key id);
//   - Store (controllers/releasehistory implements it): spoke keys, and a
//     place to record events and state snapshots; ErrUnknownSpoke,
//     ErrNotReady;
//   - ActionStore (controllers/promotion/actions implements it): agent
//     actions and their outcomes; ErrActionNotFound, ErrActionConflict.
//
// It lives with the domain, so the domain never imports webhook for it
// (imports run webhook → controllers, never back; see docs/architecture.md).
// It is not the receiver's spoke directory (webhook/receiver.SpokeDirectory,
// implemented by webhook/receiver/spokedir), and holds no keys.
package ingest
