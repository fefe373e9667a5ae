package promotion

// External lifecycle steps: each attempt is a LifecycleEvent, published by
// the hub in the Pipeline's namespace and owned by the Promotion (so it is
// deleted with it), which the Lifecycle's controller finishes, Done or
// Error, through lifecycleevents/status. The admission policy
// tugboat-lifecycles makes sure status.finishedBy is the user the API
// server authenticated, and refuses any change to a finished event; at the
// event's deadline the hub marks it TimedOut.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// +kubebuilder:rbac:groups=tugboat.dev,resources=lifecycles,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=lifecycleevents,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=tugboat.dev,resources=lifecycleevents/status,verbs=get;update;patch

// EventName is the deterministic name of the LifecycleEvent of attempt
// attempt of step step of Promotion promotion:
// "<promotion>-<step>-<attempt>", with the Promotion's name shortened and
// a hash of the whole added when that would be longer than a name may be.
// A hub that restarts in the middle of a step finds the same event, so it
// neither publishes a second one nor loses the first one's result.
func EventName(promotion, step string, attempt int32) string {
	suffix := "-" + step + "-" + strconv.Itoa(int(attempt))
	name := promotion + suffix
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	h := "-" + hex.EncodeToString(sum[:])[:10]
	return strings.TrimRight(promotion[:validation.DNS1123SubdomainMaxLength-len(suffix)-len(h)], ".-") + h + suffix
}

// externalAttempt publishes the LifecycleEvent of st's current attempt,
// unless it exists, and reads how it stands.
func (r *Reconciler) externalAttempt(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, spec *tugboatv1alpha1.Step,
	st *tugboatv1alpha1.StepStatus) (attemptResult, error) {
	name := EventName(pr.Name, st.Name, st.Attempts)
	st.LifecycleEvent = name
	ev := &tugboatv1alpha1.LifecycleEvent{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: pr.Namespace, Name: name}, ev)
	if apierrors.IsNotFound(err) {
		var out *attemptResult
		if ev, out, err = r.publishEvent(ctx, pr, p, spec, st, name); out != nil || err != nil {
			return ptr.Deref(out, attemptResult{}), err
		}
	} else if err != nil {
		return attemptResult{}, err
	}
	if !ownedBy(ev, pr) {
		return attemptResult{done: true, message: fmt.Sprintf("LifecycleEvent %s exists but was not published for this promotion (its owner is not promotion %s); delete it to retry", name, pr.Name)}, nil
	}
	lc := fmt.Sprintf("lifecycle %s (event key %s)", ev.Spec.Lifecycle, ev.Spec.EventKey)
	by := func() string { return orDefault(ev.Status.FinishedBy, "an unknown user") + suffix(ev.Status.Message) }
	switch ev.Phase() {
	case tugboatv1alpha1.EventDone:
		return attemptResult{done: true, ok: true, message: fmt.Sprintf("LifecycleEvent %s done by %s", name, by())}, nil
	case tugboatv1alpha1.EventError:
		return attemptResult{done: true, message: fmt.Sprintf("LifecycleEvent %s errored, by %s", name, by())}, nil
	case tugboatv1alpha1.EventTimedOut:
		return attemptResult{done: true, timedOut: true, message: timedOutMessage(ev, lc)}, nil
	}
	phase, left, err := r.settleEvent(ctx, ev, "no one finished the event by its deadline "+ev.Spec.Deadline.UTC().Format(time.RFC3339)+": is the controller of "+lc+" running?")
	switch {
	case err != nil:
		return attemptResult{}, err
	case phase == "":
		return attemptResult{wait: "LifecycleEvent " + name + " changed as it timed out; reading it again", requeue: 100 * time.Millisecond}, nil
	case phase == tugboatv1alpha1.EventTimedOut:
		return attemptResult{done: true, timedOut: true, message: timedOutMessage(ev, lc)}, nil
	}
	return attemptResult{
		wait: fmt.Sprintf("waiting for the controller of %s to finish LifecycleEvent %s (tugboat lifecycle done|error %s -n %s) by %s",
			lc, name, name, pr.Namespace, ev.Spec.Deadline.UTC().Format(time.RFC3339)),
		requeue: left,
	}, nil
}

// settleEvent reads how the unfinished event ev stands: Pending, with the
// time left until its deadline; or, once the deadline passed, TimedOut,
// marked so with note as its message. An empty phase means ev changed as
// the hub marked it (its controller finished it in the meantime: the
// optimistic lock tells): read it again.
func (r *Reconciler) settleEvent(ctx context.Context, ev *tugboatv1alpha1.LifecycleEvent, note string) (tugboatv1alpha1.LifecycleEventPhase, time.Duration, error) {
	now := r.Now()
	if left := ev.Spec.Deadline.Sub(now); left > 0 {
		return tugboatv1alpha1.EventPending, left, nil
	}
	orig := ev.DeepCopy()
	at := metav1.NewTime(now)
	ev.Status.Phase, ev.Status.FinishedAt = tugboatv1alpha1.EventTimedOut, &at
	ev.Status.Message = clip.String(note, tugboatv1alpha1.MaxStepMessageLength)
	if err := r.Client.Status().Patch(ctx, ev, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return "", 0, nil
		}
		return "", 0, err
	}
	return tugboatv1alpha1.EventTimedOut, 0, nil
}

