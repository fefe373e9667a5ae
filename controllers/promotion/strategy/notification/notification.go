package notification

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

const (
	// DefaultAddress is notification-controller's event endpoint in a
	// default Flux installation.
	DefaultAddress = "http://notification-controller.flux-system.svc.cluster.local./"
	// Reason is the event's reason.
	Reason = "Promote"
	// ReportingController is the event's reportingController.
	ReportingController = "tugboat"
	// SeverityInfo is the event's severity.
	SeverityInfo = "info"
	// Timeout bounds one delivery, response included.
	Timeout = 10 * time.Second

	// maxErrorBody is how much of a refusal's body goes into the error.
	maxErrorBody = 512
)

// Event is Flux's event.toolkit.fluxcd.io/v1beta1 Event, the body
// notification-controller's event endpoint accepts.
type Event struct {
	// InvolvedObject is the object the event is about: the Pipeline.
	InvolvedObject corev1.ObjectReference `json:"involvedObject"`
	// Severity is trace, info or error.
	Severity string `json:"severity"`
	// Timestamp is when the event was recorded.
	Timestamp metav1.Time `json:"timestamp"`
	// Message is for people, at most 39,000 characters.
	Message string `json:"message"`
	// Reason is machine-readable: Promote.
	Reason string `json:"reason"`
	// Metadata are extra fields, keys prefixed with the involved object's
	// API group.
	Metadata map[string]string `json:"metadata,omitempty"`
	// ReportingController is the sender: tugboat.
	ReportingController string `json:"reportingController"`
	// ReportingInstance identifies the sending process (its host name).
	ReportingInstance string `json:"reportingInstance,omitempty"`
}

// Options configure the strategy.
type Options struct {
	// DefaultAddress is used when the strategy sets no address (the hub's
	// --notification-controller-address). Defaults to DefaultAddress.
	DefaultAddress string
	// HTTPClient sends the events. Defaults to a client with Timeout that
	// follows no redirects.
	HTTPClient *http.Client
	// Instance is the reportingInstance. Defaults to the host name.
	Instance string
	// Now is the clock for timestamps. Defaults to time.Now.
	Now func() time.Time
}

// Strategy is the notification strategy.
type Strategy struct {
	opts Options
}

var _ strategy.Strategy = (*Strategy)(nil)

// New returns the notification strategy.
func New(opts Options) *Strategy {
	if opts.DefaultAddress == "" {
		opts.DefaultAddress = DefaultAddress
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{
			Timeout:       Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if opts.Instance == "" {
		opts.Instance, _ = os.Hostname()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Strategy{opts: opts}
}

// Promote POSTs the Event. 2xx (notification-controller answers 202) is
// success, and so is 429 (a repeat of an event it already accepted).
// Connection errors, timeouts, 408 and 5xx are retryable; other answers are
// terminal with the start of the response body; so is an address that is
// not an absolute http(s) URL.
func (s *Strategy) Promote(ctx context.Context, req strategy.Request) (strategy.Result, error) {
	if req.Promotion == nil || req.Pipeline == nil {
		return strategy.Result{}, strategy.Terminal(errors.New("no Promotion or Pipeline given"))
	}
	address := s.opts.DefaultAddress
	if n := req.Strategy.Notification; n != nil && n.Address != "" {
		address = n.Address
	}
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return strategy.Result{}, strategy.Terminal(fmt.Errorf("notification-controller address %q must be an absolute http or https URL", address))
	}
	event := NewEvent(req, s.opts.Now(), s.opts.Instance)
	body, err := json.Marshal(event)
	if err != nil {
		return strategy.Result{}, strategy.Terminal(fmt.Errorf("encoding the event: %w", err))
	}

	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return strategy.Result{}, strategy.Terminal(fmt.Errorf("notification-controller %s: %w", u.Redacted(), err))
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("User-Agent", "tugboat-hub")
	resp, err := s.opts.HTTPClient.Do(hreq)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return strategy.Result{}, fmt.Errorf("notification-controller %s: %w", u.Redacted(), err)
	}
	defer func() { _ = resp.Body.Close() }()

	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return strategy.Result{Message: fmt.Sprintf("sent Flux event %q to %s (%s)", event.Message, u.Redacted(), resp.Status)}, nil
	case resp.StatusCode == http.StatusTooManyRequests:
		return strategy.Result{Message: fmt.Sprintf("Flux event %q already delivered to %s (it rate-limited the repeat)", event.Message, u.Redacted())}, nil
	}
	err = fmt.Errorf("notification-controller %s answered %s: %s", u.Redacted(), resp.Status, snippet(resp.Body))
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout {
		return strategy.Result{}, err
	}
	return strategy.Result{}, strategy.Terminal(err)
}

// NewEvent is the Flux event announcing req, recorded at now by instance.
func NewEvent(req strategy.Request, now time.Time, instance string) Event {
	gv := tugboatv1alpha1.GroupVersion
	env := req.Promotion.Spec.To
	if env == "" && req.Environment != nil {
		env = req.Environment.Name
	}
	pipeline := req.Pipeline.Namespace + "/" + req.Pipeline.Name
	token := string(req.Promotion.UID)
	if token == "" {
		token = req.Promotion.Namespace + "/" + req.Promotion.Name
	}
	meta := map[string]string{
		"environment": env,
		"version":     req.Version,
		"promotion":   req.Promotion.Name,
		"pipeline":    pipeline,
		"revision":    req.Version,
		"token":       token,
	}
	if req.Promotion.Spec.From != "" {
		meta["from"] = req.Promotion.Spec.From
	}
	metadata := make(map[string]string, len(meta))
	for k, v := range meta {
		metadata[gv.Group+"/"+k] = v
	}
	return Event{
		InvolvedObject: corev1.ObjectReference{
			APIVersion: gv.String(),
			Kind:       "Pipeline",
			Namespace:  req.Pipeline.Namespace,
			Name:       req.Pipeline.Name,
			UID:        req.Pipeline.UID,
		},
		Severity:            SeverityInfo,
		Timestamp:           metav1.NewTime(now),
		Message:             fmt.Sprintf("promote %s to %s", req.Version, env),
		Reason:              Reason,
		Metadata:            metadata,
		ReportingController: ReportingController,
		ReportingInstance:   instance,
	}
}

// snippet is the first maxErrorBody bytes of body, as one line.
func snippet(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "?")), " ")
	if s == "" {
		return "(empty body)"
	}
	return s
}
