// Package admission serves the spoke agent's admission webhooks over TLS.
//
// Three webhooks share one Server (a controller-runtime manager.Runnable):
//
//   - /mutate-ownership (mutating, CREATE/UPDATE of workloads, Pods,
//     Services, ConfigMaps, ServiceAccounts, Ingresses): adds the labels
//     tugboat.dev/release and tugboat.dev/release-namespace to objects that
//     carry Helm's release annotations or whose owner (ownerReferences) the
//     ownership index knows, with a JSONPatch of only those labels.
//   - /observe-ownership (validating, CREATE/DELETE of labeled workloads):
//     records the final UID of each tracked object in the index before the
//     object is stored, and forgets it on delete. Mutating admission never
//     sees the UID of an object being created; see package agent/ownership
//     for how UIDs reach the index in time for a ReplicaSet's Pods.
//   - /validate-release-secrets (validating, Secrets labeled owner=helm):
//     reports writes of Helm release Secrets (type helm.sh/release.v1) to a
//     callback, the earliest "release started" signal.
//
// None of them ever denies a request: every response is allowed, any
// internal error yields an allowed response without a patch (counted in
// the decisions metric with result "error"), and Registration builds
// webhook configurations with failurePolicy Ignore and a 2s timeout, so an
// unreachable agent never blocks a deploy. Only a request body that is not
// an admission.k8s.io/v1 AdmissionReview gets HTTP 400 (413 when over the
// body limit).
//
// The package does not decide what to do with a release signal and does not
// run informers or backfills; the agent wires those (package agent/ownership).
package admission
