package pipelineapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"tugboat.dev/tugboat/api/clip"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/webhook/secretcache"
)

// PathPrefix is where the API is mounted.
const PathPrefix = "/v1/pipelines/"

// Defaults of Options.
const (
	// DefaultBodyLimit is the largest request body accepted, in bytes.
	DefaultBodyLimit int64 = 64 << 10
	// DefaultWindow is how far a signed timestamp may be from the hub's clock.
	DefaultWindow = wire.DefaultWindow
	// DefaultRequestTimeout bounds the API server calls one request makes.
	DefaultRequestTimeout = 15 * time.Second
)

// Endpoint labels of the metrics.
const (
	endpointPromotions = "promotions"
	endpointApprovals  = "approvals"
	endpointSteps      = "steps"
	endpointOther      = "other"
)

// Options configure a Handler. The zero value uses every default.
type Options struct {
	// BodyLimit is the largest body accepted, in bytes (DefaultBodyLimit when
	// zero); larger ones are answered 413.
	BodyLimit int64
	// Window is how far an HMAC-signed request's timestamp may be from the
	// clock, either way (DefaultWindow when zero).
	Window time.Duration
	// RequestTimeout bounds the API server calls of one request
	// (DefaultRequestTimeout when zero).
	RequestTimeout time.Duration
	// RateLimit is each client's sustained rate of requests per second
	// (DefaultRateLimit when zero), and RateBurst how many it may send at
	// once (DefaultRateBurst when zero); a client is its address. Past them
	// the API answers 429 with Retry-After, before reading the body.
	RateLimit float64
	// RateBurst: see RateLimit.
	RateBurst int
	// TrustedProxies are the addresses of the proxies (an ingress) in front
	// of the hub: a request from one is the client's that X-Forwarded-For
	// names, for the rate limit. Empty: the connection's peer is the client,
	// whatever X-Forwarded-For says.
	TrustedProxies []netip.Prefix
	// SecretCacheTTL is how long a Pipeline's Secret (or its absence) is
	// kept (secretcache.DefaultTTL when zero).
	SecretCacheTTL time.Duration
	// Clock returns the current time (time.Now when nil).
	Clock func() time.Time
	// Logger defaults to controller-runtime's logger named "pipeline-api".
	Logger logr.Logger
	// Registerer receives the metrics (controller-runtime's registry, served
	// on the manager's /metrics, when nil).
	Registerer prometheus.Registerer
}

// Handler serves the pipeline API. Create it with New.
type Handler struct {
	client  client.Client // writes through c, reads through the API reader
	reader  client.Reader
	cached  client.Reader // c's own reads: the manager's cache, for Pipelines
	secrets *secretcache.Cache
	limits  *clientLimiter
	opts    Options
	log     logr.Logger
	metrics *metrics
}

var _ http.Handler = (*Handler)(nil)

// New returns the API's handler. It writes (Promotions, approvals) with c,
// reads Pipelines to authenticate a request with c too (the manager's
// cached client: an anonymous request costs the API server nothing), and
// reads Secrets and Promotions with reader, which should be uncached (the
// manager's API reader): the hub does not watch Secrets, which it keeps for
// Options.SecretCacheTTL, and a Promotion created a moment ago is found.
func New(c client.Client, reader client.Reader, opts Options) *Handler {
	if opts.BodyLimit <= 0 {
		opts.BodyLimit = DefaultBodyLimit
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.RateLimit <= 0 {
		opts.RateLimit = DefaultRateLimit
	}
	if opts.RateBurst <= 0 {
		opts.RateBurst = DefaultRateBurst
	}
	if opts.SecretCacheTTL <= 0 {
		opts.SecretCacheTTL = secretcache.DefaultTTL
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = ctrllog.Log.WithName("pipeline-api")
	}
	if opts.Registerer == nil {
		opts.Registerer = ctrlmetrics.Registry
	}
	return &Handler{
		client:  readThrough{Client: c, reader: reader},
		reader:  reader,
		cached:  c,
		secrets: secretcache.New(reader, opts.SecretCacheTTL, opts.Clock),
		limits:  newClientLimiter(opts.RateLimit, opts.RateBurst, opts.Clock, opts.TrustedProxies),
		opts:    opts,
		log:     opts.Logger,
		metrics: newMetrics(opts.Registerer),
	}
}

// readThrough is a client whose reads go to an uncached reader.
type readThrough struct {
	client.Client
	reader client.Reader
}

func (r readThrough) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return r.reader.Get(ctx, key, obj, opts...)
}

