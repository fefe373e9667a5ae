// Package webhook is the webhook notifier: each notice is POSTed as JSON
// (schema notify.tugboat.dev/v1 Notice, see Payload and docs/notifiers.md),
// signed with the agent wire protocol's scheme (api/wire: X-Tugboat-Timestamp
// and X-Tugboat-Signature over method, path, timestamp and body) when a key
// is configured.
//
// A 2xx answer is a delivery; 429 asks to come back (Retry-After); any other
// answer below 500 (redirects included) is permanent; 5xx and network
// errors are retried. Errors carry the URL without its query string (where
// tokens tend to live) and at most a short, printable excerpt of the
// response. It is not a receiver: verifying is the receiver's business
// (wire.Verifier, or the examples in docs/notifiers.md).
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/notify"
)

const (
	// HeaderEvent carries the notice's event (PromotionSucceeded, ...).
	HeaderEvent = "X-Tugboat-Event"
	// HeaderDelivery carries the notice's ID, the same on every redelivery.
	HeaderDelivery = "X-Tugboat-Delivery"

	// DefaultTimeout bounds one delivery when the HTTP client sets none.
	DefaultTimeout = 10 * time.Second
	// DefaultRetryAfter is the wait asked for by a 429 without a usable
	// Retry-After.
	DefaultRetryAfter = 30 * time.Second

	maxExcerpt = 200
)

// Options are a webhook notifier's resolved settings.
type Options struct {
	// URL receives the POST (the notifier's spec.webhook.url).
	URL string
	// Key is the HMAC key (the Secret's key "key"); the request is not
	// signed when empty.
	Key []byte
	// HTTPClient sends the request. Defaults to a client with
	// DefaultTimeout. Redirects are never followed.
	HTTPClient *http.Client
	// Now is the clock the signature's timestamp is taken from. Defaults to
	// time.Now.
	Now func() time.Time
}

// Notifier posts signed JSON notices.
type Notifier struct {
	url    *url.URL
	shown  string // the URL as errors show it
	key    []byte
	client *http.Client
	now    func() time.Time
}

var _ notify.Notifier = (*Notifier)(nil)

// New returns a webhook notifier. A URL that is not absolute http(s) is a
// *notify.PermanentError.
func New(opts Options) (*Notifier, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, notify.Permanentf("webhook URL %q must be an absolute http or https URL", Redact(opts.URL))
	}
	client := &http.Client{Timeout: DefaultTimeout}
	if opts.HTTPClient != nil {
		c := *opts.HTTPClient
		client = &c
	}
	// A redirect would carry a signed body to a path the signature does not
	// cover; report it instead.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	if n := len(opts.Key); n > 0 && n < wire.MinKeySize {
		return nil, notify.Permanentf("webhook key holds %d bytes; at least %d are required (for example: openssl rand -hex 32)", n, wire.MinKeySize)
	}
	return &Notifier{url: u, shown: Redact(opts.URL), key: append([]byte(nil), opts.Key...), client: client, now: now}, nil
}

// Notify POSTs n. thread is ignored: every notice stands alone.
func (w *Notifier) Notify(ctx context.Context, n notify.Notice, _ string) (notify.Delivered, error) {
	payload := NewPayload(n)
	body, err := json.Marshal(payload)
	if err != nil {
		return notify.Delivered{}, notify.Permanentf("webhook %s: encoding the notice: %w", w.shown, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url.String(), bytes.NewReader(body))
	if err != nil {
		return notify.Delivered{}, notify.Permanentf("webhook %s: %s", w.shown, w.redactErr(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tugboat-hub")
	req.Header.Set(HeaderEvent, payload.Event)
	req.Header.Set(HeaderDelivery, payload.ID)
	if len(w.key) > 0 {
		wire.SignRequest(req, w.key, body, w.now())
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return notify.Delivered{}, fmt.Errorf("webhook %s: %s", w.shown, w.redactErr(err))
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}()
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return notify.Delivered{}, nil
	}
	err = fmt.Errorf("webhook %s answered %s%s", w.shown, resp.Status, excerpt(resp.Body))
	switch {
	case code == http.StatusTooManyRequests:
		return notify.Delivered{}, &notify.RetryAfterError{After: retryAfter(resp.Header.Get("Retry-After"), w.now()), Err: err}
	case code >= 500:
		return notify.Delivered{}, err
	}
	return notify.Delivered{}, notify.Permanent(err)
}

// redactErr is err's message without the URL (which *url.Error adds, query
// string included) and without the URL's query string anywhere.
func (w *Notifier) redactErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if q := w.url.RawQuery; q != "" {
		msg = strings.ReplaceAll(msg, q, "REDACTED")
	}
	if q := w.url.Query().Encode(); q != "" {
		msg = strings.ReplaceAll(msg, q, "REDACTED")
	}
	return msg
}

// Redact is raw as errors and logs may show it: scheme, host and path,
// without user information, query or fragment (where tokens live).
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// excerpt is ": " and at most maxExcerpt printable characters of body, or
// "" when it has none.
func excerpt(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, 4*maxExcerpt))
	s := notify.Printable(string(b), maxExcerpt)
	if s == "" {
		return ""
	}
	return ": " + s
}

// retryAfter parses a Retry-After value (seconds or an HTTP date).
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
		return 0
	}
	return DefaultRetryAfter
}
