package devenv

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/config"
)

const (
	// HubNamespace is where the hub chart's ServiceAccount lives, as
	// `tugboat install hub` puts it.
	HubNamespace = "tugboat-system"
	// HubUser is the user the dev hub runs as: the hub chart's
	// ServiceAccount, impersonated by the hub cluster's administrator.
	HubUser = "system:serviceaccount:" + HubNamespace + ":tugboat-hub"
)

// hubIdentityKinds are the kinds of the hub chart the environment applies:
// its identity, its RBAC and its admission policies (tugboat-approvals,
// tugboat-hub-secrets). The CRDs are installed before; the Deployment is
// the hub process the environment runs itself.
var hubIdentityKinds = map[string]bool{
	"ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
}

// HubProcessKubeconfig is the kubeconfig the dev hub runs with: the hub
// cluster's, acting as HubUser.
func (e *Env) HubProcessKubeconfig() string { return filepath.Join(e.Dir, "hub-process.kubeconfig") }

// installHubIdentity applies the hub chart's ServiceAccount, RBAC and
// admission policies to the hub cluster, serving the environment's
// namespace, and writes HubProcessKubeconfig, so that the local hub runs
// with exactly the rights an installed hub has and a person's approval goes
// through the same policy. It waits until the API server grants the
// ServiceAccount its rights.
func (e *Env) installHubIdentity(ctx context.Context) error {
	admin := e.Hub.Client
	// The RoleBindings of the chart go into both.
	for _, name := range []string{HubNamespace, e.Namespace} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := admin.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	objs, err := config.Render(config.HubChart, HubNamespace, map[string]any{"spokeNamespaces": []any{e.Namespace}})
	if err != nil {
		return fmt.Errorf("rendering the hub chart: %w", err)
	}
	for _, o := range objs {
		if !hubIdentityKinds[o.GetKind()] {
			continue
		}
		if err := createOrUpdate(ctx, admin, o); err != nil {
			return fmt.Errorf("applying %s %s of the hub chart: %w", o.GetKind(), o.GetName(), err)
		}
	}
	if err := e.writeHubProcessKubeconfig(); err != nil {
		return err
	}
	// RBAC takes effect once the API server's informers have the bindings.
	return poll(ctx, 30*time.Second, func() bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: HubUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + HubNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: e.Namespace, Verb: "get", Resource: "secrets"},
		}}
		return admin.Create(ctx, sar) == nil && sar.Status.Allowed
	})
}

// writeHubProcessKubeconfig writes the hub cluster's kubeconfig acting as
// HubUser.
func (e *Env) writeHubProcessKubeconfig() error {
	cfg, err := clientcmd.LoadFromFile(e.KubeconfigFor("hub"))
	if err != nil {
		return err
	}
	for _, u := range cfg.AuthInfos {
		u.Impersonate = HubUser
		u.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + HubNamespace, "system:authenticated"}
	}
	return clientcmd.WriteToFile(*cfg, e.HubProcessKubeconfig())
}

// createOrUpdate creates u, or updates it when it exists.
func createOrUpdate(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	err := c.Create(ctx, u)
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
