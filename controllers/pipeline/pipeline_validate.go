package pipeline

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// specError is a configuration problem: the Pipeline is Stalled until its
// spec (or a Secret it names) changes.
type specError struct {
	reason  tugboatv1alpha1.ConditionReason
	msg     string
	requeue time.Duration // >0 when the fix may come from outside the spec (a Secret)
}

func (e *specError) Error() string { return e.msg }

func invalid(format string, args ...any) *specError {
	return &specError{reason: tugboatv1alpha1.InvalidSpecReason, msg: fmt.Sprintf(format, args...)}
}

// validate checks what the CRD schema cannot: strategy configuration,
// referenced Secrets, and targets shared between environments (a cycle: a
// promotion into one would qualify the other).
// spokes are the Spokes of the Pipeline's namespace when a target selects
// them by label (listSpokes): the cycle check runs on the expanded targets,
// and an invalid selector is a configuration error.
func (r *Reconciler) validate(ctx context.Context, p *tugboatv1alpha1.Pipeline, spokes []*tugboatv1alpha1.Spoke) *specError {
	seenEnv := map[string]bool{}
	seenTarget := map[string]string{}
	for i := range p.Spec.Environments {
		env := &p.Spec.Environments[i]
		if seenEnv[env.Name] {
			return invalid("environment %q is listed twice", env.Name)
		}
		seenEnv[env.Name] = true
		res, err := ExpandTargets(p, env, spokes)
		if err != nil {
			return invalid("%v", err)
		}
		for j := range res.Targets {
			t := &res.Targets[j]
			key := HistoryName(p, &t.Target)
			if other, ok := seenTarget[key]; ok && other != env.Name {
				return invalid("target %s/%s/%s is in environments %q and %q: a release can be in one environment only (promotion would cycle)%s",
					t.Spoke, t.Namespace, ReleaseOf(p, &t.Target), other, env.Name, selectedBy(t))
			}
			seenTarget[key] = env.Name
		}
		if i == 0 {
			continue // nothing is promoted into the first environment automatically
		}
		s := StrategyFor(p, env)
		if err := r.validateStrategy(ctx, p, env.Name, &s); err != nil {
			return err
		}
	}
	if p.Spec.SecretRef != nil {
		if err := r.secretExists(ctx, p.Namespace, p.Spec.SecretRef.Name, "spec.secretRef"); err != nil {
			return err
		}
	}
	return nil
}

// selectedBy says which spokeSelector selected t's Spoke, or "".
func selectedBy(t *ResolvedTarget) string {
	if t.Selector == "" {
		return ""
	}
	return " (selected by spokeSelector " + t.Selector + ")"
}

func (r *Reconciler) validateStrategy(ctx context.Context, p *tugboatv1alpha1.Pipeline, env string, s *tugboatv1alpha1.PromotionStrategy) *specError {
	field := "promotion of environment " + env
	switch s.Type {
	case tugboatv1alpha1.StrategyPullRequest:
		if s.PullRequest == nil {
			return invalid("%s: strategy pullRequest needs spec.promotion.pullRequest", field)
		}
		return r.secretExists(ctx, p.Namespace, s.PullRequest.SecretRef.Name, field+": pullRequest.secretRef")
	case tugboatv1alpha1.StrategyWebhook:
		if s.Webhook == nil {
			return invalid("%s: strategy webhook needs spec.promotion.webhook", field)
		}
		if s.Webhook.SecretRef != nil {
			return r.secretExists(ctx, p.Namespace, s.Webhook.SecretRef.Name, field+": webhook.secretRef")
		}
	case tugboatv1alpha1.StrategyKubernetes:
		for _, t := range p.Spec.Environments[EnvironmentIndex(p, env)].Targets {
			if t.HelmRelease == nil {
				who := t.Spoke
				if t.SpokeSelector != nil {
					who = "spokeSelector " + metav1.FormatLabelSelector(t.SpokeSelector)
				}
				return invalid("%s: strategy kubernetes needs helmRelease on every target; %s/%s has none", field, who, t.Namespace)
			}
		}
	case tugboatv1alpha1.StrategyHelm, tugboatv1alpha1.StrategyNotification:
	default:
		return invalid("%s: unknown strategy %q", field, s.Type)
	}
	return nil
}

func (r *Reconciler) secretExists(ctx context.Context, ns, name, field string) *specError {
	var s corev1.Secret
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return &specError{reason: tugboatv1alpha1.SecretNotFoundReason,
			msg: fmt.Sprintf("%s: secret %s/%s not found", field, ns, name), requeue: time.Minute}
	case err != nil:
		return &specError{reason: tugboatv1alpha1.SecretNotFoundReason,
			msg: fmt.Sprintf("%s: reading secret %s/%s: %v", field, ns, name, err), requeue: 10 * time.Second}
	}
	return nil
}
