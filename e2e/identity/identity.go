// Package identity lets tests act as different Kubernetes users on a harness
// cluster, with the approval policy of the hub chart installed: the hub's
// ServiceAccount (exempt from the policy), people with or without the RBAC
// verb "approve" on environments, and the requester of a promotion.
//
// It is a test helper: tugboat itself does not use it. The cluster's
// administrator (harness.Cluster.RESTConfig, group system:masters)
// impersonates each user, so the API server authenticates, authorizes and
// admits every request as that user would be.
package identity

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/config"
)

// HubUser is the user name of the hub's ServiceAccount, which the policy
// tugboat-approvals exempts.
const HubUser = "system:serviceaccount:tugboat-system:tugboat-hub"

// PolicyName names the ValidatingAdmissionPolicy and its binding.
const PolicyName = "tugboat-approvals"

// LifecyclePolicyName names the ValidatingAdmissionPolicy (and binding)
// that checks who finishes a LifecycleEvent or claims a Lifecycle.
const LifecyclePolicyName = "tugboat-lifecycles"

// PreviewPolicyName names the ValidatingAdmissionPolicy (and binding)
// that lets only the hub write a PromotionPreview's resolution and status.
const PreviewPolicyName = "tugboat-previews"

// ApproverRole is the example ClusterRole of the hub chart.
const ApproverRole = "tugboat-approver"

// installKinds are the kinds of the hub chart that Install applies: the
// approval policy and its binding, the example approver role, and the hub's
// RBAC (its Secret role bound cluster-wide, as spokeNamespaces ["*"] does).
var installKinds = map[string]bool{
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"ClusterRole": true, "ClusterRoleBinding": true,
}

// Install applies installKinds of the hub chart (config/charts/tugboat-hub,
// rendered for namespace tugboat-system) to the cluster admin reaches and
// waits until the
// API server enforces the policy. (An expression that does not compile
// makes the policy refuse every request it matches, with the compiler's
// error: the tests that expect a request to pass see it.)
func Install(ctx context.Context, admin client.Client) error {
	objs, err := config.Render(config.HubChart, "tugboat-system", map[string]any{"spokeNamespaces": []any{"*"}})
	if err != nil {
		return err
	}
	for _, o := range objs {
		if !installKinds[o.GetKind()] {
			continue
		}
		if err := apply(ctx, admin, o); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// A policy is enforced once the API server's policy informer has it:
	// a dry-run create that it refuses tells.
	for name, obj := range map[string]func() client.Object{PolicyName: probe, LifecyclePolicyName: lifecycleProbe, PreviewPolicyName: previewProbe} {
		for {
			err := admin.Create(ctx, obj(), client.DryRunAll)
			if err != nil && strings.Contains(err.Error(), name) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("the policy %s is not enforced after 60s (last answer: %w)", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// HubNamespace is the namespace Install renders the hub chart for: the
// hub's own namespace, where its namespaced Roles grant it its Lease and
// its heartbeat digests.
const HubNamespace = "tugboat-system"

// InstallHubNamespace creates HubNamespace and applies the hub chart's
// Roles and RoleBindings in it (tugboat-hub-leader-election,
// tugboat-hub-heartbeats), and waits until the hub may write its heartbeat
// digests there: for tests whose hub, as its ServiceAccount, elects a
// leader or writes heartbeat digests in its namespace.
func InstallHubNamespace(ctx context.Context, admin client.Client) error {
	objs, err := config.Render(config.HubChart, HubNamespace, map[string]any{"spokeNamespaces": []any{"*"}})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: HubNamespace}}
	if err := admin.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, o := range objs {
		if (o.GetKind() != "Role" && o.GetKind() != "RoleBinding") || o.GetNamespace() != HubNamespace {
			continue
		}
		if err := apply(ctx, admin, o); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: HubUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + HubNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: HubNamespace, Verb: "patch", Resource: "configmaps"},
		}}
		if err := admin.Create(ctx, sar); err != nil {
			return err
		}
		if sar.Status.Allowed {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the hub's RBAC in %s not in effect after 30s", HubNamespace)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// apply creates u, or updates it when it exists.
func apply(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	if err := c.Create(ctx, u); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(u.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), cur); err != nil {
			return err
		}
		u.SetResourceVersion(cur.GetResourceVersion())
		return c.Update(ctx, u)
	}
	return nil
}

// Config returns a copy of admin that impersonates user (with groups, plus
// system:authenticated).
func Config(admin *rest.Config, user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string{"system:authenticated"}, groups...)}
	return cfg
}

// Client returns a client acting as user.
func Client(admin *rest.Config, scheme *runtime.Scheme, user string, groups ...string) (client.Client, error) {
	return client.New(Config(admin, user, groups...), client.Options{Scheme: scheme})
}

