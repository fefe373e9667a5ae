package request

import (
	"errors"
	"fmt"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

var (
	// ErrInvalid matches (errors.Is) an *InvalidError: the request itself is
	// wrong (HTTP 400).
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound matches a *NotFoundError: the Pipeline or Promotion named
	// does not exist (HTTP 404).
	ErrNotFound = errors.New("not found")
	// ErrNotWaiting matches a *PhaseError: the Promotion is not waiting for
	// the decision asked for (HTTP 409).
	ErrNotWaiting = errors.New("promotion not waiting for approval")
	// ErrNotAllowed matches a *NotAllowedError: the identity may not make
	// this decision (HTTP 403).
	ErrNotAllowed = errors.New("not allowed")
)

// InvalidError is a request with a bad field. Field is named as in the CI
// API's JSON bodies (environment, version, requester, promotion, message)
// or, for a vote, as in ApprovalVote (decision, user, source, ...).
type InvalidError struct {
	// Field is the request field at fault.
	Field string
	// Detail says what is wrong with it.
	Detail string
}

// Error returns "field: detail".
func (e *InvalidError) Error() string { return e.Field + ": " + e.Detail }

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Detail: fmt.Sprintf(format, args...)}
}

// NotFoundError names an object that does not exist.
type NotFoundError struct {
	// Kind is "pipeline" or "promotion".
	Kind string
	// Namespace and Name identify the object.
	Namespace, Name string
}

// Error returns e.g. "pipeline fleet/web not found".
func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s %s/%s not found", e.Kind, e.Namespace, e.Name)
}

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// PhaseError is a decision on a Promotion that is not waiting for it:
// already started or finished, its gate already decided, or the same
// identity's earlier vote the other way (a vote cannot be changed).
type PhaseError struct {
	// Promotion is the Promotion's name.
	Promotion string
	// Phase is its phase when the decision was refused ("" reads Pending).
	Phase tugboatv1alpha1.PromotionPhase
	// Detail, when set, replaces the default explanation.
	Detail string
}

// Error returns e.g. "promotion web-production-1.4.0 is Running, not
// waiting for approval".
func (e *PhaseError) Error() string {
	if e.Detail != "" {
		return "promotion " + e.Promotion + " " + e.Detail
	}
	return fmt.Sprintf("promotion %s is %s, not waiting for approval", e.Promotion, phaseName(e.Phase))
}

// Is reports whether target is ErrNotWaiting.
func (e *PhaseError) Is(target error) bool { return target == ErrNotWaiting }

func phaseName(p tugboatv1alpha1.PromotionPhase) string {
	if p == "" {
		return string(tugboatv1alpha1.PromotionPending)
	}
	return string(p)
}

// NotAllowedError is a decision the identity may not make: a Slack user or
// CI credential that is not an approver of the environment, the requester
// approving their own manual promotion, or a write the API server forbade
// (RBAC, the policy tugboat-approvals).
type NotAllowedError struct {
	// Promotion is the Promotion's name.
	Promotion string
	// User is the identity refused.
	User string
	// Detail says why.
	Detail string
	// Action is what was refused: "" (decide on) or "abort".
	Action string
}

// Error returns e.g. "not allowed to decide on promotion web-production-1.4.0:
// alice requested this promotion: another person must approve it".
func (e *NotAllowedError) Error() string {
	action := "decide on"
	if e.Action != "" {
		action = e.Action
	}
	return "not allowed to " + action + " promotion " + e.Promotion + ": " + e.Detail
}

// Is reports whether target is ErrNotAllowed.
func (e *NotAllowedError) Is(target error) bool { return target == ErrNotAllowed }