func timedOutMessage(ev *tugboatv1alpha1.LifecycleEvent, lc string) string {
	return fmt.Sprintf("LifecycleEvent %s timed out: no one finished it by %s (is the controller of %s running? tugboat doctor)",
		ev.Name, ev.Spec.Deadline.UTC().Format(time.RFC3339), lc)
}

// publishEvent creates the LifecycleEvent name of st's current attempt,
// with the Lifecycle's event key and the step's deadline. out is set when
// the attempt ends here (the Lifecycle does not exist). An event that
// exists already (the cache had not seen it) is read from the API server.
func (r *Reconciler) publishEvent(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, spec *tugboatv1alpha1.Step,
	st *tugboatv1alpha1.StepStatus, name string) (*tugboatv1alpha1.LifecycleEvent, *attemptResult, error) {
	lc := &tugboatv1alpha1.Lifecycle{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: pr.Namespace, Name: spec.External.Lifecycle}, lc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &attemptResult{done: true, message: fmt.Sprintf("lifecycle %s not found in namespace %s: create the Lifecycle its controller handles (docs/lifecycle.md)",
				spec.External.Lifecycle, pr.Namespace)}, nil
		}
		return nil, nil, err
	}
	deadline := deadlineOf(st.StartedAt, r.Now(), stepTimeout(spec, lc.Spec.Timeout))
	count, targets, err := r.eventTargets(ctx, pr, p)
	if err != nil {
		return nil, nil, err
	}
	ev := newEvent(pr, p, st, name, lc.Name, lc.Spec.EventKey, deadline, count, targets)
	ev, err = r.createEvent(ctx, ev)
	return ev, nil, err
}

// newEvent returns the LifecycleEvent name of st's current attempt, owned
// by pr, for lifecycle with eventKey, due by deadline, naming targets of
// the count the Promotion has.
func newEvent(pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, st *tugboatv1alpha1.StepStatus, name, lifecycle, eventKey string,
	deadline metav1.Time, count int, targets []tugboatv1alpha1.EventTarget) *tugboatv1alpha1.LifecycleEvent {
	ev := &tugboatv1alpha1.LifecycleEvent{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pr.Namespace, Name: name,
			Labels: map[string]string{tugboatv1alpha1.LabelEventKey: eventKey, tugboatv1alpha1.LabelLifecycle: lifecycle},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: tugboatv1alpha1.GroupVersion.String(), Kind: "Promotion", Name: pr.Name, UID: pr.UID, Controller: ptr.To(true),
			}},
		},
		Spec: tugboatv1alpha1.LifecycleEventSpec{
			Lifecycle: lifecycle, EventKey: eventKey, Promotion: pr.Name, Pipeline: p.Name, Environment: pr.Spec.To,
			Version: pr.Spec.Version, Step: st.Name, Stage: st.Stage, Attempt: st.Attempts,
			TargetCount: count32(count), Deadline: deadline, Targets: targets,
		},
	}
	if len(validation.IsValidLabelValue(pr.Name)) == 0 {
		ev.Labels[tugboatv1alpha1.LabelPromotion] = pr.Name
	}
	return ev
}

// createEvent creates ev. An event that exists already (the cache had not
// seen it) is read from the API server.
func (r *Reconciler) createEvent(ctx context.Context, ev *tugboatv1alpha1.LifecycleEvent) (*tugboatv1alpha1.LifecycleEvent, error) {
	err := r.Client.Create(ctx, ev)
	if apierrors.IsAlreadyExists(err) {
		key := client.ObjectKeyFromObject(ev)
		ev = &tugboatv1alpha1.LifecycleEvent{}
		err = r.APIReader.Get(ctx, key, ev)
	}
	if err != nil {
		return nil, err
	}
	return ev, nil
}

// deadlineOf is when an attempt started at start (now when nil) and
// bounded by timeout ends. The API keeps seconds: the deadline is rounded
// up, never shortening the timeout.
func deadlineOf(start *metav1.Time, now time.Time, timeout time.Duration) metav1.Time {
	if start != nil {
		now = start.Time
	}
	return metav1.NewTime(now.Add(timeout).Truncate(time.Second).Add(time.Second))
}

// ownedBy reports whether pr owns ev.
func ownedBy(ev *tugboatv1alpha1.LifecycleEvent, pr *tugboatv1alpha1.Promotion) bool {
	for _, o := range ev.OwnerReferences {
		if o.UID == pr.UID {
			return true
		}
	}
	return false
}
