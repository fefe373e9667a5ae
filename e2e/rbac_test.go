package e2e_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/config"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/identity"
)

// TestHub_readsNoSecretOutsideTheNamespacesItServes: as the hub chart's
// ServiceAccount, with the chart serving the namespace fleet, the hub may
// get and create Secrets in fleet and in its own namespace, and may do
// nothing with Secrets anywhere else, nor list them anywhere.
func TestHub_readsNoSecretOutsideTheNamespacesItServes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := startHubCluster(t)
	for _, ns := range []string{"fleet", "other"} {
		g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		g.Expect(c.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
			Data: map[string][]byte{"token": []byte("s3cret")}})).To(Succeed())
	}
	installHubChart(t, c, "fleet")
	hub, err := client.New(identity.HubConfig(c.RESTConfig), client.Options{Scheme: c.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())

	// RBAC takes effect once the API server's informers have the bindings.
	g.Eventually(func() error {
		return hub.Get(ctx, client.ObjectKey{Namespace: "fleet", Name: "creds"}, &corev1.Secret{})
	}).WithTimeout(hubWait).Should(Succeed())
	g.Expect(hub.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "key"}}, client.DryRunAll)).To(Succeed())
	g.Expect(hub.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tugboat-system", Name: "key"}}, client.DryRunAll)).To(Succeed())

	forbidden := func(err error) { g.ExpectWithOffset(1, apierrors.IsForbidden(err)).To(BeTrue(), "%v", err) }
	forbidden(hub.Get(ctx, client.ObjectKey{Namespace: "other", Name: "creds"}, &corev1.Secret{}))
	forbidden(hub.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "key"}}, client.DryRunAll))
	forbidden(hub.List(ctx, &corev1.SecretList{}, client.InNamespace("fleet")))
	forbidden(hub.List(ctx, &corev1.SecretList{}))
	forbidden(hub.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "creds"}}, client.DryRunAll))
}

// TestAgent_cannotWriteOutsideWhatItsRoleGrants: as the agent chart's
// ServiceAccount, with the helm strategy allowed in apps only and the
// backfill bound in apps only, the agent may write workloads in apps (the
// strategy's upgrades) and patch labels there (the backfill), and nothing
// in web or kube-system; it gets no Secret outside its own namespace and
// the allowed ones (elsewhere only list/watch, for its Helm storage
// informers), and updates no webhook configuration but its own.
func TestAgent_cannotWriteOutsideWhatItsRoleGrants(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := harness.StartT(t, harness.Options{Name: "spoke-rbac", ControlPlaneOnly: true})
	for _, ns := range []string{"apps", "web"} {
		g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	for _, ns := range []string{"apps", "web", "kube-system"} {
		g.Expect(c.Client.Create(ctx, deployment(ns, "existing"))).To(Succeed())
		g.Expect(c.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}})).To(Succeed())
	}
	other := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "someone-else"}}
	g.Expect(c.Client.Create(ctx, other)).To(Succeed())
	target := config.Target{Kubeconfig: c.KubeconfigPath, Namespace: "tugboat-system"}
	_, err := config.Apply(ctx, target, config.AgentChart, map[string]any{
		"spoke": "rbac-1", "hub": map[string]any{"url": "https://hub.invalid"}, "replicas": 0,
		"backfill":     map[string]any{"namespaces": []any{"apps"}},
		"helmStrategy": map[string]any{"enabled": true, "allowedNamespaces": []any{"apps"}, "allowedChartSources": []any{"https://charts.example.com"}},
	}, hubWait)
	g.Expect(err).NotTo(HaveOccurred())

	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:tugboat-system:tugboat-agent"}
	agent, err := client.New(cfg, client.Options{Scheme: c.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	label := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"tugboat.dev/release":"x"}}}`))

	// Granted: the helm strategy's writes and the backfill's patch in apps.
	g.Eventually(func() error {
		return agent.Create(ctx, deployment("apps", "new"), client.DryRunAll)
	}).WithTimeout(hubWait).Should(Succeed())
	g.Expect(agent.Patch(ctx, deployment("apps", "existing"), label, client.DryRunAll)).To(Succeed())
	g.Expect(agent.List(ctx, &corev1.SecretList{})).To(Succeed(), "Helm's storage informers list Secrets")

	forbidden := func(err error, what string) {
		g.ExpectWithOffset(1, apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", what, err)
	}
	for _, ns := range []string{"web", "kube-system"} {
		forbidden(agent.Create(ctx, deployment(ns, "new"), client.DryRunAll), "create a Deployment in "+ns)
		forbidden(agent.Patch(ctx, deployment(ns, "existing"), label, client.DryRunAll), "patch a Deployment in "+ns)
		forbidden(agent.Delete(ctx, deployment(ns, "existing"), client.DryRunAll), "delete a Deployment in "+ns)
		forbidden(agent.Get(ctx, client.ObjectKey{Namespace: ns, Name: "creds"}, &corev1.Secret{}), "get a Secret in "+ns)
	}
	g.Expect(agent.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "creds"}, &corev1.Secret{})).To(Succeed(),
		"the helm strategy reads Helm's storage in the namespaces it may promote into")
	other.Webhooks = nil
	forbidden(agent.Update(ctx, other, client.DryRunAll), "update another webhook configuration")
	forbidden(agent.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, client.DryRunAll), "create a namespace")
}

func deployment(namespace, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}},
			},
		},
	}
}
