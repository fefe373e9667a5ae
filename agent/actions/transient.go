package actions

import (
	"errors"
	"io"
	"net"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// transient reports whether err, from a read of the spoke's API server,
// may go away on its own: the server is unreachable, restarting (which
// answers 403 until its authorizer has loaded RBAC, and 503 until it is
// ready), overloaded or timing out. Such a failure before the upgrade
// wrote anything is retried (for at most Options.PendingWait) instead of
// failing the promotion; a 403 that lasts is reported then, unchanged.
func transient(err error) bool {
	switch {
	case err == nil:
		return false
	case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err), apierrors.IsForbidden(err):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}
