package interactions

import (
	"errors"

	"tugboat.dev/tugboat/controllers/promotion/request"
)

// isNotAllowed reports whether request.Decide refused the identity.
func isNotAllowed(err error) bool { return errors.Is(err, request.ErrNotAllowed) }
