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
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

const (
	// HeaderDelivery carries the Promotion's name: the receiver's idempotency
	// key.
	HeaderDelivery = "X-Tugboat-Delivery"
	// HeaderRequestID is read from the response as the Result's Reference.
	HeaderRequestID = "X-Request-Id"
	// SecretKey is the key of the HMAC key in the Secret secretRef names.
	SecretKey = "key"
	// Timeout bounds one delivery, response included.
	Timeout = 10 * time.Second

	// maxErrorBody is how much of a refusal's body goes into the error (and
	// so into the Promotion's status): a short excerpt, so a destination
	// cannot copy a page of internal data into a status people read.
	maxErrorBody = 200
	// maxResponseBody is how much of a success's body is read for an id.
	maxResponseBody = 64 << 10
)

// Payload is the JSON body of the POST.
type Payload struct {
	// Pipeline is "namespace/name".
	Pipeline string `json:"pipeline"`
	// Promotion is the Promotion's name (also in X-Tugboat-Delivery).
	Promotion string `json:"promotion"`
	// From is the environment the version was proven in, if any.
	From string `json:"from,omitempty"`
	// Environment is the destination environment.
	Environment string `json:"environment"`
	// Version is the chart version to promote.
	Version string `json:"version"`
	// Targets are the destination environment's releases.
	Targets []Target `json:"targets"`
	// RequestedBy is auto, user or ci.
	RequestedBy string `json:"requestedBy"`
	// Requester identifies the person or system, when known.
	Requester string `json:"requester,omitempty"`
}

// Target is one release of the destination environment.
type Target struct {
	// Spoke is the Spoke's name.
	Spoke string `json:"spoke"`
	// Namespace is the release's namespace on the spoke.
	Namespace string `json:"namespace"`
	// Release is the Helm release name.
	Release string `json:"release"`
	// HelmRelease is the Flux HelmRelease managing the release, if known.
	HelmRelease *HelmRelease `json:"helmRelease,omitempty"`
}

// HelmRelease names a Flux HelmRelease on a spoke.
type HelmRelease struct {
	// Namespace of the HelmRelease.
	Namespace string `json:"namespace"`
	// Name of the HelmRelease.
	Name string `json:"name"`
}

// Strategy is the webhook strategy.
type Strategy struct {
	client *http.Client
	now    func() time.Time
}

var _ strategy.Strategy = (*Strategy)(nil)

