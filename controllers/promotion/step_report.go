package promotion

// Reports of webhook steps: a receiver that answered a step's call 202
// Accepted reports the result later through the CI API (webhook/pipelineapi,
// POST .../steps), which calls ReportStep. The report finishes the
// attempt's LifecycleEvent, written by the hub's ServiceAccount (the policy
// tugboat-lifecycles lets the hub write status.finishedBy: the user the API
// server authenticated, the hub) with the verified credential's name in its
// message; the Promotion reconciler, which owns the event, completes the
// step from it. The event holds the result, so a hub restart neither loses
// nor repeats it.

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/lifecycle"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// MaxReportMessage bounds a report's message, in bytes.
const MaxReportMessage = 512

var (
	// ErrStaleDelivery: the report names a delivery that is not the step's
	// current attempt's (HTTP 409).
	ErrStaleDelivery = errors.New("stale delivery")
	// ErrNotAwaitingReport: the step does not wait for a report (HTTP 409):
	// it is not running, its attempt did not answer 202, or it was reported
	// or timed out already.
	ErrNotAwaitingReport = errors.New("step not waiting for a report")
)

// StepReport is the result of a webhook step's attempt, reported by the
// party that answered its call 202.
type StepReport struct {
	// Namespace, Promotion and Step name the step; the Promotion must be
	// of Pipeline (the one whose credentials authenticated the report).
	Namespace, Promotion, Step string
	// Delivery is the attempt's X-Tugboat-Delivery id.
	Delivery string
	// Succeeded is the result; Message says why (at most MaxReportMessage
	// bytes).
	Succeeded bool
	Message   string
	// Reporter names the credential that authenticated the report, as the
	// CI API verified it; never a name from the body.
	Reporter string
	// KeySecret is the Secret whose key authenticated the report when it
	// is a webhook step's signing key (the step's webhook.secretRef must
	// name it); empty when the Pipeline's request credential did.
	KeySecret string
}

// ReportStep records r, a report on a webhook step of a Promotion of p,
// by finishing the LifecycleEvent of the step's current attempt with c
// (the hub's client). It returns the finished event. Errors: a
// request.NotFoundError (no such Promotion of p, or no such webhook step),
// request.ErrNotAllowed (a step key that is not this step's),
// ErrStaleDelivery, ErrNotAwaitingReport.
func ReportStep(ctx context.Context, c client.Client, reader client.Reader, p *tugboatv1alpha1.Pipeline, r StepReport) (*tugboatv1alpha1.LifecycleEvent, error) {
	if len(r.Message) > MaxReportMessage {
		return nil, &request.InvalidError{Field: "message", Detail: fmt.Sprintf("holds %d bytes; at most %d are allowed", len(r.Message), MaxReportMessage)}
	}
	pr, err := request.GetPromotion(ctx, reader, r.Namespace, r.Promotion)
	if err == nil && pr.Spec.Pipeline != p.Name {
		// Another Pipeline's Promotion: its credentials do not cover it.
		err = &request.NotFoundError{Kind: "promotion", Namespace: r.Namespace, Name: r.Promotion}
	}
	if err != nil {
		return nil, err
	}
	var st *tugboatv1alpha1.StepStatus
	for i := range pr.Status.Steps {
		if s := &pr.Status.Steps[i]; s.Name == r.Step && s.Type == tugboatv1alpha1.StepWebhook {
			st = s
		}
	}
	if st == nil {
		return nil, &request.NotFoundError{Kind: "webhook step", Namespace: r.Namespace, Name: r.Promotion + "/" + r.Step}
	}
	var spec *tugboatv1alpha1.Step
	if idx := pipeline.EnvironmentIndex(p, pr.Spec.To); idx >= 0 {
		spec = stepSpec(&p.Spec.Environments[idx], st)
	}
	signed := spec != nil && spec.Webhook != nil && spec.Webhook.SecretRef != nil && spec.Webhook.SecretRef.Name != ""
	switch {
	case r.KeySecret != "" && (!signed || spec.Webhook.SecretRef.Name != r.KeySecret):
		return nil, fmt.Errorf("%w: the key of Secret %s does not sign step %s of environment %s: report with that step's key",
			request.ErrNotAllowed, r.KeySecret, r.Step, pr.Spec.To)
	case r.KeySecret == "" && signed:
		// The CI that asks for promotions must not pass the checks of
		// them: a signed step is reported by the key holder only.
		return nil, fmt.Errorf("%w: step %s of environment %s is signed with the key of Secret %s: only that key reports it (the Pipeline's credential reports unsigned webhook steps only)",
			request.ErrNotAllowed, r.Step, pr.Spec.To, spec.Webhook.SecretRef.Name)
	}
	if st.Phase != tugboatv1alpha1.StepRunning || st.Attempts < 1 {
		return nil, fmt.Errorf("%w: step %s of promotion %s is %s%s", ErrNotAwaitingReport, r.Step, r.Promotion, st.Phase, suffix(st.Message))
	}
	if current := DeliveryID(pr, st.Name, st.Attempts); r.Delivery != current {
		for a := st.Attempts - 1; a >= 1; a-- {
			if DeliveryID(pr, st.Name, a) == r.Delivery {
				return nil, fmt.Errorf("%w: delivery %s is attempt %d's; step %s is at attempt %d (delivery %s)", ErrStaleDelivery, r.Delivery, a, r.Step, st.Attempts, current)
			}
		}
		return nil, fmt.Errorf("%w: delivery %s is not the current attempt's of step %s (attempt %d, delivery %s)", ErrStaleDelivery, r.Delivery, r.Step, st.Attempts, current)
	}
	name := EventName(pr.Name, st.Name, st.Attempts)
	ev := &tugboatv1alpha1.LifecycleEvent{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: pr.Namespace, Name: name}, ev); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: attempt %d of step %s did not answer 202 Accepted (or the hub has not recorded it yet)", ErrNotAwaitingReport, st.Attempts, r.Step)
		}
		return nil, err
	}
	if !ownedBy(ev, pr) || ev.Spec.Lifecycle != WebhookLifecycle {
		return nil, fmt.Errorf("%w: LifecycleEvent %s was not published for this attempt", ErrNotAwaitingReport, name)
	}
	phase, result := tugboatv1alpha1.EventError, "failed"
	if r.Succeeded {
		phase, result = tugboatv1alpha1.EventDone, "succeeded"
	}
	msg := clip.String(fmt.Sprintf("%s reported %s%s", r.Reporter, result, suffix(r.Message)), tugboatv1alpha1.MaxStepMessageLength)
	ev, err = lifecycle.Finish(ctx, c, pr.Namespace, name, phase, msg)
	switch {
	case errors.Is(err, lifecycle.ErrFinished):
		return nil, fmt.Errorf("%w: %w", ErrNotAwaitingReport, err)
	case apierrors.IsConflict(err):
		return nil, fmt.Errorf("%w: LifecycleEvent %s changed as it was reported (timed out?); read the step's status", ErrNotAwaitingReport, name)
	case err != nil:
		return nil, err
	}
	return ev, nil
}
