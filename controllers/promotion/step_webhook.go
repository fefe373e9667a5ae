package promotion

// Webhook lifecycle steps: each attempt is one JSON POST (StepRequest),
// signed with the agent wire protocol's scheme (api/wire, as the webhook
// notifier and strategy sign), through the hub's egress policy. A 2xx
// answer other than 202 passes the step; any other answer, a redirect
// (never followed), a refused destination or a network error fails the
// attempt with a clear message. The call is made within the reconcile; a
// hub that stops during it sends the attempt again with the same delivery
// id (X-Tugboat-Delivery), so a receiver can de-duplicate.
//
// 202 Accepted means "accepted, will report": the hub publishes a
// LifecycleEvent for the attempt (deterministic name, owned by the
// Promotion, lifecycle WebhookLifecycle) and the attempt waits, within the
// step's timeout, for the receiver (or CI) to report the result through the
// CI API (POST /v1/pipelines/{namespace}/{name}/steps, ReportStep), which
// finishes the event; at the deadline the hub marks it TimedOut, as for an
// external step. A reconcile that finds the attempt's event never calls
// the webhook again, so a hub restart between the 202 and the report
// neither repeats the call nor loses the report (the event keeps it).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/notify"
	notifywebhook "tugboat.dev/tugboat/controllers/notify/webhook"
)

// The webhook step's request: schema, headers and bounds.
const (
	// StepAPIVersion and StepKind identify the body's schema.
	StepAPIVersion = "lifecycle.tugboat.dev/v1"
	StepKind       = "StepRequest"
	// StepEvent is the X-Tugboat-Event header of a step's request.
	StepEvent = "LifecycleStep"
	// MaxWebhookStepCall bounds one call: the step's timeout, at most this.
	MaxWebhookStepCall = time.Minute
	// webhookExcerpt is how much of a refusal's body the message keeps.
	webhookExcerpt = 200
	// WebhookLifecycle is spec.lifecycle and spec.eventKey of the
	// LifecycleEvent of a webhook step's attempt that answered 202: no
	// Lifecycle object stands behind it; the CI API finishes it.
	WebhookLifecycle = "tugboat-webhook-report"
)

// StepRequest is the JSON body a webhook step POSTs (docs/lifecycle.md).
type StepRequest struct {
	// APIVersion is "lifecycle.tugboat.dev/v1"; Kind is "StepRequest".
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// ID identifies the attempt (also in X-Tugboat-Delivery): the same when
	// the hub sends the attempt again.
	ID string `json:"id"`
	// Namespace is the Pipeline's and the Promotion's.
	Namespace   string `json:"namespace"`
	Pipeline    string `json:"pipeline"`
	Promotion   string `json:"promotion"`
	Environment string `json:"environment"`
	Version     string `json:"version"`
	// Step, Stage and Attempt say which step this is.
	Step    string `json:"step"`
	Stage   string `json:"stage"`
	Attempt int32  `json:"attempt"`
	// Targets are the destination targets (at most 100); TargetCount
	// counts them all.
	Targets     []tugboatv1alpha1.EventTarget `json:"targets"`
	TargetCount int                           `json:"targetCount"`
}

// DeliveryID is the deterministic id of attempt of step of pr.
func DeliveryID(pr *tugboatv1alpha1.Promotion, step string, attempt int32) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", pr.UID, step, attempt))
	return hex.EncodeToString(sum[:16])
}