func (r readThrough) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.reader.List(ctx, list, opts...)
}

// call is one request on its way through the checks.
type call struct {
	w         http.ResponseWriter
	r         *http.Request
	namespace string
	pipeline  string
	endpoint  string
	status    int
}

// ServeHTTP serves one request; see the package documentation for the order
// of the checks.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := &call{w: w, r: r, endpoint: endpointOther}
	defer func() {
		h.metrics.requests.WithLabelValues(c.endpoint, strconv.Itoa(c.status)).Inc()
	}()
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.RequestTimeout)
	defer cancel()

	path := r.URL.EscapedPath()
	seg := strings.Split(strings.TrimPrefix(path, PathPrefix), "/")
	if !strings.HasPrefix(path, PathPrefix) || len(seg) != 3 || (seg[2] != endpointPromotions && seg[2] != endpointApprovals && seg[2] != endpointSteps) {
		c.fail(http.StatusNotFound, "no such endpoint: use POST "+PathPrefix+"{namespace}/{name}/promotions, .../approvals or .../steps")
		return
	}
	c.namespace, c.pipeline, c.endpoint = seg[0], seg[1], seg[2]
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		c.fail(http.StatusMethodNotAllowed, "method "+clip.String(r.Method, 16)+" not allowed: use POST")
		return
	}
	if ok, wait := h.limits.allow(r); !ok {
		h.metrics.rateLimited.Inc()
		w.Header().Set("Retry-After", retryAfterSeconds(wait))
		c.fail(http.StatusTooManyRequests, "rate limit exceeded for this client: retry after "+retryAfterSeconds(wait)+"s")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		c.fail(http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		c.fail(http.StatusUnsupportedMediaType, "Content-Encoding is not supported: send the body as is")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.BodyLimit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			c.fail(http.StatusRequestEntityTooLarge, "body larger than "+strconv.FormatInt(h.opts.BodyLimit, 10)+" bytes")
			return
		}
		c.fail(http.StatusBadRequest, "reading the body failed")
		return
	}
	p, credential, reason, err := h.authenticate(ctx, r, c.namespace, c.pipeline, c.endpoint, body)
	if err != nil {
		h.log.Error(err, "Authenticating a pipeline API request failed", "pipeline", clip.String(c.namespace+"/"+c.pipeline, 256))
		w.Header().Set("Retry-After", "5")
		c.fail(http.StatusServiceUnavailable, "the hub cannot check credentials right now; retry")
		return
	}
	if reason != "" {
		h.metrics.authFailures.WithLabelValues(reason).Inc()
		h.log.V(1).Info("Pipeline API request not authenticated", "pipeline", clip.String(c.namespace+"/"+c.pipeline, 256), "endpoint", c.endpoint, "reason", reason)
		if reason == reasonRequestCredential {
			c.fail(http.StatusForbidden, requestCredentialCannotApprove)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="tugboat"`)
		c.respond(http.StatusUnauthorized, unauthorized)
		return
	}
	switch c.endpoint {
	case endpointPromotions:
		h.servePromotion(ctx, c, p, body)
	case endpointApprovals:
		h.serveApproval(ctx, c, p, credential, body)
	case endpointSteps:
		h.serveStepReport(ctx, c, p, credential, body)
	}
}

// unauthorized is the one body of every 401.
var unauthorized = wire.ErrorResponse{Error: "request not authenticated"}

// requestCredentialCannotApprove answers an approval made with the
// promotion-request credential.
const requestCredentialCannotApprove = "this credential requests promotions and cannot approve them: " +
	"authenticate approvals with an approval credential of the Pipeline's spec.approvalSecretRef"

func (c *call) fail(status int, msg string) {
	c.respond(status, wire.ErrorResponse{Error: msg})
}

func (c *call) respond(status int, v any) {
	c.status = status
	b, err := json.Marshal(v)
	if err != nil {
		b, c.status = []byte(`{"error":"internal error"}`), http.StatusInternalServerError
	}
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	c.w.WriteHeader(c.status)
	_, _ = c.w.Write(append(b, '\n'))
}
