package deliver

import (
	"context"
	"errors"
	"math"
	"net/url"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
)

// outcome is what one pass over an object's notices did.
type outcome struct {
	// changed is true when a delivery record changed and must be written.
	changed bool
	// requeue is the earliest time a pending notice is due again (0: none).
	requeue time.Duration
	// results are, per notifier, the last attempt of this pass: nil for a
	// delivery, else its error, for the Pipeline's status.notifiers.
	results map[string]error
}

func (o *outcome) result(notifier string, err error) {
	if o.results == nil {
		o.results = map[string]error{}
	}
	o.results[notifier] = err
}

func (o *outcome) after(d time.Duration) {
	if d > 0 && (o.requeue == 0 || d < o.requeue) {
		o.requeue = d
	}
}

// due reports whether st is due for an attempt now, and if not, when.
func (d *deliverer) due(st *tugboatv1alpha1.DeliveryState) (bool, time.Duration) {
	if st.Phase == tugboatv1alpha1.NotificationDelivered || st.Phase == tugboatv1alpha1.NotificationFailed {
		return false, 0
	}
	if st.Attempts == 0 || st.LastAttemptAt == nil {
		return true, 0
	}
	next := st.LastAttemptAt.Add(d.backoff(st.Attempts))
	if wait := next.Sub(d.now()); wait > 0 {
		return false, wait
	}
	return true, 0
}

func (d *deliverer) backoff(attempts int32) time.Duration {
	b := time.Duration(float64(d.opts.RetryBase) * math.Pow(2, float64(attempts-1)))
	if b > d.opts.RetryMax || b <= 0 {
		b = d.opts.RetryMax
	}
	return b
}

// attempt delivers notice through the notifier spec names (built by the
// Builder) unless st says it is not due, and updates st. It returns the
// delivered Reference (for threads).
func (d *deliverer) attempt(ctx context.Context, p *tugboatv1alpha1.Pipeline, spec *tugboatv1alpha1.Notifier,
	notice notify.Notice, thread string, st *tugboatv1alpha1.DeliveryState, out *outcome) string {
	ok, wait := d.due(st)
	if !ok {
		out.after(wait)
		return ""
	}
	now := metav1.NewTime(d.now())
	st.Attempts++
	st.LastAttemptAt = &now
	out.changed = true
	event := string(notice.Event)

	var ref string
	n, err := d.builder.Build(ctx, p, spec)
	if err == nil {
		sendCtx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
		var res notify.Delivered
		res, err = n.Notify(sendCtx, notice, thread)
		cancel()
		ref = res.Reference
	}
	logger := log.FromContext(ctx).WithValues("pipeline", p.Namespace+"/"+p.Name, "notifier", spec.Name, "event", event)
	if err == nil {
		st.Phase, st.DeliveredAt, st.Error = tugboatv1alpha1.NotificationDelivered, &now, ""
		notificationsTotal.WithLabelValues(spec.Name, event, "delivered").Inc()
		out.result(spec.Name, nil)
		logger.V(1).Info("notice delivered", "attempts", st.Attempts)
		return ref
	}
	msg := clean(err.Error())
	st.Error = clip.String(msg, 1024)
	out.result(spec.Name, errors.New(clip.String(msg, 1024)))
	if notify.IsPermanent(err) || st.Attempts >= d.opts.MaxAttempts {
		st.Phase = tugboatv1alpha1.NotificationFailed
		notificationsTotal.WithLabelValues(spec.Name, event, "failed").Inc()
		logger.Info("notice not delivered; giving up", "attempts", st.Attempts, "error", msg)
		return ""
	}
	st.Phase = tugboatv1alpha1.NotificationPending
	notificationsTotal.WithLabelValues(spec.Name, event, "retry").Inc()
	wait = d.backoff(st.Attempts)
	if ra, ok := notify.RetryAfter(err); ok && ra > wait {
		wait = ra
		// Record the service's delay, so the next attempt honors it.
		shifted := metav1.NewTime(now.Add(ra - d.backoff(st.Attempts)))
		st.LastAttemptAt = &shifted
	}
	logger.Info("notice not delivered; retrying", "attempts", st.Attempts, "in", wait, "error", msg)
	out.after(wait)
	return ""
}

// skip records a notice that is too old to send as Delivered-by-skip: it
// marks the record Failed with an explanation, without sending.
func (d *deliverer) skip(spec *tugboatv1alpha1.Notifier, event tugboatv1alpha1.NotifyEvent, st *tugboatv1alpha1.DeliveryState, out *outcome) {
	now := metav1.NewTime(d.now())
	st.Phase, st.LastAttemptAt = tugboatv1alpha1.NotificationFailed, &now
	st.Error = "not sent: the event ended more than " + d.opts.MaxAge.String() + " before the notifier saw it"
	notificationsTotal.WithLabelValues(spec.Name, string(event), "skipped").Inc()
	out.changed = true
}

var secretish = regexp.MustCompile(`(?i)(https?://[^\s"']+)|(xox[a-z]-[A-Za-z0-9-]+)`)

// clean removes URLs (webhook addresses carry their secret in the path)
// and Slack tokens from an error message before it reaches status or logs.
func clean(s string) string {
	return secretish.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(strings.ToLower(m), "xox") {
			return "[token]"
		}
		if u, err := url.Parse(m); err == nil && u.Host != "" {
			return u.Scheme + "://" + u.Host + "/[redacted]"
		}
		return "[redacted]"
	})
}
