package deliver

import (
	"context"
	"time"

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
	tugboatv1alpha1.EventPromotionRunning, tugboatv1alpha1.EventPromotionRollingBack, tugboatv1alpha1.EventPromotionSucceeded,
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
