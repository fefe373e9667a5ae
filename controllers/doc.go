// Package controllers is the root of the hub's reconcilers (Pipeline,
// Promotion, Spoke health, ReleaseHistory retention), promotion strategies and
// notifiers, each in a package of its own below this one.
//
// The RBAC markers here declare what the hub process as a whole needs and are
// turned into the hub chart's files/rbac by `make generate`; each reconciler adds the
// markers for its own kinds next to its SetupWithManager.
package controllers

// The hub records what it observes in events and elects a leader among its
// replicas through a Lease.
//
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
