package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Names of the webhooks inside their configurations.
const (
	// MutatingWebhookName names the labeling webhook.
	MutatingWebhookName = "ownership.agent.tugboat.dev"
	// ObserveWebhookName names the validating webhook recording UIDs.
	ObserveWebhookName = "observe-ownership.agent.tugboat.dev"
	// ReleaseSecretsWebhookName names the validating webhook on Helm
	// release Secrets.
	ReleaseSecretsWebhookName = "release-secrets.agent.tugboat.dev"
)

// namespaceNameLabel is set by kube-apiserver on every namespace.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// Registration describes the agent's MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration (both named Name) and applies them. Set
// exactly one of URL and Service.
type Registration struct {
	// Name of both configurations (default "tugboat-agent").
	Name string
	// AgentNamespace is excluded from admission, with kube-system,
	// kube-node-lease and ExcludeNamespaces.
	AgentNamespace    string
	ExcludeNamespaces []string
	// Namespaces, when set, restricts admission to these namespaces (the
	// agent's watched namespaces).
	Namespaces []string
	// CABundle is the PEM CA of the serving certificate. Leave it empty
	// when a cert rotator injects it.
	CABundle []byte
	// URL is the server's base URL (local mode), e.g.
	// https://127.0.0.1:9443; each webhook appends its path.
	URL string
	// Service is the webhook Service (in-cluster mode); its Path is set per
	// webhook.
	Service *admissionregistrationv1.ServiceReference
	// TimeoutSeconds per call (default 2).
	TimeoutSeconds int32
	// FieldOwner of the server-side apply (default "tugboat-agent").
	FieldOwner string
}

func (r Registration) name() string {
	if r.Name == "" {
		return "tugboat-agent"
	}
	return r.Name
}

func (r Registration) fieldOwner() string {
	if r.FieldOwner == "" {
		return "tugboat-agent"
	}
	return r.FieldOwner
}

// MutatingRules are the resources the mutating webhook labels, on CREATE
// and UPDATE: workloads and what controllers create from them, Services,
// ConfigMaps, ServiceAccounts and Ingresses. Secrets are never mutated.
func MutatingRules() []admissionregistrationv1.RuleWithOperations {
	ops := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	return []admissionregistrationv1.RuleWithOperations{
		rule(ops, "apps", "deployments", "statefulsets", "daemonsets", "replicasets"),
		rule(ops, "batch", "jobs", "cronjobs"),
		rule(ops, "", "pods", "services", "configmaps", "serviceaccounts"),
		rule(ops, "networking.k8s.io", "ingresses"),
	}
}

// ObserveRules are the resources whose UIDs the observing webhook records:
// the kinds that own other objects, on CREATE and DELETE.
func ObserveRules() []admissionregistrationv1.RuleWithOperations {
	ops := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Delete}
	return []admissionregistrationv1.RuleWithOperations{
		rule(ops, "apps", "deployments", "statefulsets", "daemonsets", "replicasets"),
		rule(ops, "batch", "jobs", "cronjobs"),
	}
}

// ReleaseSecretRules are the writes of Secrets the release webhook sees.
func ReleaseSecretRules() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{rule([]admissionregistrationv1.OperationType{
		admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete,
	}, "", "secrets")}
}

func rule(ops []admissionregistrationv1.OperationType, group string, resources ...string) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: ops,
		Rule: admissionregistrationv1.Rule{
			APIGroups:   []string{group},
			APIVersions: []string{"*"},
			Resources:   resources,
			Scope:       ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}
}

// namespaceSelector excludes the system namespaces and the agent's own, and
// restricts to Namespaces when set.
func (r Registration) namespaceSelector() *metav1.LabelSelector {
	excluded := []string{"kube-system", "kube-node-lease"}
	if r.AgentNamespace != "" {
		excluded = append(excluded, r.AgentNamespace)
	}
	for _, ns := range r.ExcludeNamespaces {
		if !slices.Contains(excluded, ns) {
			excluded = append(excluded, ns)
		}
	}
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: excluded},
	}}
	if len(r.Namespaces) > 0 {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpIn, Values: slices.Clone(r.Namespaces),
		})
	}
	return sel
}

func (r Registration) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: r.CABundle}
	if r.Service != nil {
		svc := *r.Service
		svc.Path = ptr.To(path)
		cc.Service = &svc
	} else {
		cc.URL = ptr.To(r.URL + path)
	}
	return cc
}

func (r Registration) timeout() *int32 {
	if r.TimeoutSeconds <= 0 {
		return ptr.To[int32](2)
	}
	return ptr.To(r.TimeoutSeconds)
}

// Mutating returns the MutatingWebhookConfiguration: the labeling webhook
// on MutatingRules, failurePolicy Ignore, sideEffects None, matchPolicy
// Equivalent, reinvocationPolicy Never.
func (r Registration) Mutating() *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: r.name()},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    MutatingWebhookName,
			ClientConfig:            r.clientConfig(PathMutateOwnership),
			Rules:                   MutatingRules(),
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			NamespaceSelector:       r.namespaceSelector(),
			ObjectSelector:          &metav1.LabelSelector{},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          r.timeout(),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}},
	}
}

// Validating returns the ValidatingWebhookConfiguration with two webhooks,
// both failurePolicy Ignore, sideEffects None, matchPolicy Equivalent: the
// ownership observer on ObserveRules for objects labeled
// tugboat.dev/release, and the release Secret observer on
// ReleaseSecretRules for Secrets labeled owner=helm.
func (r Registration) Validating() *admissionregistrationv1.ValidatingWebhookConfiguration {
	webhook := func(name, path string, rules []admissionregistrationv1.RuleWithOperations, objects *metav1.LabelSelector) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    name,
			ClientConfig:            r.clientConfig(path),
			Rules:                   rules,
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			NamespaceSelector:       r.namespaceSelector(),
			ObjectSelector:          objects,
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          r.timeout(),
			AdmissionReviewVersions: []string{"v1"},
		}
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: r.name()},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			webhook(ObserveWebhookName, PathObserveOwnership, ObserveRules(), &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: tugboatv1alpha1.LabelRelease, Operator: metav1.LabelSelectorOpExists}},
			}),
			webhook(ReleaseSecretsWebhookName, PathValidateReleaseSecrets, ReleaseSecretRules(), &metav1.LabelSelector{
				MatchLabels: map[string]string{helmOwnerLabel: helmOwnerValue},
			}),
		},
	}
}

// Apply server-side applies both configurations (forcing ownership of the
// fields it sets), so it both creates and updates them.
func (r Registration) Apply(ctx context.Context, c client.Client) error {
	if (r.URL == "") == (r.Service == nil) {
		return errors.New("webhook registration needs exactly one of URL and Service")
	}
	for _, obj := range []runtime.Object{r.Mutating(), r.Validating()} {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
		ac := client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u})
		if err := c.Apply(ctx, ac, client.FieldOwner(r.fieldOwner()), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, r.name(), err)
		}
	}
	return nil
}

// Delete removes both configurations; missing ones are fine.
func (r Registration) Delete(ctx context.Context, c client.Client) error {
	var errs []error
	for _, obj := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: r.name()}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: r.name()}},
	} {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
