package promotion

// Running: the strategy is called for every target at once (an
// environment without a rollout; promotion_rollout.go acts wave by wave),
// within the attempts and the Pipeline's timeout.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

// running calls the strategy; success moves to Verifying, a retryable
// error backs off, a terminal one (or too many attempts) fails. A
// Promotion with a rollout acts wave by wave instead (rollout).
func (r *Reconciler) running(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (ctrl.Result, error) {
	if res, wait, err := r.preSteps(ctx, pr, p, env); wait || err != nil {
		return res, err
	}
	if hasRollout(pr) {
		return r.rollout(ctx, pr, p, env)
	}
	if res, done := r.checkTimeout(ctx, pr, p, env); done {
		return res, nil
	}
	s, err := r.Registry.Get(pr.StrategyType())
	if err == nil {
		var result strategy.Result
		var req strategy.Request
		req, err = r.request(ctx, pr, p, env)
		if err == nil {
			if suspended := suspendedSpokes(req.Targets); len(suspended) > 0 {
				// Whoever asked (the Pipeline, a person, CI) and whoever
				// approved, a suspended Spoke is not promoted into: wait
				// until it is resumed, or the timeout.
				r.setPhase(pr, tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.SuspendedReason,
					fmt.Sprintf("waiting to promote %s into %s: spoke %s is suspended (spec.suspend); the strategy runs once it is resumed",
						pr.Spec.Version, pr.Spec.To, strings.Join(suspended, ", ")))
				return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
			}
			if behind, ferr := r.behind(ctx, pr); ferr != nil || behind {
				return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, ferr
			}
			result, err = s.Promote(ctx, req)
		}
		if err == nil {
			pr.Status.StrategyResult = &tugboatv1alpha1.StrategyResult{URL: publicURL(result.URL), Reference: result.Reference, Message: clip.String(result.Message, 1024)}
			r.setPhase(pr, tugboatv1alpha1.PromotionVerifying, tugboatv1alpha1.VerifyingReason,
				fmt.Sprintf("waiting for every target of %s to report %s healthy", pr.Spec.To, pr.Spec.Version))
			return r.verifying(ctx, pr, p, env)
		}
	}
	return r.strategyFailed(pr, err), nil
}

// strategyFailed counts a failed attempt of the strategy: a retryable
// error backs off, a terminal one (or too many attempts) fails the
// Promotion.
func (r *Reconciler) strategyFailed(pr *tugboatv1alpha1.Promotion, err error) ctrl.Result {
	pr.Status.Attempts++
	msg := fmt.Sprintf("strategy %s failed (attempt %d): %v", pr.StrategyType(), pr.Status.Attempts, err)
	if strategy.IsTerminal(err) || pr.Status.Attempts >= r.Options.MaxAttempts {
		r.finish(pr, tugboatv1alpha1.PromotionFailed, tugboatv1alpha1.StrategyFailedReason, msg)
		return ctrl.Result{}
	}
	r.setPhase(pr, tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.StrategyFailedReason, msg+"; retrying")
	return ctrl.Result{RequeueAfter: r.backoff(pr.Status.Attempts)}
}

// suspendedSpokes names the targets' Spokes with spec.suspend, once each.
func suspendedSpokes(targets []strategy.Target) []string {
	var out []string
	for _, t := range targets {
		if t.Spoke != nil && t.Spoke.Spec.Suspend && !slices.Contains(out, t.SpokeName) {
			out = append(out, t.SpokeName)
		}
	}
	return out
}

func (r *Reconciler) backoff(attempts int32) time.Duration {
	d := time.Duration(float64(r.Options.RetryBase) * math.Pow(2, float64(attempts-1)))
	if d > r.Options.RetryMax || d <= 0 {
		d = r.Options.RetryMax
	}
	return d
}

// request builds the strategy's input.
func (r *Reconciler) request(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (strategy.Request, error) {
	req := strategy.Request{
		Promotion: pr, Pipeline: p, Environment: env, Version: pr.Spec.Version, Strategy: *pr.Status.Strategy,
		Hub: r.APIReader, HubWriter: r.Client,
	}
	targets, err := r.promotionTargets(ctx, pr, p, env)
	if err != nil {
		return req, err
	}
	for _, rt := range targets {
		t := rt.Target
		st := strategy.Target{SpokeName: t.Spoke, Namespace: t.Namespace, Release: pipeline.ReleaseOf(p, &t)}
		if t.HelmRelease != nil {
			hr := *t.HelmRelease
			if hr.Namespace == "" {
				hr.Namespace = t.Namespace
			}
			st.HelmRelease = &hr
		}
		sp := &tugboatv1alpha1.Spoke{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: t.Spoke}, sp); err == nil {
			st.Spoke = sp
		}
		req.Targets = append(req.Targets, st)
	}
	return req, nil
}

func joinMessages(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}

func (r *Reconciler) timeout(p *tugboatv1alpha1.Pipeline) time.Duration {
	if p.Spec.Timeout != nil && p.Spec.Timeout.Duration > 0 {
		return p.Spec.Timeout.Duration
	}
	return r.Options.DefaultTimeout
}

func (r *Reconciler) remaining(pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline) time.Duration {
	start := pr.CreationTimestamp.Time
	if pr.Status.StartedAt != nil {
		start = pr.Status.StartedAt.Time
	}
	d := start.Add(r.timeout(p)).Sub(r.Now())
	if d < 100*time.Millisecond {
		d = 100 * time.Millisecond
	}
	return d
}

// checkTimeout fails the Promotion once its timeout passed, naming the
// targets that did not report the version healthy.
func (r *Reconciler) checkTimeout(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (ctrl.Result, bool) {
	if pr.Status.StartedAt == nil || r.Now().Before(pr.Status.StartedAt.Add(r.timeout(p))) {
		return ctrl.Result{}, false
	}
	laggards, _, err := r.progress(ctx, pr, p, env)
	if err != nil {
		laggards = []string{err.Error()}
	}
	r.finish(pr, tugboatv1alpha1.PromotionFailed, tugboatv1alpha1.TimedOutReason,
		fmt.Sprintf("timed out after %s waiting for %s", r.timeout(p), strings.Join(laggards, "; ")))
	return ctrl.Result{}, true
}

// behind reports whether pr, as the cache gave it, is older than the
// Promotion on the API server: a reconcile the event of one of its own
// writes started (a PromotionTarget it created, written before the
// Promotion's status) may read the Promotion before the cache saw that
// status, still Running, and would call the strategy again. The strategy
// is only called on the Promotion as it is.
func (r *Reconciler) behind(ctx context.Context, pr *tugboatv1alpha1.Promotion) (bool, error) {
	if r.APIReader == nil {
		return false, nil
	}
	fresh := &tugboatv1alpha1.Promotion{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pr), fresh); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return fresh.ResourceVersion != pr.ResourceVersion, nil
}
