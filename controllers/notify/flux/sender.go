package flux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/hashicorp/go-retryablehttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"tugboat.dev/tugboat/controllers/notify"
)

const (
	// DefaultAddress is notification-controller's event endpoint in a
	// default Flux installation.
	DefaultAddress = "http://notification-controller.flux-system.svc.cluster.local./"
	// DefaultTimeout bounds one POST when the HTTP client sets no timeout.
	DefaultTimeout = 10 * time.Second

	maxExcerpt = 200
)

// Sender posts Flux events (event.toolkit.fluxcd.io/v1beta1 Event) to an
// event endpoint through fluxcd/pkg/runtime/events' Recorder, and reports
// how it answered, which the Recorder alone does not: it logs failures and
// retries on its own. Each Send builds a Recorder whose retryable client
// makes one attempt under the caller's context and captures the answer; the
// caller's delivery machinery does the retrying.
//
// The Recorder sets the event's timestamp (now), reportingController and
// reportingInstance (the host name). It records no Kubernetes Event: the
// involved objects live on spokes, not in the hub's API server.
type Sender struct {
	address    string
	shown      string
	controller string
	client     *http.Client
	log        logr.Logger
}

// NewSender returns a Sender to address, the event endpoint, reporting as
// controller. client may be nil (a client with DefaultTimeout); its
// redirects are never followed. An address that is not an absolute http(s)
// URL is a *notify.PermanentError.
func NewSender(address, controller string, client *http.Client, log logr.Logger) (*Sender, error) {
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, notify.Permanentf("notification-controller address %q must be an absolute http or https URL", redact(address))
	}
	c := &http.Client{Timeout: DefaultTimeout}
	if client != nil {
		cc := *client
		c = &cc
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if log.GetSink() == nil {
		log = funcr.New(func(string, string) {}, funcr.Options{})
	}
	return &Sender{address: u.String(), shown: redact(address), controller: controller, client: c, log: log}, nil
}

// Address is the event endpoint as errors and messages show it (without
// user information or query).
func (s *Sender) Address() string { return s.shown }

// Send posts e. Only e's involvedObject (kind, name and namespace
// required), severity (info or error), reason, message and metadata are
// taken; the Recorder sets the rest.
//
// A 2xx answer is a delivery, and so is 429: notification-controller
// answers it to a repeat of an event it accepted within its rate-limit
// window (same object, message, revision and token). 408, 5xx and network
// errors are plain errors, to retry; any other answer, and an event the
// Recorder refuses to send, is a *notify.PermanentError. status is the
// answer's HTTP status (0 when there was none).
func (s *Sender) Send(ctx context.Context, e eventv1.Event) (status int, err error) {
	var eventType string
	switch e.Severity {
	case eventv1.EventSeverityInfo:
		eventType = corev1.EventTypeNormal
	case eventv1.EventSeverityError:
		eventType = corev1.EventTypeWarning
	default:
		return 0, notify.Permanentf("flux event severity %q is not info or error", e.Severity)
	}
	o := e.InvolvedObject
	if o.Kind == "" || o.Name == "" || o.Namespace == "" || o.APIVersion == "" {
		return 0, notify.Permanentf("flux event involvedObject needs apiVersion, kind, name and namespace, got %s %s/%s", o.Kind, o.Namespace, o.Name)
	}

	var (
		mu       sync.Mutex
		answered bool
		statusS  string
		body     string
		sendErr  error
	)
	rc := &retryablehttp.Client{
		HTTPClient: s.client,
		RetryMax:   0,
		// Bind the caller's context: the Recorder posts without one.
		RequestLogHook: func(_ retryablehttp.Logger, r *http.Request, _ int) {
			*r = *r.WithContext(ctx)
		},
		// Capture the answer, and close its body (the Recorder drops the
		// response without closing it). Never retry here.
		CheckRetry: func(_ context.Context, resp *http.Response, err error) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			answered = true
			sendErr = err
			if resp != nil {
				status, statusS = resp.StatusCode, resp.Status
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4*maxExcerpt))
				body = notify.Printable(string(b), maxExcerpt)
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
				_ = resp.Body.Close()
			}
			return false, nil
		},
	}
	rec := &events.Recorder{
		Webhook:             s.address,
		ReportingController: s.controller,
		Client:              rc,
		EventRecorder:       discard{},
		Scheme:              runtime.NewScheme(),
		Log:                 s.log,
	}
	ref := o
	rec.AnnotatedEventf(&ref, e.Metadata, eventType, e.Reason, "%s", e.Message)

	mu.Lock()
	defer mu.Unlock()
	switch {
	case !answered:
		return 0, fmt.Errorf("notification-controller %s: the event recorder did not send the event (see the hub's log)", s.shown)
	case sendErr != nil:
		var ue *url.Error
		if errors.As(sendErr, &ue) {
			sendErr = ue.Err
		}
		return status, fmt.Errorf("notification-controller %s: %w", s.shown, sendErr)
	case status >= 200 && status < 300, status == http.StatusTooManyRequests:
		return status, nil
	}
	err = fmt.Errorf("notification-controller %s answered %s", s.shown, statusS)
	if body != "" {
		err = fmt.Errorf("%w: %s", err, body)
	}
	if status >= 500 || status == http.StatusRequestTimeout {
		return status, err
	}
	return status, notify.Permanent(err)
}

// discard is a Kubernetes event recorder that records nothing.
type discard struct{}

func (discard) Event(runtime.Object, string, string, string)          {}
func (discard) Eventf(runtime.Object, string, string, string, ...any) {}
func (discard) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {
}

// redact is an address without user information, query or fragment.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
