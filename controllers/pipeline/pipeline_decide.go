package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/chartversion"
	"tugboat.dev/tugboat/controllers/statuspatch"
)

// step is one Promotion plan decided: version from src into dst, whose
// gates opened at readyAt (the source converged plus its soak time).
type step struct {
	from    string
	dst     *tugboatv1alpha1.Environment
	version string
	readyAt time.Time
}

// decide creates the Promotions the environments qualify for and returns
// when to look again (a soak time still running).
func (r *Reconciler) decide(ctx context.Context, p *tugboatv1alpha1.Pipeline, v *view, promos []tugboatv1alpha1.Promotion) (time.Duration, error) {
	now := r.Now()
	steps, requeue := plan(p, v, promos, now)
	var collisions []error
	for _, s := range steps {
		if err := r.supersede(ctx, promos, s.dst.Name, s.version); err != nil {
			return 0, err
		}
		name, created, err := r.createPromotion(ctx, p, s.from, s.dst, s.version)
		var collision *NameCollisionError
		if errors.As(err, &collision) {
			collisions = append(collisions, err) // the other environments go ahead
			continue
		}
		if err != nil {
			return 0, err
		}
		if !created {
			continue // created by an earlier reconcile that the cache had not shown yet
		}
		decisionLatency.Observe(now.Sub(s.readyAt).Seconds())
		log.FromContext(ctx).Info("promotion created", "promotion", name, "from", s.from, "to", s.dst.Name, "version", s.version)
	}
	return requeue, errors.Join(collisions...)
}

// plan decides which Promotions to create from what observe saw and the
// Pipeline's Promotions, and when to look again (a soak time still
// running). It reads nothing but its arguments.
func plan(p *tugboatv1alpha1.Pipeline, v *view, promos []tugboatv1alpha1.Promotion, now time.Time) ([]step, time.Duration) {
	if p.Spec.Suspend {
		return nil, 0
	}
	var steps []step
	var requeue time.Duration
	byName := map[string]*tugboatv1alpha1.Promotion{}
	for i := range promos {
		byName[promos[i].Name] = &promos[i]
	}
	for i := 0; i+1 < len(v.envs) && i+1 < len(p.Status.Environments); i++ {
		src, dst := v.envs[i], v.envs[i+1]
		if !src.converged {
			continue
		}
		version := src.version
		readyAt := src.healthySince.Add(soakTime(src.env))
		if wait := readyAt.Sub(now); soakTime(src.env) > 0 && wait > 0 {
			if requeue == 0 || wait < requeue {
				requeue = wait
			}
			continue
		}
		if held(p, src.env.Name) != nil || held(p, dst.env.Name) != nil {
			continue // a person rolled back or uninstalled: neither into nor out of
		}
		if len(src.suspended) > 0 || len(dst.suspended) > 0 {
			continue // a suspended Spoke is neither promoted into nor from
		}
		if len(dst.unmatched) > 0 {
			continue // the destination's targets are not known (a spokeSelector matches no Spoke)
		}
		if src.stopped != "" {
			continue // the version failed a post step in the source: it stops there
		}
		if finishing(promos, src.env.Name, version) {
			continue // its promotion into the source has not finished: its post steps check it there first
		}
		if !reported(dst.targets) {
			continue // what the destination runs is not known yet
		}
		if upToDate(dst.targets, version) {
			continue
		}
		if promoted(promos, byName, p.Name, dst.env.Name, version) {
			continue // one Promotion per (pipeline, environment, version), whatever its outcome
		}
		if running := activeRunning(promos, dst.env.Name); running != "" {
			continue // promoted once the running one finishes
		}
		steps = append(steps, step{from: src.env.Name, dst: dst.env, version: version, readyAt: readyAt})
	}
	return steps, requeue
}

