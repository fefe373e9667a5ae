package notification

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

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

// Promote sends the Events (NewEvents) through fluxcd/pkg/runtime/events
// (see flux.Sender), one after the other. 2xx (notification-controller
// answers 202) is success, and so is 429 (a repeat of an event it already
// accepted: a retry after a partial failure resends every event, and those
// already delivered are not dispatched twice). Connection errors, timeouts,
// 408 and 5xx are retryable; other answers are terminal with the start of
// the response body; so is an address that is not an absolute http(s) URL.
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
	events := NewEvents(req)
	var sent, repeated []string
	for _, event := range events {
		ectx, cancel := context.WithTimeout(ctx, Timeout)
		status, err := sender.Send(ectx, event)
		cancel()
		switch {
		case notify.IsPermanent(err):
			return strategy.Result{}, strategy.Terminal(err)
		case err != nil:
			return strategy.Result{}, err
		case status == http.StatusTooManyRequests:
			repeated = append(repeated, involved(event))
		default:
			sent = append(sent, involved(event))
		}
	}
	msg := fmt.Sprintf("Flux event %q about %s", events[0].Message, strings.Join(append(sent, repeated...), ", "))
	switch {
	case len(sent) == 0:
		msg += " already delivered to " + sender.Address() + " (it rate-limited the repeat)"
	case len(repeated) > 0:
		msg = "sent " + msg + " to " + sender.Address() + fmt.Sprintf(" (%d already delivered)", len(repeated))
	default:
		msg = "sent " + msg + " to " + sender.Address()
	}
	return strategy.Result{Message: msg}, nil
}

func involved(e eventv1.Event) string {
	return e.InvolvedObject.Kind + " " + e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
}

// NewEvents are the Flux events announcing req, about Flux HelmReleases
// (helm.toolkit.fluxcd.io/v2), the kind notification-controller's Alerts
// can select, chosen as the flux notifier chooses them: one per distinct
// HelmRelease among the destination's targets (the target's helmRelease,
// else a HelmRelease named like the release, in the release's namespace),
// or, for an environment without targets, one named like the Pipeline's
// release (else the Pipeline) in the Pipeline's namespace. Metadata keys
// carry the helm.toolkit.fluxcd.io/ prefix, which notification-controller
// keeps (and strips). Timestamps and reportingInstance are left to the
// event recorder, which sets them when it sends.
func NewEvents(req strategy.Request) []eventv1.Event {
	env := req.Promotion.Spec.To
	if env == "" && req.Environment != nil {
		env = req.Environment.Name
	}
	type group struct {
		obj     corev1.ObjectReference
		targets []string
	}
	var groups []*group
	byObj := map[string]*group{}
	for _, t := range req.Targets {
		obj := helmRelease(t.Namespace, t.Release)
		if hr := t.HelmRelease; hr != nil && hr.Name != "" {
			obj = helmRelease(cmp.Or(hr.Namespace, t.Namespace), hr.Name)
		}
		key := obj.Namespace + "/" + obj.Name
		g := byObj[key]
		if g == nil {
			g = &group{obj: obj}
			byObj[key] = g
			groups = append(groups, g)
		}
		g.targets = append(g.targets, t.SpokeName+"/"+t.Namespace+"/"+t.Release)
	}
	if len(groups) == 0 {
		groups = append(groups, &group{obj: helmRelease(req.Pipeline.Namespace, cmp.Or(req.Pipeline.Spec.Release, req.Pipeline.Name))})
	}
	token := string(req.Promotion.UID)
	if token == "" {
		token = req.Promotion.Namespace + "/" + req.Promotion.Name
	}
	out := make([]eventv1.Event, 0, len(groups))
	for _, g := range groups {
		meta := map[string]string{
			"environment":           env,
			"version":               req.Version,
			"promotion":             req.Promotion.Name,
			"pipeline":              req.Pipeline.Namespace + "/" + req.Pipeline.Name,
			eventv1.MetaRevisionKey: req.Version,
			eventv1.MetaTokenKey:    token,
		}
		if req.Promotion.Spec.From != "" {
			meta["from"] = req.Promotion.Spec.From
		}
		if len(g.targets) > 0 {
			meta["targets"] = strings.Join(g.targets, ",")
		}
		metadata := make(map[string]string, len(meta))
		for k, v := range meta {
			metadata[flux.Group+"/"+k] = v
		}
		out = append(out, eventv1.Event{
			InvolvedObject:      g.obj,
			Severity:            SeverityInfo,
			Message:             fmt.Sprintf("promote %s to %s", req.Version, env),
			Reason:              Reason,
			Metadata:            metadata,
			ReportingController: ReportingController,
		})
	}
	return out
}

func helmRelease(namespace, name string) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: flux.APIVersion, Kind: flux.Kind, Namespace: namespace, Name: name}
}
