package promotion

// Lifecycle steps (issue 25): the pre steps of the destination environment
// run, in order, before the strategy acts on any target; the post steps run
// after every target verified (with a rollout, after the last wave
// qualified) and before the Promotion succeeds. A step that fails (after its
// retries) fails the Promotion, naming the step. The steps are resolved into
// status.steps when the Promotion starts, so an edit of the Pipeline never
// adds or removes a step of a running Promotion; each step's configuration
// is read from the Pipeline when an attempt starts.
//
// An external step is a LifecycleEvent (step_external.go) that another
// controller finishes; a webhook step is a signed POST (step_webhook.go),
// whose 202 answer makes the attempt a LifecycleEvent too, finished by a
// report through the CI API (step_report.go); a helmTest step is an agent
// action per tested target (step_helmtest.go); a metrics step is a PromQL
// query measured against a Prometheus, count times (step_metrics.go). All
// are safe across a hub restart: an attempt's LifecycleEvent has a
// deterministic name, a webhook attempt a deterministic delivery id and a
// helmTest attempt deterministic action ids, so a reconcile that repeats
// an attempt finds the same event (or sends the same delivery, offers the
// same actions), and the event keeps its result; a metrics step's
// measurements are in its status.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Condition reasons and Event reasons of lifecycle steps.
const (
	// StepsRunningReason: the Promotion waits for a lifecycle step.
	StepsRunningReason tugboatv1alpha1.ConditionReason = "StepRunning"
	// StepFailedReason: a lifecycle step failed or timed out, after its
	// retries.
	StepFailedReason tugboatv1alpha1.ConditionReason = "StepFailed"

	EventStepStarted   = "StepStarted"
	EventStepSucceeded = "StepSucceeded"
	EventStepFailed    = "StepFailed"
	// EventStepMeasurementFailed: a metrics step's measurement failed
	// (the step goes on while within its failure limit).
	EventStepMeasurementFailed = "StepMeasurementFailed"
)

// resolveSteps records env's steps in status.steps as pr starts, pre steps
// first, each Pending.
func resolveSteps(pr *tugboatv1alpha1.Promotion, env *tugboatv1alpha1.Environment) {
	pr.Status.Steps = nil
	if env.Steps == nil {
		return
	}
	add := func(stage tugboatv1alpha1.StepStage, steps []tugboatv1alpha1.Step) {
		for _, s := range steps {
			pr.Status.Steps = append(pr.Status.Steps, tugboatv1alpha1.StepStatus{
				Name: s.Name, Stage: stage, Type: s.Type, Phase: tugboatv1alpha1.StepPending, Message: "not started",
			})
		}
	}
	add(tugboatv1alpha1.StepStagePre, env.Steps.Pre)
	add(tugboatv1alpha1.StepStagePost, env.Steps.Post)
}

// stepSpec returns the configuration of the step st in env, or nil when the
// Pipeline no longer has it.
func stepSpec(env *tugboatv1alpha1.Environment, st *tugboatv1alpha1.StepStatus) *tugboatv1alpha1.Step {
	if env.Steps == nil {
		return nil
	}
	list := env.Steps.Pre
	if st.Stage == tugboatv1alpha1.StepStagePost {
		list = env.Steps.Post
	}
	for i := range list {
		if list[i].Name == st.Name && list[i].Type == st.Type {
			return &list[i]
		}
	}
	return nil
}

// attemptResult is how one step of a reconcile stands.
type attemptResult struct {
	// done: the attempt ended (succeeded, failed or timed out); ok says
	// whether it succeeded, timedOut whether it timed out, and message how.
	done, ok, timedOut bool
	message            string
	// wait is what a running attempt waits for, and requeue when to look
	// again (0: a watch wakes the reconciler).
	wait    string
	requeue time.Duration
}

// stepFailed is what becomes of a Promotion whose step st failed: by
// default (failStep) it fails, naming the step; a failed post step of a
// rollout with onFailure Rollback rolls back first (rollout).
type stepFailed func(st *tugboatv1alpha1.StepStatus) (ctrl.Result, error)

// failStep fails pr with reason StepFailed, naming the step st.
func (r *Reconciler) failStep(pr *tugboatv1alpha1.Promotion) stepFailed {
	return func(st *tugboatv1alpha1.StepStatus) (ctrl.Result, error) {
		r.finish(pr, tugboatv1alpha1.PromotionFailed, StepFailedReason, stepFailure(st))
		return ctrl.Result{}, nil
	}
}