// promoted reports whether the Pipeline already has its Promotion of
// version into env: under either of its names, or under any other (a retry
// `tugboat promote` created), whatever its outcome.
func promoted(promos []tugboatv1alpha1.Promotion, byName map[string]*tugboatv1alpha1.Promotion, pipeline, env, version string) bool {
	for _, name := range []string{PromotionName(pipeline, env, version), AlternatePromotionName(pipeline, env, version)} {
		if _, ok := byName[name]; ok {
			return true
		}
	}
	for i := range promos {
		if promos[i].Spec.To == env && promos[i].Spec.Version == version {
			return true
		}
	}
	return false
}

func soakTime(env *tugboatv1alpha1.Environment) time.Duration {
	if env.Gates.SoakTime == nil {
		return 0
	}
	return env.Gates.SoakTime.Duration
}

// reported reports whether what every target of an environment runs is
// known: a version, or no release at all on a Ready Spoke.
func reported(targets []tugboatv1alpha1.TargetStatus) bool {
	for _, t := range targets {
		if t.Version == "" && !t.Absent {
			return false
		}
	}
	return len(targets) > 0
}

// upToDate reports whether the destination already runs version on every
// target, or runs something newer somewhere (tugboat never downgrades).
func upToDate(dst []tugboatv1alpha1.TargetStatus, version string) bool {
	all := len(dst) > 0
	for _, t := range dst {
		if t.Version != version {
			all = false
		}
		if t.Version != "" && chartversion.Compare(t.Version, version) > 0 {
			return true
		}
	}
	return all
}

// finishing reports whether a Promotion of version into env has not
// finished: its targets may run the version already, but its post steps
// (lifecycle steps) have not all passed, so the version has not proved
// itself in env yet. One not started yet counts too: a retry of a
// promotion whose post step failed, waiting for approval while env still
// runs the version, has not proved it either.
func finishing(promos []tugboatv1alpha1.Promotion, env, version string) bool {
	for _, pr := range promos {
		if pr.Spec.To == env && pr.Spec.Version == version && !pr.Status.Phase.Terminal() {
			return true
		}
	}
	return false
}

// activeRunning names a Promotion into env that is already carrying out its
// strategy, or whose rollout is paused (it still holds the environment).
func activeRunning(promos []tugboatv1alpha1.Promotion, env string) string {
	for _, pr := range promos {
		if pr.Spec.To == env && pr.Status.Phase.Started() {
			return pr.Name
		}
	}
	return ""
}

// FieldOwner is the field manager of the Pipeline reconciler's writes on
// Promotions (superseding one), so that kubectl get promotion
// --show-managed-fields tells them from the Promotion reconciler's.
const FieldOwner = "tugboat-pipeline"

// supersede aborts Promotions into env that have not started (Pending or
// WaitingApproval) for a version older than version.
func (r *Reconciler) supersede(ctx context.Context, promos []tugboatv1alpha1.Promotion, env, version string) error {
	for i := range promos {
		pr := &promos[i]
		phase := pr.Status.Phase
		if pr.Spec.To != env || (phase != "" && phase != tugboatv1alpha1.PromotionPending && phase != tugboatv1alpha1.PromotionWaitingApproval) {
			continue
		}
		if chartversion.Compare(pr.Spec.Version, version) >= 0 {
			continue
		}
		orig := pr.DeepCopy()
		now := metav1.NewTime(r.Now())
		pr.Status.Phase = tugboatv1alpha1.PromotionAborted
		pr.Status.CompletedAt = &now
		apimeta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{
			Type: tugboatv1alpha1.ReadyCondition.String(), Status: metav1.ConditionFalse,
			Reason: tugboatv1alpha1.AbortedReason.String(), Message: "superseded by version " + version,
			ObservedGeneration: pr.Generation,
		})
		// With the resourceVersion read: a Promotion that moved on since
		// (the Promotion reconciler started it, from a fresher copy than
		// this cache's) is not aborted under its strategy; the conflict
		// brings the Pipeline back, and the fresh copy is left alone.
		patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
		if err := r.Client.Status().Patch(ctx, pr, patch, client.FieldOwner(FieldOwner)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("superseding promotion %s: %w", pr.Name, err)
		}
		promotionsTotal.WithLabelValues(string(tugboatv1alpha1.PromotionAborted)).Inc()
	}
	return nil
}

