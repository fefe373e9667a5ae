// Package notify defines what the hub tells people and the one small
// interface every notifier implements. The notifiers live in one package per
// kind (controllers/notify/slack, email, webhook, flux); the controller that
// decides what is due and records deliveries is controllers/notify/deliver.
//
// It is not a queue: what is due is derived from the Promotions, Pipelines
// and ReleaseHistories, and what was delivered is recorded in their status,
// so a hub restart neither loses nor repeats a notice.
package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Notice is one thing to tell people about: a promotion's event, a rollback
// hold, or a deployment on one of the pipeline's targets. Summary notices
// carry the whole Timeline.
type Notice struct {
	// Event is what happened.
	Event tugboatv1alpha1.NotifyEvent
	// Summary is true for a summary notice, sent once when a promotion or a
	// deployment completes; Timeline lists everything that happened.
	Summary bool
	// Time is when the event happened.
	Time time.Time

	// Namespace and Pipeline name the Pipeline; Release is its release.
	Namespace, Pipeline, Release string

	// Promotion is set for Promotion* events (and for summaries of one).
	Promotion *Promotion
	// Hold is set for Hold* events.
	Hold *Hold
	// Deployment is set for Deployment* events.
	Deployment *Deployment
	// Targets are the destination's targets of a promotion, or the one
	// target of a deployment, as last reported.
	Targets []Target
	// Timeline is every recorded step, oldest first (summary notices).
	Timeline []Step

	// Approval is set when the notice may carry Approve/Reject controls: the
	// promotion waits for approval. Notifiers that cannot take a decision
	// ignore it.
	Approval *ApprovalRequest
}

// Promotion describes the promotion a notice is about.
type Promotion struct {
	Name, From, To, Version string
	Phase                   tugboatv1alpha1.PromotionPhase
	// Message is the Ready condition's message: the reason of a failure.
	Message string
	// URL links to what the strategy produced (the pull request).
	URL string
	// Strategy is the strategy's type.
	Strategy tugboatv1alpha1.StrategyType
	// RequestedBy and Requester say who asked for it.
	RequestedBy tugboatv1alpha1.Requester
	Requester   string
	// Votes are the recorded approval decisions.
	Votes []tugboatv1alpha1.ApprovalVote
	// ApprovedBy and RejectedBy are the gate's outcome, once decided.
	ApprovedBy, RejectedBy string
	// ApprovalsRequired is how many approvals the destination requires (0:
	// none).
	ApprovalsRequired int
	// Preview is the one-line summary of the Promotion's preview (issue
	// 26: what it would change, never a secret), with how to see it all.
	Preview string
	// DashboardURL is the Promotion's page on the hub's dashboard, when the
	// hub knows the dashboard's public address (--dashboard-url).
	DashboardURL string
	// Rollout is the rollout's progress in one line, for a Promotion that
	// rolls out in waves ("wave 2/3 (wave-1), 3/10 succeeded, ...").
	Rollout string
	// Wave names the wave a PromotionWaveCompleted notice is about, with
	// its counts ("canary (1 of 3): 1 of 1 targets succeeded").
	Wave          string
	Created       time.Time
	Started, Done *time.Time
}

// Hold describes a rollback hold.
type Hold struct {
	Environment, Version, Message string
	Since                         time.Time
}

// Deployment describes a release on one target.
type Deployment struct {
	Spoke, Namespace, Release string
	Revision                  int32
	ChartVersion, AppVersion  string
	Status                    tugboatv1alpha1.ReleaseStatus
	Health                    tugboatv1alpha1.Health
	HealthReason              string
	Description               string
	Environment               string
}

// Target is one target as last reported.
type Target struct {
	Environment, Spoke, Namespace, Release string
	Version                                string
	Revision                               int32
	Health                                 tugboatv1alpha1.Health
	Done                                   bool
	Message                                string
	// HelmRelease is the target's Flux HelmRelease on the spoke, when the
	// Pipeline names one (its namespace defaults to Namespace). The flux
	// notifier reports on it.
	HelmRelease *tugboatv1alpha1.ObjectReference
}

// Step is one line of a timeline.
type Step struct {
	Time time.Time
	// Source is where it happened: "hub", or a target as spoke/namespace/release.
	Source string
	Text   string
}

// ApprovalRequest lets a notifier offer a decision: the Promotion's
// namespace and name identify it in the interaction the hub receives back.
type ApprovalRequest struct {
	Namespace, Pipeline, Promotion string
	// Notifier is the name of the notifier in the Pipeline's spec.notify,
	// so the hub knows which Secret signs the interaction: only that
	// notifier's signing secret authenticates a click.
	Notifier string
}

// Delivered is what a notifier reports after a successful delivery.
type Delivered struct {
	// Reference identifies what was posted, for a later notice about the
	// same promotion (the Slack channel and message timestamp). Empty when
	// the notifier needs none.
	Reference string
}

// Notifier delivers notices of one kind. Implementations are safe for
// concurrent use, and a Notify either delivers or returns an error: a
// *PermanentError when retrying cannot help, a *RetryAfterError when the
// service said when to come back, any other error to be retried with
// back-off.
type Notifier interface {
	// Notify delivers n. thread is the Reference of the first notice
	// delivered about the same promotion (empty for the first one), for
	// notifiers that thread or update messages.
	Notify(ctx context.Context, n Notice, thread string) (Delivered, error)
}

// PermanentError is a delivery failure that retrying cannot fix (a 4xx
// answer, a bad address, a missing key).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a *PermanentError.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Permanentf is Permanent(fmt.Errorf(...)).
func Permanentf(format string, args ...any) error { return Permanent(fmt.Errorf(format, args...)) }

// IsPermanent reports whether err is (or wraps) a *PermanentError.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// RetryAfterError is a delivery the service asked to retry after a delay
// (HTTP 429 with Retry-After).
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter returns how long err asks to wait, if it is a *RetryAfterError.
func RetryAfter(err error) (time.Duration, bool) {
	var r *RetryAfterError
	if errors.As(err, &r) {
		return r.After, true
	}
	return 0, false
}
