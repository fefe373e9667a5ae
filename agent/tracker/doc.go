// Package tracker is the spoke agent's model of the releases on its cluster.
// It is fed by informers (Helm storage Secrets and ConfigMaps, and the
// workloads labeled as belonging to a release), keeps the latest revision
// of every release with its health, turns changes into wire events for the
// reporter, and answers the level-based state snapshot the reporter posts as
// heartbeat and resync.
//
// Event ids are deterministic (release, revision, kind, object, sequence from
// the object's own versions), so an agent that restarts and re-observes the
// same state produces the same ids and the hub drops the repeats.
//
// It does not talk to the API server itself: listing a release's workloads
// is delegated to an ObjectLister (the agent's cache).
package tracker
