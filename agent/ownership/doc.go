// Package ownership tracks which Helm release owns which Kubernetes object on
// a spoke cluster.
//
// The heart of the package is Index, an in-memory, size-bounded (LRU) map
// from object UID, and from object name, to the release that owns the
// object. The agent's admission webhooks (package agent/admission) read it
// to label objects created by controllers (ReplicaSets, Pods, Jobs), which
// carry no Helm metadata of their own but point at their owner through
// ownerReferences. Fallback optionally resolves an owner the index does not
// know yet with a rate-limited, short-deadline metadata GET, and Backfill
// labels objects that existed before the agent started.
//
// The package does not decode Helm releases and does not watch anything by
// itself: informers and webhooks feed it (Index.Observe, Index.Record,
// Index.EventHandler).
//
// # How UIDs reach the index in time for a ReplicaSet's Pods
//
// A child's ownerReference names its owner by UID, but a mutating webhook
// never sees the UID of an object being created: kube-apiserver assigns the
// UID (and a generated name) only after mutating admission, just before
// validating admission and the write to storage. (ReplicaSets need the
// chain less than one might think: the deployment controller copies the
// Deployment's annotations, Helm's included, to its ReplicaSets. Pods, and
// the Jobs of a CronJob, carry no such copy.) Three sources fill the gap,
// in the order they happen for `helm install` of a Deployment:
//
//  1. The mutating webhook records every object it labels at CREATE by name
//     (group, kind, namespace, name) with an unknown UID; Pods, which own
//     nothing, are not recorded. An owner lookup that misses by UID falls
//     back to this name entry, unless the entry already has a different UID
//     (a deleted and recreated namesake).
//  2. A validating webhook (/observe-ownership, object selector
//     tugboat.dev/release exists, so only tracked objects are sent) sees the
//     same object after mutation with its final UID and name, still before
//     it is stored, and records UID → release. A controller can only create
//     a child after the owner is stored, so the Deployment's UID is in the
//     index before its ReplicaSet's admission, and the ReplicaSet's before
//     its Pods'. The same webhook sees DELETE and forgets the UID.
//  3. The agent's label-selected metadata informers (Index.EventHandler) and
//     Backfill record the UIDs of objects labeled while the agent was down
//     or while the webhooks were unreachable (failurePolicy Ignore), and
//     Fallback resolves the remaining misses with a bounded GET.
//
// Any one source suffices for the chain Deployment → ReplicaSet → Pods; an
// object that slips through all of them (for example because the webhook was
// unreachable) is labeled by the next Backfill pass.
package ownership
