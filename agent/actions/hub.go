package actions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"tugboat.dev/tugboat/agent/hubhttp"
	"tugboat.dev/tugboat/agent/keyfile"
	"tugboat.dev/tugboat/api/wire"
)

const (
	// maxActionsBody bounds a poll's answer.
	maxActionsBody = 4 << 20
	// maxErrorBody is how much of an error answer is kept for the log.
	maxErrorBody = 4 << 10
)

// Hub says how the agent reaches the hub; the agent fills it from its
// reporter options, so both talk to the same hub with the same key.
type Hub struct {
	// URL is the hub's base URL (scheme://host[:port]).
	URL string
	// Spoke is this spoke's name on the hub.
	Spoke string
	// KeyFile holds the spoke's HMAC key; it is re-read when it changes.
	KeyFile string
	// CAFile is a PEM bundle trusted for the hub's certificate; empty means
	// the system roots.
	CAFile string
	// AgentVersion goes into the User-Agent.
	AgentVersion string
}

// hubClient makes the signed requests of the actions channel.
type hubClient struct {
	base, spoke, userAgent string
	key                    *keyfile.File
	http                   *http.Client
	pollTimeout            time.Duration
	requestTimeout         time.Duration
}

func newHubClient(h Hub, opts Options, log logr.Logger) (*hubClient, error) {
	if h.URL == "" || h.Spoke == "" || h.KeyFile == "" {
		return nil, errors.New("actions: the hub URL, spoke name and key file are required")
	}
	key, err := keyfile.New(h.KeyFile, log)
	if err != nil {
		return nil, err
	}
	httpClient, err := hubhttp.NewClient(h.CAFile)
	if err != nil {
		return nil, err
	}
	version := h.AgentVersion
	if version == "" {
		version = "dev"
	}
	return &hubClient{
		base:           strings.TrimSuffix(h.URL, "/"),
		spoke:          h.Spoke,
		userAgent:      "tugboat-agent/" + version,
		key:            key,
		http:           httpClient,
		pollTimeout:    opts.PollTimeout,
		requestTimeout: opts.RequestTimeout,
	}, nil
}

// hubError is a failed request: no answer (code 0) or a non-2xx status.
type hubError struct {
	code       int
	err        error
	body       string
	retryAfter time.Duration // the hub's Retry-After, when given
}

func (e *hubError) Error() string {
	if e.code == 0 {
		return e.err.Error()
	}
	if e.body != "" {
		return fmt.Sprintf("hub answered %d: %s", e.code, e.body)
	}
	return fmt.Sprintf("hub answered %d", e.code)
}

func (e *hubError) Unwrap() error { return e.err }

// do sends a signed request and returns the answer's body on 2xx.
func (c *hubClient) do(ctx context.Context, method, path string, body []byte, timeout time.Duration, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, &hubError{err: err}
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	key := c.key.Get()
	wire.SignRequest(req, key, body, time.Now())
	// A fresh nonce: the hub's answer is signed over it, so an answer
	// recorded for another request cannot be replayed to this one.
	req.Header.Set(wire.HeaderNonce, wire.NewNonce())
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &hubError{err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		he := &hubError{code: resp.StatusCode, body: errorMessage(msg)}
		he.retryAfter, _ = hubhttp.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return nil, he
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &hubError{err: err}
	}
	if int64(len(data)) > limit {
		return nil, &hubError{err: fmt.Errorf("hub answer larger than %d bytes", limit)}
	}
	// Only a signed answer is acted on: TLS alone does not protect it
	// from a proxy that terminates TLS, nor with --hub-insecure-http.
	if err := wire.VerifyResponse(key, req, resp.StatusCode, resp.Header.Get(wire.HeaderResponseSignature), data); err != nil {
		return nil, &hubError{err: fmt.Errorf("%w: %s %s: the hub's answer is not signed with this spoke's key (%s); refusing it", errUnsignedAnswer, method, path, verifyReason(err))}
	}
	return data, nil
}

// poll long-polls for pending actions. An empty answer (204, or no body) is
// no actions.
func (c *hubClient) poll(ctx context.Context) ([]wire.Action, error) {
	data, err := c.do(ctx, http.MethodGet, wire.ActionsPath(c.spoke), nil, c.pollTimeout, maxActionsBody)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var list wire.ActionList
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, &hubError{err: fmt.Errorf("decoding the hub's actions: %w", err)}
	}
	return list.Actions, nil
}

// report posts an action's outcome.
func (c *hubClient) report(ctx context.Context, o wire.ActionOutcome) error {
	body, err := json.Marshal(o)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, http.MethodPost, wire.ActionPath(c.spoke, o.ID), body, c.requestTimeout, maxErrorBody)
	return err
}

// errUnsignedAnswer matches a 2xx answer without a valid response
// signature: it is dropped, and the request retried with backoff.
var errUnsignedAnswer = errors.New("unsigned hub answer")

// verifyReason is the reason of a failed response verification, for the
// message.
func verifyReason(err error) string {
	var ve *wire.VerifyError
	if errors.As(err, &ve) {
		return ve.Reason()
	}
	return err.Error()
}

// errorMessage is a wire.ErrorResponse's message, or the body as text.
func errorMessage(body []byte) string {
	var er wire.ErrorResponse
	if err := json.Unmarshal(body, &er); err == nil && er.Error != "" {
		return er.Error
	}
	return strings.TrimSpace(string(body))
}
