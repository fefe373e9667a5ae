package app

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Exit codes of every tugboat verb, for scripts (docs/cli.md#exit-codes).
const (
	// ExitOK: the verb did what was asked.
	ExitOK = 0
	// ExitError: anything else went wrong (the hub cannot be reached, an
	// API error, doctor found an error).
	ExitError = 1
	// ExitUsage: the command line is wrong (an unknown verb or flag, a
	// missing or extra argument, a bad flag value such as -o csv).
	ExitUsage = 2
	// ExitNotFound: a Pipeline, Promotion, Spoke or ReleaseHistory named
	// does not exist.
	ExitNotFound = 3
	// ExitForbidden: the hub's API server refused you (RBAC, the policy
	// tugboat-approvals, or it did not authenticate you).
	ExitForbidden = 4
	// ExitConflict: the object is not in a state that allows it: the
	// Promotion has finished, is not waiting for approval, or a decision
	// was already recorded.
	ExitConflict = 5
)

// exitError carries an exit code with an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is a wrong command line (ExitUsage).
func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// notFoundErrorf is an object named that does not exist (ExitNotFound).
func notFoundErrorf(format string, args ...any) error {
	return &exitError{code: ExitNotFound, err: fmt.Errorf(format, args...)}
}

// ExitCode is the exit status for err, the error a verb returned.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	if e, ok := errors.AsType[*exitError](err); ok {
		return e.code
	}
	if code, ok := verbExitCode(err); ok {
		return code
	}
	switch {
	case apierrors.IsNotFound(err):
		return ExitNotFound
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return ExitForbidden
	}
	// cobra's own command-line errors are plain errors.
	msg := err.Error()
	for _, prefix := range []string{"unknown command ", "unknown flag: ", "unknown shorthand flag: ", "required flag(s) ", "invalid argument ", "flag needs an argument: ", "if any flags in the group "} {
		if strings.HasPrefix(msg, prefix) {
			return ExitUsage
		}
	}
	return ExitError
}
