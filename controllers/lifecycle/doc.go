// Package lifecycle is the client side of lifecycle steps (issue 25): what
// a step controller, a person (tugboat lifecycle done|error) or a CI job
// does to finish a LifecycleEvent, or to claim a Lifecycle, in the name the
// API server authenticates. The name comes from a SelfSubjectReview, never
// from a flag: the admission policy tugboat-lifecycles refuses any other.
//
// It is not the hub's side: the Promotion reconciler publishes events and
// times them out (controllers/promotion, step_external.go).
package lifecycle