// runSteps advances the steps of stage, in order: each reconcile moves the
// first step not finished. It returns passed when every step of the stage
// succeeded; otherwise a step failed (and failed said what becomes of the
// Promotion) or the Promotion's phase says which step it waits for, and
// res says when to look again.
func (r *Reconciler) runSteps(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment,
	stage tugboatv1alpha1.StepStage, phase tugboatv1alpha1.PromotionPhase, failed stepFailed) (passed bool, res ctrl.Result, err error) {
	for i := range pr.Status.Steps {
		st := &pr.Status.Steps[i]
		if st.Stage != stage || st.Phase == tugboatv1alpha1.StepSucceeded {
			continue
		}
		if st.Phase.Terminal() {
			// Failed or TimedOut: recorded, the Promotion fails with it.
			res, err := failed(st)
			return false, res, err
		}
		if st.Type == tugboatv1alpha1.StepWebhook || st.Type == tugboatv1alpha1.StepMetrics {
			// A webhook call is a side effect, and a measurement counts:
			// make them only from the latest status, never from a cached
			// copy that lags behind the last write (that would call the
			// same attempt again, or measure twice).
			if stale, err := r.staleCopy(ctx, pr); err != nil || stale {
				return false, ctrl.Result{RequeueAfter: 100 * time.Millisecond}, err
			}
		}
		out, err := r.advanceStep(ctx, pr, p, env, st)
		if err != nil {
			return false, ctrl.Result{}, err
		}
		if !out.done {
			r.setPhase(pr, phase, StepsRunningReason, fmt.Sprintf("%s step %s (%s, attempt %d of %d): %s",
				lower(stage), st.Name, st.Type, st.Attempts, retriesOf(env, st)+1, out.wait))
			return false, ctrl.Result{RequeueAfter: out.requeue}, nil
		}
		if !out.ok {
			res, err := failed(st)
			return false, res, err
		}
	}
	return true, ctrl.Result{}, nil
}

// staleCopy reports whether pr, read from the cache, is older than the
// Promotion the API server has.
func (r *Reconciler) staleCopy(ctx context.Context, pr *tugboatv1alpha1.Promotion) (bool, error) {
	live := &tugboatv1alpha1.Promotion{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pr), live); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return live.ResourceVersion != pr.ResourceVersion, nil
}

// advanceStep starts or checks the current attempt of st, and records its
// outcome in st: a failed attempt with retries left starts the next one.
// out.done is true when the step finished (st.Phase terminal).
func (r *Reconciler) advanceStep(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment,
	st *tugboatv1alpha1.StepStatus) (attemptResult, error) {
	spec := stepSpec(env, st)
	if spec == nil {
		r.endStep(st, tugboatv1alpha1.StepFailed, fmt.Sprintf("the step is no longer in environment %s of pipeline %s", env.Name, p.Name))
		return attemptResult{done: true}, nil
	}
	for {
		switch {
		case st.Phase == tugboatv1alpha1.StepPending:
			r.startAttempt(st)
		case st.Type == tugboatv1alpha1.StepWebhook && st.LifecycleEvent == "":
			// A Running webhook step with no event has no call in flight
			// (the call is made within the reconcile): its last attempt
			// failed, and the next one starts after a backoff. With an
			// event, the receiver answered 202 and the attempt waits for
			// its report.
			if st.StartedAt != nil {
				if wait := st.StartedAt.Add(r.backoff(st.Attempts)).Sub(r.Now()); wait > 0 {
					return attemptResult{wait: st.Message, requeue: wait}, nil
				}
			}
			r.startAttempt(st)
		}
		var out attemptResult
		var err error
		switch st.Type {
		case tugboatv1alpha1.StepExternal:
			out, err = r.externalAttempt(ctx, pr, p, spec, st)
		case tugboatv1alpha1.StepWebhook:
			out, err = r.webhookAttempt(ctx, pr, p, spec, st)
		case tugboatv1alpha1.StepHelmTest:
			out, err = r.helmTestAttempt(ctx, pr, spec, st)
		case tugboatv1alpha1.StepMetrics:
			out, err = r.metricsAttempt(ctx, pr, spec, st)
		default:
			out = attemptResult{done: true, message: fmt.Sprintf("step type %s is not available yet", st.Type)}
		}
		if err != nil || !out.done {
			if !out.done {
				st.Message = clip.String(out.wait, tugboatv1alpha1.MaxStepMessageLength)
			}
			return out, err
		}
		if out.ok {
			r.endStep(st, tugboatv1alpha1.StepSucceeded, out.message)
			return out, nil
		}
		if st.Attempts <= spec.Retries {
			// Another attempt: recorded as Pending for one instant, so that
			// startAttempt counts it.
			st.Phase, st.Message = tugboatv1alpha1.StepPending, clip.String(fmt.Sprintf("attempt %d: %s; retrying", st.Attempts, out.message), tugboatv1alpha1.MaxStepMessageLength)
			if st.Type == tugboatv1alpha1.StepWebhook {
				// A webhook answers at once: give it a moment before the
				// next attempt rather than calling again in a loop.
				st.Phase, st.LifecycleEvent = tugboatv1alpha1.StepRunning, ""
				return attemptResult{wait: st.Message, requeue: max(r.backoff(st.Attempts), time.Millisecond)}, nil
			}
			continue
		}
		phase := tugboatv1alpha1.StepFailed
		if out.timedOut {
			phase = tugboatv1alpha1.StepTimedOut
		}
		r.endStep(st, phase, out.message)
		return out, nil
	}
}

// startAttempt counts a new attempt of st and marks it Running.
func (r *Reconciler) startAttempt(st *tugboatv1alpha1.StepStatus) {
	now := metav1.NewTime(r.Now())
	st.Attempts++
	st.Phase, st.StartedAt, st.CompletedAt, st.LifecycleEvent, st.Metrics = tugboatv1alpha1.StepRunning, &now, nil, "", nil
}

