// Package heartbeat records which spokes each hub replica heard from, in a
// digest per replica: ConfigMaps named tugboat-heartbeats-<replica>-<shard>
// in the hub's namespace, written every few seconds when something changed,
// and read by the Spoke controller (through its cache) to decide readiness.
//
// It replaces a status write on every Spoke per heartbeat by one write per
// replica and interval: the Spoke's status.lastSeen is then written only on
// a change of readiness (by the Spoke controller) or every
// --spoke-heartbeat-refresh (by the recorder). docs/scaling.md describes
// the design, docs/operations.md the flags and objects.
//
// A digest only ever adds times: the controller takes, per Spoke, the newest
// time of status.lastSeen and every replica's digest, so a digest that is
// lost, stale, corrupt or foreign (ignored, with a logged reason) can delay
// a Spoke's readiness but never make a heard spoke lost while another
// replica's digest hears it. A replica's digest ages out: its entries are
// kept no longer than Options.Expiry, and every replica deletes the digests
// of other replicas not written for longer than that.
//
// It is not a store of history: a digest holds one time per spoke, the last.
package heartbeat