// HubConfig acts as the hub's ServiceAccount, whose RBAC Install applied.
func HubConfig(admin *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: HubUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:tugboat-system", "system:authenticated"}}
	return cfg
}

// Grant binds user, in namespace, to a Role that allows what
// `tugboat approve` needs (read Pipelines and Promotions, write
// promotions/status) and, when environments are given, the verb approve on
// those environments ("<pipeline>/<environment>" or "<pipeline>/*"). The
// Role is named after the user.
func Grant(ctx context.Context, admin client.Client, namespace, user string, environments ...string) error {
	return grant(ctx, admin, namespace, user, "approve", environments)
}

// GrantAbort is Grant with the verb abort (what `tugboat abort` needs)
// instead of approve; its Role is named "aborter-<user>".
func GrantAbort(ctx context.Context, admin client.Client, namespace, user string, environments ...string) error {
	return grant(ctx, admin, namespace, user, "abort", environments)
}

// GrantVerb is Grant with verb (e.g. pause or resume, what `tugboat
// rollout pause|resume` needs) instead of approve; its Role is named
// after the verb and the user ("pauser-alice").
func GrantVerb(ctx context.Context, admin client.Client, namespace, user, verb string, environments ...string) error {
	return grant(ctx, admin, namespace, user, verb, environments)
}

func grant(ctx context.Context, admin client.Client, namespace, user, verb string, environments []string) error {
	prefix := "approver-"
	switch {
	case verb == "approve":
	case strings.HasSuffix(verb, "e"):
		prefix = verb + "r-" // pauser, resumer
	default:
		prefix = verb + "er-" // aborter
	}
	name := prefix + strings.NewReplacer(":", "-", "@", "-", "/", "-").Replace(user)
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"tugboat.dev"}, Resources: []string{"pipelines", "promotions"}, Verbs: []string{"get", "list", "watch", "create"}},
		{APIGroups: []string{"tugboat.dev"}, Resources: []string{"promotiontargets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"tugboat.dev"}, Resources: []string{"promotions/status"}, Verbs: []string{"get", "patch", "update"}},
	}
	if len(environments) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"tugboat.dev"}, Resources: []string{"environments"}, Verbs: []string{verb}, ResourceNames: environments})
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: rules}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			return err
		}
	}
	// RBAC takes effect once the API server's informers have the binding.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "patch", Group: "tugboat.dev", Resource: "promotions", Subresource: "status"},
		}}
		if err := admin.Create(ctx, sar); err != nil {
			return err
		}
		if sar.Status.Allowed {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("RBAC for %s in %s not in effect after 30s", user, namespace)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Uninstall deletes the policy and its binding and waits until the API
// server no longer enforces it, for test packages that share a cluster
// with tests written without it.
func Uninstall(ctx context.Context, admin client.Client) error {
	for _, o := range []client.Object{
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: PolicyName}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: PolicyName}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: LifecyclePolicyName}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: LifecyclePolicyName}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: PreviewPolicyName}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: PreviewPolicyName}},
	} {
		if err := admin.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for name, obj := range map[string]func() client.Object{PolicyName: probe, LifecyclePolicyName: lifecycleProbe, PreviewPolicyName: previewProbe} {
		for {
			err := admin.Create(ctx, obj(), client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), name) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("the policy %s is still enforced 60s after its deletion", name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// probe is a Promotion the administrator may create only while the policy
// is not enforced: automatic, not requested by them. It is created with
// dry run only.
func probe() client.Object {
	return &tugboatv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "identity-probe"},
		Spec: tugboatv1alpha1.PromotionSpec{Pipeline: "probe", To: "production", Version: "1.0.0",
			RequestedBy: tugboatv1alpha1.RequestedByAuto},
	}
}

// lifecycleProbe is a LifecycleEvent the administrator may create only
// while the policy tugboat-lifecycles is not enforced (only the hub
// publishes events). It is created with dry run only.
func lifecycleProbe() client.Object {
	return &tugboatv1alpha1.LifecycleEvent{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "identity-probe"},
		Spec: tugboatv1alpha1.LifecycleEventSpec{Lifecycle: "probe", EventKey: "probe", Promotion: "probe", Pipeline: "probe",
			Environment: "probe", Version: "1.0.0", Step: "probe", Stage: tugboatv1alpha1.StepStagePre, Attempt: 1, Deadline: metav1.Now()},
	}
}

// previewProbe is an on-demand PromotionPreview the administrator may
// create only while the policy tugboat-previews is not enforced: it has an
// owner, as only the hub's previews of a Promotion do. It is created with
// dry run only.
func previewProbe() client.Object {
	return &tugboatv1alpha1.PromotionPreview{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "identity-probe",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: tugboatv1alpha1.GroupVersion.String(), Kind: "Promotion", Name: "probe", UID: "probe"}}},
		Spec: tugboatv1alpha1.PromotionPreviewSpec{Pipeline: "probe", From: "staging", To: "production"},
	}
}
