// Package v1alpha1 holds the hub's API, group tugboat.dev, version v1alpha1:
//
//   - Spoke: a leaf cluster whose agent reports to the hub, with the HMAC key(s)
//     the agent signs its requests with.
//   - ReleaseHistory: what the hub knows about one Helm release on one spoke,
//     its recent revisions and a bounded, compacted list of events per revision.
//   - Pipeline: an ordered list of environments a chart version is promoted
//     through, the gates between them, the promotion strategy and the notifiers.
//   - Promotion: one attempt to move one version from one environment into the
//     next, owned by its Pipeline.
//
// The package holds types, defaults and validation markers only. The
// controllers that act on these objects live in controllers/; the agent↔hub
// wire format lives in api/wire, which does not depend on this package.
//
// +kubebuilder:object:generate=true
// +groupName=tugboat.dev
package v1alpha1