// createPromotion creates the Promotion of version into dst under its
// readable name (PromotionName), or under AlternatePromotionName when a
// Promotion of another (pipeline, environment, version) holds that name. It
// returns the name and whether it created the Promotion: false when it
// already existed (the reconciler's cache lags behind its own writes).
// When both names are held by other Promotions it answers a
// *NameCollisionError.
func (r *Reconciler) createPromotion(ctx context.Context, p *tugboatv1alpha1.Pipeline, from string, dst *tugboatv1alpha1.Environment, version string) (string, bool, error) {
	names := []string{PromotionName(p.Name, dst.Name, version), AlternatePromotionName(p.Name, dst.Name, version)}
	var holders []*tugboatv1alpha1.Promotion
	for _, name := range names {
		pr := &tugboatv1alpha1.Promotion{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: p.Namespace, Name: name,
				Labels: map[string]string{LabelPipeline: p.Name, LabelEnvironment: dst.Name, LabelVersion: LabelValue(version)},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: tugboatv1alpha1.GroupVersion.String(), Kind: "Pipeline", Name: p.Name, UID: p.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
				}},
			},
			Spec: tugboatv1alpha1.PromotionSpec{
				Pipeline: p.Name, From: from, To: dst.Name, Version: version,
				RequestedBy: tugboatv1alpha1.RequestedByAuto,
			},
		}
		err := r.Client.Create(ctx, pr)
		if err == nil {
			return name, true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", false, fmt.Errorf("creating promotion %s: %w", name, err)
		}
		// Look at the holder on the API server, not in the cache: the cache
		// may not show yet a Promotion this reconciler created a moment ago,
		// and taking its NotFound for "gone" would create a second one under
		// the alternate name.
		holder := &tugboatv1alpha1.Promotion{}
		if err := r.reader().Get(ctx, client.ObjectKeyFromObject(pr), holder); err != nil {
			if apierrors.IsNotFound(err) {
				// Deleted since the create: decide again from a fresh list
				// rather than move on to the next name.
				return "", false, fmt.Errorf("promotion %s was deleted while being created; deciding again", name)
			}
			return "", false, fmt.Errorf("reading promotion %s, which exists already: %w", name, err)
		}
		if holder.Spec.Pipeline == p.Name && holder.Spec.To == dst.Name && holder.Spec.Version == version {
			return name, false, nil
		}
		holders = append(holders, holder)
	}
	return "", false, &NameCollisionError{Pipeline: p.Name, Environment: dst.Name, Version: version, Holders: holders}
}

