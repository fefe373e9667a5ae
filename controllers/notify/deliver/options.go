package deliver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
)

// Options configure delivery.
type Options struct {
	// MaxAttempts gives up on a notice (Failed) after this many attempts.
	MaxAttempts int32
	// RetryBase and RetryMax shape the back-off between attempts.
	RetryBase, RetryMax time.Duration
	// Timeout bounds one delivery attempt.
	Timeout time.Duration
	// MaxAge: a notice about something that ended longer ago than this when
	// the notifier first sees it (a notifier added to a Pipeline with a long
	// history, a hub down for days) is recorded but not sent.
	MaxAge time.Duration
	// DashboardURL is the public address of the hub's read-only dashboard
	// (its base, ending in "/"), which shows DashboardNamespace: notices
	// about a Promotion of that namespace link to its page. Empty: no link.
	DashboardURL string
	// DashboardNamespace is the namespace the dashboard shows.
	DashboardNamespace string
}

// NewOptions returns the defaults.
func NewOptions() Options {
	return Options{MaxAttempts: 8, RetryBase: 2 * time.Second, RetryMax: 5 * time.Minute, Timeout: 20 * time.Second, MaxAge: time.Hour}
}

// Builder turns a Pipeline's notifier spec into a Notifier, reading the
// Secrets it names. An error wrapped with notify.Permanent (a missing
// Secret or key) fails the notice at once; any other error is retried.
type Builder interface {
	Build(ctx context.Context, p *tugboatv1alpha1.Pipeline, n *tugboatv1alpha1.Notifier) (notify.Notifier, error)
}

// BuilderFunc adapts a function to Builder.
type BuilderFunc func(ctx context.Context, p *tugboatv1alpha1.Pipeline, n *tugboatv1alpha1.Notifier) (notify.Notifier, error)

// Build calls f.
func (f BuilderFunc) Build(ctx context.Context, p *tugboatv1alpha1.Pipeline, n *tugboatv1alpha1.Notifier) (notify.Notifier, error) {
	return f(ctx, p, n)
}

// DefaultEvents are the events a notifier that lists none is told about.
var defaultEvents = []tugboatv1alpha1.NotifyEvent{
	tugboatv1alpha1.EventPromotionCreated, tugboatv1alpha1.EventPromotionWaitingApproval, tugboatv1alpha1.EventPromotionPreviewChanged,
	tugboatv1alpha1.EventPromotionRunning, tugboatv1alpha1.EventPromotionWaveCompleted, tugboatv1alpha1.EventPromotionPaused,
	tugboatv1alpha1.EventPromotionResumed, tugboatv1alpha1.EventPromotionRollingBack, tugboatv1alpha1.EventPromotionSucceeded,
	tugboatv1alpha1.EventPromotionFailed, tugboatv1alpha1.EventPromotionAborted,
	tugboatv1alpha1.EventHoldStarted, tugboatv1alpha1.EventHoldReleased,
}

// wants reports whether notifier n selects event e.
func wants(n *tugboatv1alpha1.Notifier, e tugboatv1alpha1.NotifyEvent) bool {
	events := n.Events
	if len(events) == 0 {
		events = defaultEvents
	}
	for _, x := range events {
		if x == e {
			return true
		}
	}
	return false
}

// modeOf returns the notifier's mode: summary for email, instant for the
// others, unless set.
func modeOf(n *tugboatv1alpha1.Notifier) tugboatv1alpha1.NotifyMode {
	if n.Mode != "" {
		return n.Mode
	}
	if n.Type == tugboatv1alpha1.NotifierEmail {
		return tugboatv1alpha1.NotifySummary
	}
	return tugboatv1alpha1.NotifyInstant
}

// promotionPage is the address of pr's page on the dashboard, or "" when
// the dashboard's address is not known or it does not show pr's namespace.
func (o Options) promotionPage(pr *tugboatv1alpha1.Promotion) string {
	if o.DashboardURL == "" || o.DashboardNamespace != pr.Namespace {
		return ""
	}
	return strings.TrimSuffix(o.DashboardURL, "/") + "/promotions/" + url.PathEscape(pr.Name)
}

// MaxDashboardURL is the longest DashboardURL: with "promotions/" and a
// Promotion's name (at most 253 characters) a page's address stays within
// the 3,000 characters of a Slack button's url.
const MaxDashboardURL = 2048

// ValidateDashboardURL checks a dashboard's public address: an absolute
// http(s) URL without credentials, query or fragment, at most
// MaxDashboardURL long. Empty is valid (no links).
func ValidateDashboardURL(raw string) error {
	if raw == "" {
		return nil
	}
	if len(raw) > MaxDashboardURL {
		return fmt.Errorf("must be at most %d characters, got %d", MaxDashboardURL, len(raw))
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL: %w", err)
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("must be an http:// or https:// address, got scheme %q", clip.String(u.Scheme, 20))
	case u.Host == "":
		return errors.New("must name a host")
	case u.User != nil:
		return errors.New("must not carry credentials")
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(raw, "?") || strings.HasSuffix(raw, "#"):
		return errors.New("must not carry a query or fragment")
	}
	return nil
}
