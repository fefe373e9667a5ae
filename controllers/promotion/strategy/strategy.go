// Package strategy defines how a Promotion is carried out: a Strategy per
// status.strategy.type (the Pipeline's, resolved by the hub), looked up in a Registry. The Promotion reconciler
// calls Promote from its Running phase (never from an HTTP handler); the
// strategy starts the change and returns, and the reconciler then verifies
// that the destination's targets report the version healthy.
//
// Every Strategy must be idempotent: Promote may be called again for the
// same Promotion after a controller restart or a retry, and must then
// neither open a second pull request nor apply twice (check first, then
// act; use the Promotion's name as the idempotency key where the far side
// supports one).
package strategy

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Target is one release of the destination environment.
type Target struct {
	// Spoke is the target's Spoke on the hub (nil when it does not exist).
	Spoke *tugboatv1alpha1.Spoke
	// SpokeName, Namespace and Release identify the release.
	SpokeName, Namespace, Release string
	// HelmRelease is the Flux HelmRelease managing the release, if any
	// (namespace defaulted to the target's namespace).
	HelmRelease *tugboatv1alpha1.ObjectReference
}

// Request is everything a strategy needs to promote.
type Request struct {
	// Promotion being carried out (read-only).
	Promotion *tugboatv1alpha1.Promotion
	// Pipeline that owns it (read-only).
	Pipeline *tugboatv1alpha1.Pipeline
	// Environment is the destination environment's spec.
	Environment *tugboatv1alpha1.Environment
	// Targets of the destination environment.
	Targets []Target
	// Version to promote.
	Version string
	// RollbackFrom, when set, makes the request a rollback: a rollout of
	// RollbackFrom spent its failure budget (onFailure Rollback) and the
	// targets go back to Version, the version they ran before. A strategy
	// that opens a change names it as a rollback (the pullRequest
	// strategy's revert pull request).
	RollbackFrom string
	// Strategy is the strategy the hub resolved from the Pipeline (the Promotion's status.strategy).
	Strategy tugboatv1alpha1.PromotionStrategy
	// Hub reads Secrets (and other objects) on the hub, in the Pipeline's
	// namespace. It is an uncached reader for Secrets.
	Hub client.Reader
	// HubWriter writes to the hub (e.g. agent actions); may be nil for
	// strategies that do not need it.
	HubWriter client.Client
}

// Result is what a strategy reports about the change it started.
type Result struct {
	// URL of what was created (pull request, CI run), if any.
	URL string
	// Reference is an identifier on the far side (commit, branch, run id).
	Reference string
	// Message is one line for people.
	Message string
}

// Strategy carries out promotions of one type.
type Strategy interface {
	// Promote starts the change that brings the destination's targets to
	// the version, idempotently. A nil error means the change is made (or
	// was already); the reconciler then waits for the targets to report.
	// Errors are retried with backoff unless wrapped with Terminal.
	Promote(ctx context.Context, req Request) (Result, error)
}

// Func adapts a function to Strategy.
type Func func(ctx context.Context, req Request) (Result, error)

// Promote calls f.
func (f Func) Promote(ctx context.Context, req Request) (Result, error) { return f(ctx, req) }

// Registry maps strategy types to implementations.
type Registry map[tugboatv1alpha1.StrategyType]Strategy

// Get returns the strategy for t, or a terminal error naming it.
func (r Registry) Get(t tugboatv1alpha1.StrategyType) (Strategy, error) {
	s, ok := r[t]
	if !ok || s == nil {
		return nil, Terminal(fmt.Errorf("strategy %q is not available in this hub", t))
	}
	return s, nil
}

// terminalError marks an error that retrying cannot fix.
type terminalError struct{ err error }

func (e terminalError) Error() string { return e.err.Error() }
func (e terminalError) Unwrap() error { return e.err }

// Terminal wraps err so the Promotion fails at once instead of retrying
// (bad configuration, a missing secret key, a refused request).
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return terminalError{err}
}

// IsTerminal reports whether err (or an error it wraps) is terminal.
func IsTerminal(err error) bool {
	var t terminalError
	return errors.As(err, &t)
}