// reader reads around the cache: the API reader when set, else the client.
func (r *Reconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// NameCollisionError says that both names of a Promotion (PromotionName
// and AlternatePromotionName) are held by Promotions of other (pipeline,
// environment, version) tuples, so it cannot be created.
type NameCollisionError struct {
	// Pipeline, Environment and Version identify the Promotion wanted.
	Pipeline, Environment, Version string
	// Holders are the Promotions holding its names.
	Holders []*tugboatv1alpha1.Promotion
}

// Error names the Promotion wanted and every holder.
func (e *NameCollisionError) Error() string {
	held := make([]string, len(e.Holders))
	for i, h := range e.Holders {
		held[i] = fmt.Sprintf("%s (pipeline %s, environment %s, version %s)", h.Name, h.Spec.Pipeline, h.Spec.To, h.Spec.Version)
	}
	return fmt.Sprintf("cannot create the promotion of %s into %s: its names are held by other promotions: %s; deleting one of them lets it through",
		e.Version, e.Environment, strings.Join(held, " and "))
}

// prune deletes finished Promotions beyond spec.historyLimit, oldest first.
func (r *Reconciler) prune(ctx context.Context, p *tugboatv1alpha1.Pipeline, promos []tugboatv1alpha1.Promotion) error {
	limit := 10
	if p.Spec.HistoryLimit != nil {
		limit = int(*p.Spec.HistoryLimit)
	}
	var done []tugboatv1alpha1.Promotion
	for _, pr := range promos {
		if pr.Status.Phase.Terminal() {
			done = append(done, pr)
		}
	}
	if len(done) <= limit {
		return nil
	}
	finished := func(pr *tugboatv1alpha1.Promotion) time.Time {
		if pr.Status.CompletedAt != nil {
			return pr.Status.CompletedAt.Time
		}
		return pr.CreationTimestamp.Time
	}
	sort.Slice(done, func(i, j int) bool { return finished(&done[i]).After(finished(&done[j])) })
	for i := limit; i < len(done); i++ {
		if err := r.Client.Delete(ctx, &done[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("pruning promotion %s: %w", done[i].Name, err)
		}
	}
	return nil
}

// setReady summarizes the Pipeline in its Ready condition.
func (r *Reconciler) setReady(p *tugboatv1alpha1.Pipeline, v *view) {
	var (
		status            metav1.ConditionStatus
		reason            tugboatv1alpha1.ConditionReason
		message           string
		active, suspended []string
		stopped           []string
	)
	for _, ev := range v.envs {
		if ev.active != "" {
			active = append(active, ev.active)
		}
		if ev.stopped != "" {
			stopped = append(stopped, ev.stopped)
		}
		if len(ev.suspended) > 0 {
			suspended = append(suspended, fmt.Sprintf("automatic promotion into and out of %s is paused: spoke %s is suspended (spec.suspend)",
				ev.env.Name, strings.Join(ev.suspended, ", ")))
		}
	}
	switch {
	case len(v.problems) > 0:
		status, reason, message = metav1.ConditionFalse, tugboatv1alpha1.TargetNotFoundReason, strings.Join(v.problems, "; ")
	case len(p.Status.HeldEnvironments) > 0:
		h := p.Status.HeldEnvironments[0]
		status, reason, message = metav1.ConditionTrue, holdReason(h), HoldMessage(p.Name, h)
	case len(suspended) > 0:
		status, reason, message = metav1.ConditionTrue, tugboatv1alpha1.SuspendedReason, strings.Join(suspended, "; ")
	case len(active) > 0:
		status, reason, message = metav1.ConditionTrue, tugboatv1alpha1.PromotionInProgressReason, "promoting: "+strings.Join(active, ", ")
	case len(stopped) > 0:
		status, reason, message = metav1.ConditionTrue, tugboatv1alpha1.StoppedByStepReason,
			strings.Join(stopped, "; ")+fmt.Sprintf("; a newer version moves on (or promote it by hand: tugboat promote %s --to ENV --version VERSION)", p.Name)
	default:
		status, reason, message = metav1.ConditionTrue, tugboatv1alpha1.SucceededReason, "every target reports"
	}
	statuspatch.Set(p, tugboatv1alpha1.ReadyCondition, status, reason, message)
}

// holdReason is the Ready reason of a hold.
func holdReason(h tugboatv1alpha1.HeldEnvironment) tugboatv1alpha1.ConditionReason {
	switch h.Reason {
	case tugboatv1alpha1.HoldUninstall:
		return tugboatv1alpha1.HeldAfterUninstallReason
	case tugboatv1alpha1.HoldRolloutFailed:
		return tugboatv1alpha1.HeldAfterRolloutFailedReason
	}
	return tugboatv1alpha1.HeldAfterRollbackReason
}

// HoldMessage says why environment h.Name is held and how to release it,
// for the Pipeline's Ready condition and `tugboat status`.
func HoldMessage(pipeline string, h tugboatv1alpha1.HeldEnvironment) string {
	what := "a rollback"
	switch h.Reason {
	case tugboatv1alpha1.HoldUninstall:
		what = "an uninstall"
	case tugboatv1alpha1.HoldRolloutFailed:
		what = "a failed rollout"
	}
	return fmt.Sprintf("automatic promotion into and out of %s is held after %s (%s); resume with `tugboat resume %s --env %s`",
		h.Name, what, h.Message, pipeline, h.Name)
}
