// Package spoke holds the Spoke reconciler: it makes sure every Spoke has a
// key Secret (generating a 32-byte key when the referenced Secret is
// missing), stalls a Spoke whose name an older Spoke in another namespace
// already has (never the older one, nor naming its namespace), and turns the
// agent's heartbeats into the Ready condition: True while heartbeats arrive,
// Unknown after a lease-like timeout, as Open Cluster Management does for
// managed clusters. A heartbeat is the newest of status.lastSeen and the hub
// replicas' heartbeat digests (Heartbeats, controllers/heartbeat); the
// controller writes lastSeen when readiness changes.
//
// It does not receive heartbeats itself and never reads a spoke cluster.
package spoke
