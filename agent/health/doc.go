// Package health computes a Helm release's health from the live state of the
// workloads it owns, with kstatus semantics (github.com/fluxcd/cli-utils
// pkg/kstatus): each Deployment, StatefulSet, DaemonSet, Job and Pod is
// InProgress, Current or Failed, and the release is as healthy as its least
// healthy workload. A few rules sharpen kstatus where it is too patient for
// promotion decisions: Pods whose containers wait in ImagePullBackOff,
// ErrImagePull, CrashLoopBackOff and similar states are Failed, as are Jobs
// whose failure is decided and bare Pods that failed.
//
// It is a pure function of the objects it is given: it does not watch, list
// or cache anything, and it does not decide which objects belong to a
// release (the ownership tracker does). Other kinds (Services, ConfigMaps,
// ReplicaSets, custom resources) do not count: a ReplicaSet's Deployment
// speaks for it, and the rest have no rollout to follow.
package health
