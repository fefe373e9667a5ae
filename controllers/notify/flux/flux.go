// Package flux is the flux notifier: it sends each notice as Flux events
// (event.toolkit.fluxcd.io/v1beta1 Event, through fluxcd/pkg/runtime/events)
// to notification-controller's event endpoint, so existing Flux Alerts and
// Providers fan them out (Teams, Discord, PagerDuty, ...).
//
// notification-controller routes an event only to Alerts whose eventSources
// select its involvedObject's kind (an enum of Flux kinds), name and
// namespace, and keeps only metadata keys prefixed with the involved
// object's API group. The events are therefore about HelmReleases
// (helm.toolkit.fluxcd.io/v2), one per distinct HelmRelease among the
// notice's targets:
//
//   - a target whose Pipeline entry names a Flux HelmRelease: that
//     HelmRelease (its namespace defaults to the target's);
//   - a plain Helm release: a HelmRelease named like the release, in the
//     release's namespace (nothing is looked up, so it need not exist, as
//     long as the Alert does not select by matchLabels);
//   - a notice without targets (a hold): a HelmRelease named like the
//     Pipeline's release (else the Pipeline), in the Pipeline's namespace.
//
// Metadata keys carry the helm.toolkit.fluxcd.io/ prefix; severity is
// error for a failed promotion and a failed or degraded deployment, else
// info; the reason is the notice's event (PromotionSucceeded, ...); the
// reportingController is tugboat-hub. docs/notifiers.md shows the Alert.
package flux

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strings"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"tugboat.dev/tugboat/controllers/notify"
)

const (
	// ReportingController is the events' reportingController.
	ReportingController = "tugboat-hub"
	// Group is the API group of the involved objects, and so the prefix of
	// every metadata key.
	Group = "helm.toolkit.fluxcd.io"
	// APIVersion and Kind are the involved objects' (Flux HelmRelease).
	APIVersion = Group + "/v2"
	Kind       = "HelmRelease"
	// MaxMessage is the longest message the Event API allows, in
	// characters.
	MaxMessage = 39000
)

// Options are a flux notifier's resolved settings.
type Options struct {
	// Address is notification-controller's event endpoint (the notifier's
	// spec.flux.address, else the hub's default). Defaults to
	// DefaultAddress.
	Address string
	// HTTPClient sends the events. Defaults to a client with
	// DefaultTimeout.
	HTTPClient *http.Client
	// Log receives the Recorder's own logging.
	Log logr.Logger
}

// Notifier sends notices as Flux events.
type Notifier struct {
	sender *Sender
}

var _ notify.Notifier = (*Notifier)(nil)

// New returns a flux notifier. A bad address is a *notify.PermanentError.
func New(opts Options) (*Notifier, error) {
	if opts.Address == "" {
		opts.Address = DefaultAddress
	}
	s, err := NewSender(opts.Address, ReportingController, opts.HTTPClient, opts.Log)
	if err != nil {
		return nil, err
	}
	return &Notifier{sender: s}, nil
}

// Notify sends Events(n), one after the other. thread is ignored. A
// retryable failure stops it: a retry sends every event again, and
// notification-controller answers 429 to those it already accepted (each
// carries the notice's ID as its token), which counts as delivered. When
// only permanent failures remain, they are returned as one
// *notify.PermanentError.
func (f *Notifier) Notify(ctx context.Context, n notify.Notice, _ string) (notify.Delivered, error) {
	var permanent []error
	for _, e := range Events(n) {
		_, err := f.sender.Send(ctx, e)
		switch {
		case err == nil:
		case notify.IsPermanent(err):
			permanent = append(permanent, err)
		default:
			return notify.Delivered{}, err
		}
	}
	if len(permanent) > 0 {
		return notify.Delivered{}, notify.Permanent(errors.Join(permanent...))
	}
	return notify.Delivered{}, nil
}

// Events are the Flux events for n: one per distinct involved HelmRelease
// (see the package doc). Timestamp, reportingController and
// reportingInstance are left to the Recorder.
func Events(n notify.Notice) []eventv1.Event {
	type group struct {
		obj     corev1.ObjectReference
		targets []notify.Target
	}
	var groups []*group
	byObj := map[string]*group{}
	for _, t := range n.Targets {
		obj := involved(t.Namespace, t.Release)
		if hr := t.HelmRelease; hr != nil && hr.Name != "" {
			ns := hr.Namespace
			if ns == "" {
				ns = t.Namespace
			}
			obj = involved(ns, hr.Name)
		}
		key := obj.Namespace + "/" + obj.Name
		g, ok := byObj[key]
		if !ok {
			g = &group{obj: obj}
			byObj[key] = g
			groups = append(groups, g)
		}
		g.targets = append(g.targets, t)
	}
	if len(groups) == 0 {
		name := n.Release
		if name == "" {
			name = n.Pipeline
		}
		groups = append(groups, &group{obj: involved(n.Namespace, name)})
	}

	severity := eventv1.EventSeverityInfo
	if notify.IsFailure(n) {
		severity = eventv1.EventSeverityError
	}
	message := notify.Truncate(notify.Text(n), MaxMessage)
	out := make([]eventv1.Event, 0, len(groups))
	for _, g := range groups {
		out = append(out, eventv1.Event{
			InvolvedObject: g.obj,
			Severity:       severity,
			Message:        message,
			Reason:         string(n.Event),
			Metadata:       metadata(n, g.targets),
		})
	}
	return out
}

func involved(namespace, name string) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: APIVersion, Kind: Kind, Namespace: namespace, Name: name}
}

// metadata is the event's metadata, keys prefixed with Group.
func metadata(n notify.Notice, targets []notify.Target) map[string]string {
	m := map[string]string{
		eventv1.MetaTokenKey: notify.ID(n),
		"event":              string(n.Event),
		"pipeline":           n.Namespace + "/" + n.Pipeline,
	}
	set := func(k, v string) {
		if v = notify.OneLine(v); v != "" {
			m[k] = v
		}
	}
	if p := n.Promotion; p != nil {
		set(eventv1.MetaRevisionKey, p.Version)
		set("promotion", p.Name)
		set("from", p.From)
		set("environment", p.To)
		set("phase", string(p.Phase))
		set("url", p.URL)
		set("approvedBy", p.ApprovedBy)
		set("rejectedBy", p.RejectedBy)
	}
	if h := n.Hold; h != nil {
		set(eventv1.MetaRevisionKey, h.Version)
		set("environment", h.Environment)
	}
	if d := n.Deployment; d != nil {
		set(eventv1.MetaRevisionKey, d.ChartVersion)
		set("environment", d.Environment)
		set("health", string(d.Health))
	}
	var names []string
	for _, t := range targets {
		names = append(names, notify.TargetName(t))
	}
	sort.Strings(names)
	set("targets", strings.Join(names, ","))

	out := make(map[string]string, len(m))
	for k, v := range m {
		out[Group+"/"+k] = v
	}
	return out
}
