package receiver

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"tugboat.dev/tugboat/api/wire"
)

// unauthorized is the one body of every 401, whatever failed.
var unauthorized = wire.ErrorResponse{Error: "request not authenticated"}

// statusWriter remembers the status code written, for the metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// statusCode renders the common codes without allocating.
func statusCode(code int) string {
	switch code {
	case 200:
		return "200"
	case 202:
		return "202"
	case 400:
		return "400"
	case 401:
		return "401"
	case 404:
		return "404"
	case 405:
		return "405"
	case 413:
		return "413"
	case 415:
		return "415"
	case 429:
		return "429"
	case 503:
		return "503"
	}
	return strconv.Itoa(code)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // the wire types always marshal
		b = []byte(`{"error":"internal error"}`)
		status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, resp wire.ErrorResponse) {
	writeJSON(w, status, resp)
}

func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n"))
}

// errorf builds an error body.
func errorf(format string, args ...any) wire.ErrorResponse {
	return wire.ErrorResponse{Error: fmt.Sprintf(format, args...)}
}

// retryAfter sets Retry-After to d rounded up to whole seconds, at least 1.
func retryAfter(w http.ResponseWriter, d time.Duration) {
	secs := int64(math.Ceil(d.Seconds()))
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
}

// quoteLimit bounds a client-supplied value echoed in an error or a log line
// (clip.String), in bytes.
const quoteLimit = 64
