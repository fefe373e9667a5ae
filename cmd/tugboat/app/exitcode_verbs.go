//go:build !agentonly

package app

import (
	"errors"
	"strings"

	"tugboat.dev/tugboat/controllers/promotion/request"
)

// verbExitCode maps the errors of the promotion verbs (package request).
func verbExitCode(err error) (int, bool) {
	if ie, ok := errors.AsType[*request.InvalidError](err); ok && ie.Field == "environment" && strings.Contains(ie.Detail, "has no environment") {
		return ExitNotFound, true // an unknown name, like an unknown Pipeline
	}
	switch {
	case errors.Is(err, request.ErrNotFound):
		return ExitNotFound, true
	case errors.Is(err, request.ErrNotAllowed):
		return ExitForbidden, true
	case errors.Is(err, request.ErrNotWaiting):
		return ExitConflict, true
	case errors.Is(err, request.ErrInvalid):
		return ExitUsage, true
	}
	return 0, false
}