// New returns the webhook strategy. httpClient nil means a client with
// Timeout that follows no redirects; a given client is used as it is (its
// redirect policy included).
func New(httpClient *http.Client) *Strategy {
	if httpClient == nil {
		httpClient = &http.Client{
			Timeout:       Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return &Strategy{client: httpClient, now: time.Now}
}

// Promote POSTs the signed Payload. 2xx is success; its X-Request-Id header,
// or else the JSON body's "id", becomes the Result's Reference (and a JSON
// "url" the Result's URL). Connection errors, timeouts, 5xx, 408 and 429 are
// retryable; other answers (4xx, an unfollowed redirect) are terminal with
// the start of the response body. A bad URL, a missing strategy
// configuration and a Secret without "key" are terminal; a missing Secret is
// retryable (it may be created).
func (s *Strategy) Promote(ctx context.Context, req strategy.Request) (strategy.Result, error) {
	cfg := req.Strategy.Webhook
	if cfg == nil {
		return strategy.Result{}, strategy.Terminal(errors.New("the webhook strategy needs promotion.webhook"))
	}
	if req.Promotion == nil || req.Pipeline == nil {
		return strategy.Result{}, strategy.Terminal(errors.New("no Promotion or Pipeline given"))
	}
	u, err := parseURL(cfg.URL)
	if err != nil {
		return strategy.Result{}, strategy.Terminal(err)
	}
	var key []byte
	if cfg.SecretRef != nil {
		if key, err = readKey(ctx, req, cfg.SecretRef.Name); err != nil {
			return strategy.Result{}, err
		}
	}
	body, err := json.Marshal(payload(req))
	if err != nil {
		return strategy.Result{}, strategy.Terminal(fmt.Errorf("encoding the webhook payload: %w", err))
	}

	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return strategy.Result{}, strategy.Terminal(fmt.Errorf("webhook %s: %w", redact(u), err))
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("User-Agent", "tugboat-hub")
	hreq.Header.Set(HeaderDelivery, req.Promotion.Name)
	if key != nil {
		wire.SignRequest(hreq, key, body, s.now())
	}
	resp, err := s.client.Do(hreq)
	if err != nil {
		return strategy.Result{}, fmt.Errorf("webhook %s: %w", redact(u), unwrapURLError(err))
	}
	defer func() { _ = resp.Body.Close() }()

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		res := strategy.Result{
			Reference: resp.Header.Get(HeaderRequestID),
			Message:   fmt.Sprintf("webhook %s answered %s to delivery %s", redact(u), resp.Status, req.Promotion.Name),
		}
		id, link := fromBody(resp.Body)
		if res.Reference == "" {
			res.Reference = id
		}
		res.URL = link
		return res, nil
	}
	snippet := readSnippet(resp.Body)
	err = fmt.Errorf("webhook %s answered %s: %s", redact(u), resp.Status, snippet)
	switch {
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests:
		return strategy.Result{}, err
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return strategy.Result{}, strategy.Terminal(fmt.Errorf("webhook %s answered %s (redirect to %q, not followed: set the final URL): %s",
			redact(u), resp.Status, resp.Header.Get("Location"), snippet))
	case resp.StatusCode >= 400:
		return strategy.Result{}, strategy.Terminal(err)
	default:
		return strategy.Result{}, err
	}
}

// payload is the body for req.
func payload(req strategy.Request) Payload {
	p := Payload{
		Pipeline:    req.Pipeline.Namespace + "/" + req.Pipeline.Name,
		Promotion:   req.Promotion.Name,
		From:        req.Promotion.Spec.From,
		Environment: req.Promotion.Spec.To,
		Version:     req.Version,
		Targets:     make([]Target, 0, len(req.Targets)),
		RequestedBy: string(req.Promotion.Spec.RequestedBy),
		Requester:   req.Promotion.Spec.Requester,
	}
	if p.Environment == "" && req.Environment != nil {
		p.Environment = req.Environment.Name
	}
	for _, t := range req.Targets {
		pt := Target{Spoke: t.SpokeName, Namespace: t.Namespace, Release: t.Release}
		if pt.Release == "" {
			pt.Release = req.Pipeline.Spec.Release
		}
		if t.HelmRelease != nil {
			ns := t.HelmRelease.Namespace
			if ns == "" {
				ns = t.Namespace
			}
			pt.HelmRelease = &HelmRelease{Namespace: ns, Name: t.HelmRelease.Name}
		}
		p.Targets = append(p.Targets, pt)
	}
	return p
}

// readKey reads the HMAC key from Secret name in the Pipeline's namespace.
func readKey(ctx context.Context, req strategy.Request, name string) ([]byte, error) {
	if req.Hub == nil {
		return nil, errors.New("no hub reader for the webhook's Secret")
	}
	ref := types.NamespacedName{Namespace: req.Pipeline.Namespace, Name: name}
	secret := &corev1.Secret{}
	if err := req.Hub.Get(ctx, ref, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("webhook signing key: Secret %s not found", ref)
		}
		return nil, fmt.Errorf("webhook signing key: reading Secret %s: %w", ref, err)
	}
	key, ok := secret.Data[SecretKey]
	if !ok {
		return nil, strategy.Terminal(fmt.Errorf("webhook signing key: Secret %s has no key %q", ref, SecretKey))
	}
	if len(key) < wire.MinKeySize {
		return nil, strategy.Terminal(fmt.Errorf("webhook signing key: key %q of Secret %s is %d bytes; at least %d are required",
			SecretKey, ref, len(key), wire.MinKeySize))
	}
	return key, nil
}

// parseURL accepts absolute http(s) URLs with a host.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("webhook url cannot be parsed")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook url %s must be an absolute http or https URL", redact(u))
	}
	return u, nil
}

// redact is the URL without user information, query or fragment, which may
// carry credentials.
func redact(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

// unwrapURLError drops the *url.Error wrapper, whose message repeats the full
// URL (query included).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// readSnippet is the first maxErrorBody bytes of body, as one line of valid
// UTF-8.
func readSnippet(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
	s := strings.ToValidUTF8(string(b), "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) || unicode.IsSpace(r) {
			return r
		}
		return '?'
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "(empty body)"
	}
	return s
}

// fromBody reads "id" (string or number) and "url" from a JSON object body.
func fromBody(body io.Reader) (id, link string) {
	b, err := io.ReadAll(io.LimitReader(body, maxResponseBody))
	if err != nil || len(b) == 0 {
		return "", ""
	}
	var v struct {
		ID  json.RawMessage `json:"id"`
		URL string          `json:"url"`
	}
	if json.Unmarshal(b, &v) != nil {
		return "", ""
	}
	var s string
	var n json.Number
	switch {
	case json.Unmarshal(v.ID, &s) == nil:
		id = s
	case json.Unmarshal(v.ID, &n) == nil:
		id = n.String()
	}
	if u, err := url.Parse(v.URL); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		link = v.URL
	}
	if len(id) > 256 {
		id = id[:256]
	}
	return id, link
}
