package wire

import (
	"errors"
	"strconv"
	"strings"
)

var (
	// ErrInvalid matches (errors.Is) every error the decoders and Validate
	// return for a body that is malformed or breaks the protocol's rules: the
	// receiver answers 400 with NewErrorResponse(err).
	ErrInvalid = errors.New("wire: invalid body")

	// ErrTooLarge matches the error a decoder returns for a body over its
	// limit: the receiver answers 413.
	ErrTooLarge = errors.New("wire: body too large")
)

// maxFieldErrors bounds how many problems one InvalidError lists.
const maxFieldErrors = 20

// FieldError is one problem with one field of a body.
type FieldError struct {
	// Field is the JSON path of the field, e.g. events[3].release; empty when
	// the problem is with the body as a whole.
	Field string `json:"field,omitempty"`
	// Detail says what is wrong, e.g. "required".
	Detail string `json:"detail"`
}

// Error returns "field: detail", or the detail alone.
func (e FieldError) Error() string {
	if e.Field == "" {
		return e.Detail
	}
	return e.Field + ": " + e.Detail
}

// InvalidError is a body rejected as invalid. It matches ErrInvalid.
type InvalidError struct {
	// Errors are the problems found, at most 20 (then a last entry says how
	// many more there were).
	Errors []FieldError
}

// Error joins the problems with "; ".
func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.Error()
	}
	return "invalid body: " + strings.Join(parts, "; ")
}

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, detail string) *InvalidError {
	return &InvalidError{Errors: []FieldError{{Field: field, Detail: detail}}}
}

// NewErrorResponse returns the body to answer a request that failed with err:
// an InvalidError's problems are listed field by field; any other error gives
// its message. Map the status code with errors.Is: ErrInvalid → 400,
// ErrTooLarge → 413, ErrUnauthorized → 401 (whose message is generic).
func NewErrorResponse(err error) ErrorResponse {
	var inv *InvalidError
	if errors.As(err, &inv) {
		return ErrorResponse{Error: inv.Error(), Fields: inv.Errors}
	}
	if err == nil {
		return ErrorResponse{Error: "unknown error"}
	}
	return ErrorResponse{Error: err.Error()}
}

// fieldErrors collects FieldErrors up to maxFieldErrors.
type fieldErrors struct {
	errs    []FieldError
	dropped int
}

func (f *fieldErrors) add(field, detail string) {
	if len(f.errs) >= maxFieldErrors {
		f.dropped++
		return
	}
	f.errs = append(f.errs, FieldError{Field: field, Detail: detail})
}

func (f *fieldErrors) count() int { return len(f.errs) + f.dropped }

func (f *fieldErrors) err() error {
	if len(f.errs) == 0 {
		return nil
	}
	errs := f.errs
	if f.dropped > 0 {
		errs = append(errs, FieldError{Detail: "and " + strconv.Itoa(f.dropped) + " more problems"})
	}
	return &InvalidError{Errors: errs}
}
