package notification

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
	"tugboat.dev/tugboat/controllers/notify/flux"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

const (
	// DefaultAddress is notification-controller's event endpoint in a
	// default Flux installation.
	DefaultAddress = flux.DefaultAddress
	// Reason is the event's reason.
	Reason = "Promote"
	// ReportingController is the event's reportingController.
	ReportingController = "tugboat"
	// SeverityInfo is the event's severity.
	SeverityInfo = eventv1.EventSeverityInfo
	// Timeout bounds one delivery, response included.
	Timeout = 10 * time.Second
)

// Options configure the strategy.
type Options struct {
	// DefaultAddress is used when the strategy sets no address (the hub's
	// --notification-controller-address). Defaults to DefaultAddress.
	DefaultAddress string
	// HTTPClient sends the events. Defaults to a client with Timeout.
	// Redirects are never followed.
	HTTPClient *http.Client
	// Log receives the event recorder's own logging.
	Log logr.Logger
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
		opts.HTTPClient = &http.Client{Timeout: Timeout}
	}
	return &Strategy{opts: opts}
}

// Promote sends the Event through fluxcd/pkg/runtime/events (see
// flux.Sender). 2xx (notification-controller answers 202) is success, and
// so is 429 (a repeat of an event it already accepted). Connection errors,
// timeouts, 408 and 5xx are retryable; other answers are terminal with the
// start of the response body; so is an address that is not an absolute
// http(s) URL.
func (s *Strategy) Promote(ctx context.Context, req strategy.Request) (strategy.Result, error) {
	if req.Promotion == nil || req.Pipeline == nil {
		return strategy.Result{}, strategy.Terminal(errors.New("no Promotion or Pipeline given"))
	}
	address := s.opts.DefaultAddress
	if n := req.Strategy.Notification; n != nil && n.Address != "" {
		address = n.Address
	}
	sender, err := flux.NewSender(address, ReportingController, s.opts.HTTPClient, s.opts.Log)
	if err != nil {
		return strategy.Result{}, strategy.Terminal(err)
	}
	event := NewEvent(req)

	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	status, err := sender.Send(ctx, event)
	switch {
	case notify.IsPermanent(err):
		return strategy.Result{}, strategy.Terminal(err)
	case err != nil:
		return strategy.Result{}, err
	case status == http.StatusTooManyRequests:
		return strategy.Result{Message: fmt.Sprintf("Flux event %q already delivered to %s (it rate-limited the repeat)", event.Message, sender.Address())}, nil
	}
	return strategy.Result{Message: fmt.Sprintf("sent Flux event %q to %s (%d %s)", event.Message, sender.Address(), status, http.StatusText(status))}, nil
}

// NewEvent is the Flux event announcing req. Its timestamp and
// reportingInstance are left to the event recorder, which sets them when
// it sends.
func NewEvent(req strategy.Request) eventv1.Event {
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
		"environment":           env,
		"version":               req.Version,
		"promotion":             req.Promotion.Name,
		"pipeline":              pipeline,
		eventv1.MetaRevisionKey: req.Version,
		eventv1.MetaTokenKey:    token,
	}
	if req.Promotion.Spec.From != "" {
		meta["from"] = req.Promotion.Spec.From
	}
	metadata := make(map[string]string, len(meta))
	for k, v := range meta {
		metadata[gv.Group+"/"+k] = v
	}
	return eventv1.Event{
		InvolvedObject: corev1.ObjectReference{
			APIVersion: gv.String(),
			Kind:       "Pipeline",
			Namespace:  req.Pipeline.Namespace,
			Name:       req.Pipeline.Name,
			UID:        req.Pipeline.UID,
		},
		Severity:            SeverityInfo,
		Message:             fmt.Sprintf("promote %s to %s", req.Version, env),
		Reason:              Reason,
		Metadata:            metadata,
		ReportingController: ReportingController,
	}
}