// webhookAttempt POSTs st's current attempt and judges the answer.
func (r *Reconciler) webhookAttempt(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, spec *tugboatv1alpha1.Step,
	st *tugboatv1alpha1.StepStatus) (attemptResult, error) {
	fail := func(format string, args ...any) (attemptResult, error) {
		return attemptResult{done: true, message: fmt.Sprintf(format, args...)}, nil
	}
	cfg := spec.Webhook
	shown := notifywebhook.Redact(cfg.URL)
	id := DeliveryID(pr, st.Name, st.Attempts)
	// An attempt whose event exists was accepted (202) already: never call
	// again, wait for its report. Read from the API server, not the cache:
	// the call is a side effect.
	name := EventName(pr.Name, st.Name, st.Attempts)
	ev := &tugboatv1alpha1.LifecycleEvent{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: pr.Namespace, Name: name}, ev); err == nil {
		st.LifecycleEvent = name
		return r.awaitReport(ctx, pr, p, ev, shown, id)
	} else if !apierrors.IsNotFound(err) {
		return attemptResult{}, err
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail("webhook URL %q must be an absolute http or https URL", notifywebhook.Redact(cfg.URL))
	}
	var key []byte
	if cfg.SecretRef != nil {
		ref := types.NamespacedName{Namespace: pr.Namespace, Name: cfg.SecretRef.Name}
		secret := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, ref, secret); err != nil {
			if apierrors.IsNotFound(err) {
				return fail("webhook signing key: Secret %s not found", ref)
			}
			return attemptResult{}, err
		}
		key = secret.Data["key"]
		if len(key) < wire.MinKeySize {
			return fail("webhook signing key: key \"key\" of Secret %s holds %d bytes; at least %d are required", ref, len(key), wire.MinKeySize)
		}
	}
	count, targets, err := r.eventTargets(ctx, pr, p)
	if err != nil {
		return attemptResult{}, err
	}
	body := StepRequest{
		APIVersion: StepAPIVersion, Kind: StepKind, ID: id,
		Namespace: pr.Namespace, Pipeline: p.Name, Promotion: pr.Name, Environment: pr.Spec.To, Version: pr.Spec.Version,
		Step: st.Name, Stage: string(st.Stage), Attempt: st.Attempts, TargetCount: count,
		Targets: targets,
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return attemptResult{}, err
	}
	timeout := min(stepTimeout(spec, nil), MaxWebhookStepCall)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(raw))
	if err != nil {
		return fail("webhook %s: %v", shown, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tugboat-hub")
	req.Header.Set(notifywebhook.HeaderEvent, StepEvent)
	req.Header.Set(notifywebhook.HeaderDelivery, body.ID)
	if key != nil {
		wire.SignRequest(req, key, raw, r.Now())
	}
	hc := r.Egress.Client(timeout)
	// A redirect would carry a signed body to a path the signature does
	// not cover: report it instead.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fail("webhook %s did not answer within %s", shown, timeout)
		}
		return fail("webhook %s: %v", shown, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode == http.StatusAccepted {
		deadline := deadlineOf(st.StartedAt, r.Now(), stepTimeout(spec, nil))
		ev, err := r.createEvent(ctx, newEvent(pr, p, st, name, WebhookLifecycle, WebhookLifecycle, deadline, count, targets))
		if err != nil {
			return attemptResult{}, err
		}
		st.LifecycleEvent = name
		return r.awaitReport(ctx, pr, p, ev, shown, id)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return attemptResult{done: true, ok: true, message: fmt.Sprintf("webhook %s answered %s to delivery %s", shown, resp.Status, body.ID)}, nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4*webhookExcerpt))
	msg := fmt.Sprintf("webhook %s answered %s, not 2xx", shown, resp.Status)
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		msg += " (a redirect, not followed: set the final URL)"
	}
	if ex := notify.Printable(string(b), webhookExcerpt); ex != "" {
		msg += ": " + ex
	}
	return fail("%s", msg)
}

// awaitReport reads how the report of an attempt that answered 202 stands,
// through its LifecycleEvent ev: the CI API finished it (Done or Error),
// or it waits until its deadline, when the hub marks it TimedOut.
func (r *Reconciler) awaitReport(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, ev *tugboatv1alpha1.LifecycleEvent,
	shown, id string) (attemptResult, error) {
	if !ownedBy(ev, pr) || ev.Spec.Lifecycle != WebhookLifecycle {
		return attemptResult{done: true, message: fmt.Sprintf("LifecycleEvent %s exists but was not published for this webhook step of promotion %s; delete it to retry", ev.Name, pr.Name)}, nil
	}
	how := fmt.Sprintf("webhook %s accepted delivery %s (202)", shown, id)
	by := func() string { return orDefault(ev.Status.FinishedBy, "an unknown user") + suffix(ev.Status.Message) }
	deadline := ev.Spec.Deadline.UTC().Format(time.RFC3339)
	timedOut := fmt.Sprintf("%s but no report came by %s (LifecycleEvent %s)", how, deadline, ev.Name)
	switch ev.Phase() {
	case tugboatv1alpha1.EventDone:
		return attemptResult{done: true, ok: true, message: how + " and reported success, through " + by()}, nil
	case tugboatv1alpha1.EventError:
		return attemptResult{done: true, message: how + " and reported failure, through " + by()}, nil
	case tugboatv1alpha1.EventTimedOut:
		return attemptResult{done: true, timedOut: true, message: timedOut}, nil
	}
	phase, left, err := r.settleEvent(ctx, ev, "no report of delivery "+id+" came through the CI API by the deadline "+deadline)
	switch {
	case err != nil:
		return attemptResult{}, err
	case phase == "":
		return attemptResult{wait: "LifecycleEvent " + ev.Name + " changed as it timed out; reading it again", requeue: 100 * time.Millisecond}, nil
	case phase == tugboatv1alpha1.EventTimedOut:
		return attemptResult{done: true, timedOut: true, message: timedOut}, nil
	}
	return attemptResult{
		wait: fmt.Sprintf(`%s: waiting for its report by %s: POST /v1/pipelines/%s/%s/steps {"promotion":%q,"step":%q,"delivery":%q,"result":"succeeded" or "failed"}, signed with the step's key (the Pipeline's credential for a step without one; docs/ci-api.md)`,
			how, deadline, pr.Namespace, p.Name, pr.Name, ev.Spec.Step, id),
		requeue: left,
	}, nil
}
