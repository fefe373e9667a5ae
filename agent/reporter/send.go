package reporter

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"tugboat.dev/tugboat/agent/hubhttp"
	"tugboat.dev/tugboat/api/wire"
)

const (
	// maxErrorBody is how much of an error response is read for the log.
	maxErrorBody = 4 << 10
	// maxDrain is how much of a response body is read to let the connection
	// be reused.
	maxDrain = 64 << 10
)

// outcome is what to do after a request.
type outcome int

const (
	// accepted: the hub took the body (2xx).
	accepted outcome = iota
	// rejected: the hub read the body and refused it (400, 413); sending it
	// again cannot help.
	rejected
	// retry: try again after the delay (network error, 401, 429, 5xx, any
	// other status).
	retry
)

// response is the part of a hub answer the reporter acts on.
type response struct {
	code       int   // HTTP status; 0 when no response arrived
	err        error // transport error, when code is 0
	retryAfter time.Duration
	hasRetry   bool   // Retry-After was present and valid
	body       []byte // the start of an error body
}

// codeLabel is the metrics label of the response.
func (r response) codeLabel() string {
	if r.code == 0 {
		return "error"
	}
	return strconv.Itoa(r.code)
}

// post sends body to path, signed with the current key, within the request
// timeout.
func (r *Reporter) post(ctx context.Context, path string, body []byte) response {
	ctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.baseURL+path, bytes.NewReader(body))
	if err != nil {
		return response{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tugboat-agent/"+r.opts.AgentVersion)
	wire.SignRequest(req, r.key.Get(), body, time.Now())
	resp, err := r.client.Do(req)
	if err != nil {
		return response{err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	out := response{code: resp.StatusCode}
	if resp.StatusCode >= 300 {
		out.body, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	out.retryAfter, out.hasRetry = hubhttp.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return out
}

// judge turns a response to a request of the given kind ("events",
// "state") into an outcome and, for retry, the delay before the next
// attempt. It keeps the failure count that drives backoff and the
// disconnected flag whose clearing schedules a state resync ("reconnect").
// Only the goroutine holding the send token calls it.
func (r *Reporter) judge(kind string, res response) (outcome, time.Duration) {
	log := r.log.WithValues("request", kind)
	switch {
	case res.code >= 200 && res.code < 300:
		r.metrics.lastContact.SetToCurrentTime()
		r.contact()
		return accepted, 0

	case res.code == http.StatusBadRequest || res.code == http.StatusRequestEntityTooLarge:
		// The hub verified and read the request: it is reachable.
		r.contact()
		msg, fields := errorDetail(res.body)
		log.Error(nil, "Hub rejected the request; dropping it (a state resync follows)", "code", res.code, "hubError", msg, "fields", fields)
		return rejected, 0

	case res.code == http.StatusTooManyRequests:
		// The hub is up but busy: back off, without treating it as an
		// outage that needs a resync.
		r.failures++
		d := r.retryDelay(res)
		r.logFailure(log, res, d)
		return retry, d

	default:
		r.failures++
		d := r.retryDelay(res)
		r.logFailure(log, res, d)
		r.disconnected = true
		return retry, d
	}
}

// contact records that the hub answered a verified request: the backoff
// resets and, after an outage, a state resync is scheduled.
func (r *Reporter) contact() {
	r.failures = 0
	if r.disconnected {
		r.disconnected = false
		r.stateDue.Store(true)
		r.log.Info("Reconnected to the hub; a full state resync follows")
	}
}

// retryDelay is the hub's Retry-After on 429 and 503 when given, else the
// backoff for the current failure count.
func (r *Reporter) retryDelay(res response) time.Duration {
	if res.hasRetry && (res.code == http.StatusTooManyRequests || res.code == http.StatusServiceUnavailable) {
		return res.retryAfter
	}
	return hubhttp.Backoff(r.failures, r.opts.BackoffInitial, r.opts.BackoffMax, r.rand)
}

// logFailure logs the first failure of a run, and every 401 (a key problem
// someone must fix), at error level; the rest of an outage at V(1), so it
// does not flood the log. Retries are spaced by backoff either way.
func (r *Reporter) logFailure(log logr.Logger, res response, d time.Duration) {
	kv := []any{"code", res.codeLabel(), "retryIn", d.String(), "failures", r.failures}
	if res.code == http.StatusUnauthorized {
		kv = append(kv, "hint", "the hub did not accept the signature: check the spoke name, the key file and the clock")
	} else if res.code != 0 {
		msg, _ := errorDetail(res.body)
		kv = append(kv, "hubError", msg)
	}
	if r.failures == 1 || res.code == http.StatusUnauthorized {
		log.Error(res.err, "Cannot deliver to the hub; retrying", kv...)
		return
	}
	log.V(1).Info("Still cannot deliver to the hub; retrying", append(kv, "err", errString(res.err))...)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// errorDetail extracts the message and field errors of a wire.ErrorResponse
// body, or returns the body as text.
func errorDetail(body []byte) (string, []wire.FieldError) {
	var er wire.ErrorResponse
	if err := json.Unmarshal(body, &er); err == nil && er.Error != "" {
		return er.Error, er.Fields
	}
	return strings.TrimSpace(string(body)), nil
}
