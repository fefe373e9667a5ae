package ingest

import (
	"context"
	"errors"

	"tugboat.dev/tugboat/api/wire"
)

// ActionStore is what the receiver (webhook/receiver) needs from the hub to
// hand agents their actions and record the outcomes
// (controllers/promotion/actions implements it). Methods are called only for
// an authenticated spoke, named by the Spoke the receiver authenticated (its
// namespace and name: a Spoke of the same name in another namespace is
// another spoke), and must be safe for concurrent use.
type ActionStore interface {
	// Pending returns sp's actions that wait for an outcome and marks
	// them delivered. An empty result is not an error.
	Pending(ctx context.Context, sp Spoke) ([]wire.Action, error)
	// Report records the outcome of one of sp's actions. It returns an
	// error matching ErrActionNotFound when sp has no action with that
	// id, and one matching ErrActionConflict when the action already has a
	// different outcome; the same outcome reported again is not an error.
	Report(ctx context.Context, sp Spoke, o wire.ActionOutcome) error
	// Wait returns a channel that is closed once an action for sp may
	// have been queued after the call. The receiver takes it before calling
	// Pending, so nothing queued in between is missed.
	Wait(sp Spoke) <-chan struct{}
}

var (
	// ErrActionNotFound is returned by ActionStore.Report for an action the
	// spoke does not have (the receiver answers 404).
	ErrActionNotFound = errors.New("action not found")
	// ErrActionConflict is returned by ActionStore.Report for an action that
	// already has a different outcome (the receiver answers 409).
	ErrActionConflict = errors.New("action already has a different outcome")
)
