package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// ErrFinished is returned when the event was already finished.
var ErrFinished = errors.New("lifecycle event already finished")

// ClaimWindow is how recently a controller must have claimed a Lifecycle
// for it to count as handled (tugboat doctor, the Lifecycle's Ready
// condition): a controller claims it at least every ClaimWindow/3.
const ClaimWindow = 15 * time.Minute

// Whoami returns the user name the API server authenticates c as (a
// SelfSubjectReview).
func Whoami(ctx context.Context, c client.Client) (string, error) {
	r := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, r); err != nil {
		return "", fmt.Errorf("asking the API server who you are (SelfSubjectReview): %w", err)
	}
	if r.Status.UserInfo.Username == "" {
		return "", errors.New("the API server did not say who you are (SelfSubjectReview returned no user name)")
	}
	return r.Status.UserInfo.Username, nil
}

// Finish marks LifecycleEvent namespace/name Done or Error with message,
// in the name of the user the API server authenticates c as. An event
// already finished is left as it is (ErrFinished, saying how and by
// whom). The API server's refusal (no RBAC on lifecycleevents/status, the
// policy tugboat-lifecycles) is returned as it said it.
func Finish(ctx context.Context, c client.Client, namespace, name string, phase tugboatv1alpha1.LifecycleEventPhase, message string) (*tugboatv1alpha1.LifecycleEvent, error) {
	if phase != tugboatv1alpha1.EventDone && phase != tugboatv1alpha1.EventError {
		return nil, fmt.Errorf("phase must be Done or Error, not %q", phase)
	}
	if len(message) > tugboatv1alpha1.MaxStepMessageLength {
		return nil, fmt.Errorf("message holds %d bytes; at most %d are allowed", len(message), tugboatv1alpha1.MaxStepMessageLength)
	}
	user, err := Whoami(ctx, c)
	if err != nil {
		return nil, err
	}
	ev := &tugboatv1alpha1.LifecycleEvent{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ev); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("lifecycleevent %s/%s not found: %w", namespace, name, err)
		}
		return nil, err
	}
	if p := ev.Phase(); p.Finished() {
		return ev, fmt.Errorf("%w: lifecycleevent %s/%s is %s%s", ErrFinished, namespace, name, p, byWhom(ev))
	}
	orig := ev.DeepCopy()
	now := metav1.Now()
	ev.Status = tugboatv1alpha1.LifecycleEventStatus{Phase: phase, Message: message, FinishedBy: user, FinishedAt: &now}
	if err := c.Status().Patch(ctx, ev, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, err
	}
	return ev, nil
}

func byWhom(ev *tugboatv1alpha1.LifecycleEvent) string {
	s := ""
	if ev.Status.FinishedBy != "" {
		s = " (by " + ev.Status.FinishedBy + ")"
	}
	if ev.Status.Message != "" {
		s += ": " + ev.Status.Message
	}
	return s
}

// Claim records that the user c authenticates as handles Lifecycle
// namespace/name now (status.claimedBy and status.lastClaimedAt). A step
// controller calls it when it starts and then at least every
// ClaimWindow/3.
func Claim(ctx context.Context, c client.Client, namespace, name string) (*tugboatv1alpha1.Lifecycle, error) {
	user, err := Whoami(ctx, c)
	if err != nil {
		return nil, err
	}
	lc := &tugboatv1alpha1.Lifecycle{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, lc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("lifecycle %s/%s not found: %w", namespace, name, err)
		}
		return nil, err
	}
	orig := lc.DeepCopy()
	now := metav1.Now()
	lc.Status.ClaimedBy, lc.Status.LastClaimedAt = user, &now
	if err := c.Status().Patch(ctx, lc, client.MergeFrom(orig)); err != nil {
		return nil, err
	}
	return lc, nil
}

// Claimed reports whether lc was claimed within ClaimWindow of now.
func Claimed(lc *tugboatv1alpha1.Lifecycle, now time.Time) bool {
	t := lc.Status.LastClaimedAt
	return t != nil && now.Sub(t.Time) <= ClaimWindow
}