// endStep records that st finished.
func (r *Reconciler) endStep(st *tugboatv1alpha1.StepStatus, phase tugboatv1alpha1.StepPhase, msg string) {
	now := metav1.NewTime(r.Now())
	st.Phase, st.CompletedAt, st.Message = phase, &now, clip.String(msg, tugboatv1alpha1.MaxStepMessageLength)
}

// stepTimeout is how long one attempt of spec may take: its own timeout,
// else the fallback (an external step's Lifecycle's), else 10m.
func stepTimeout(spec *tugboatv1alpha1.Step, fallback *metav1.Duration) time.Duration {
	switch {
	case spec.Timeout != nil && spec.Timeout.Duration > 0:
		return spec.Timeout.Duration
	case fallback != nil && fallback.Duration > 0:
		return fallback.Duration
	}
	d, _ := time.ParseDuration(tugboatv1alpha1.DefaultStepTimeout)
	return d
}

func retriesOf(env *tugboatv1alpha1.Environment, st *tugboatv1alpha1.StepStatus) int32 {
	if spec := stepSpec(env, st); spec != nil {
		return spec.Retries
	}
	return 0
}

// stepFailure is the Promotion's failure message for a step that failed:
// it names the step, so every notifier tells which.
func stepFailure(st *tugboatv1alpha1.StepStatus) string {
	how := "failed"
	if st.Phase == tugboatv1alpha1.StepTimedOut {
		how = "timed out"
	}
	return fmt.Sprintf("%s step %s (%s) %s after %d attempt(s): %s", lower(st.Stage), st.Name, st.Type, how, st.Attempts, orDefault(st.Message, "no reason given"))
}

func lower(s tugboatv1alpha1.StepStage) string {
	if s == tugboatv1alpha1.StepStagePost {
		return "post"
	}
	return "pre"
}

// preSteps runs the pre steps of a Running Promotion before its strategy
// acts. wait is true while one is not finished, or when one failed (the
// Promotion then is Failed).
func (r *Reconciler) preSteps(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (res ctrl.Result, wait bool, err error) {
	passed, res, err := r.runSteps(ctx, pr, p, env, tugboatv1alpha1.StepStagePre, tugboatv1alpha1.PromotionRunning, r.failStep(pr))
	return res, !passed, err
}

// postSteps runs the post steps of a Promotion whose targets all
// verified. wait is true while one is not finished, or when one failed:
// failed says what becomes of the Promotion then.
func (r *Reconciler) postSteps(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment, failed stepFailed) (res ctrl.Result, wait bool, err error) {
	passed, res, err := r.runSteps(ctx, pr, p, env, tugboatv1alpha1.StepStagePost, tugboatv1alpha1.PromotionVerifying, failed)
	return res, !passed, err
}

// recordSteps emits an Event for each step whose attempt started, or which
// finished, since before (the status read at the start of the reconcile).
func recordSteps(rec events.EventRecorder, pr *tugboatv1alpha1.Promotion, before []tugboatv1alpha1.StepStatus) {
	if rec == nil {
		return
	}
	was := map[string]tugboatv1alpha1.StepStatus{}
	for _, s := range before {
		was[s.Name] = s
	}
	for _, s := range pr.Status.Steps {
		old := was[s.Name]
		if s.Attempts > old.Attempts {
			rec.Eventf(pr, nil, corev1.EventTypeNormal, EventStepStarted, "Step", "%s step %s (%s) started attempt %d%s",
				lower(s.Stage), s.Name, s.Type, s.Attempts, eventSuffix(s.LifecycleEvent))
		}
		if s.Metrics != nil && s.Attempts == old.Attempts && old.Metrics != nil && s.Metrics.Failed > old.Metrics.Failed ||
			s.Metrics != nil && s.Attempts > old.Attempts && s.Metrics.Failed > 0 {
			if n := len(s.Metrics.Measurements); n > 0 {
				m := s.Metrics.Measurements[n-1]
				rec.Eventf(pr, nil, corev1.EventTypeWarning, EventStepMeasurementFailed, "Step", "%s step %s (metrics) measurement %d failed (%d failed in this attempt): %s",
					lower(s.Stage), s.Name, s.Metrics.Taken, s.Metrics.Failed, clip.String(orDefault(m.Message, "value "+m.Value), 600))
			}
		}
		if s.Phase == old.Phase || !s.Phase.Terminal() {
			continue
		}
		if s.Phase == tugboatv1alpha1.StepSucceeded {
			rec.Eventf(pr, nil, corev1.EventTypeNormal, EventStepSucceeded, "Step", "%s step %s (%s) succeeded: %s", lower(s.Stage), s.Name, s.Type, clip.String(s.Message, 800))
			continue
		}
		rec.Eventf(pr, nil, corev1.EventTypeWarning, EventStepFailed, "Step", "%s", clip.String(stepFailure(&s), 1000))
	}
}

func eventSuffix(name string) string {
	if name == "" {
		return ""
	}
	return " (LifecycleEvent " + name + ")"
}
