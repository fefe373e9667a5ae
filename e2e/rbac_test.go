package e2e_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/config"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/identity"
)

// TestHub_readsNoSecretOutsideTheNamespacesItServes: as the hub chart's
// ServiceAccount, with the chart serving the namespace fleet, the hub may
// get and create Secrets in fleet and in its own namespace, and may do
// nothing with Secrets anywhere else, nor list them anywhere. The Secrets it
// may create are a Spoke's key only (no ServiceAccount token), and it holds
// Leases only in its own namespace (security review 3, medium 4).
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
	// The Secret the hub creates: a Spoke's key, labeled and owned by it.
	keySecret := func(ns string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "key",
			Labels:          map[string]string{"tugboat.dev/spoke": "prod-1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "tugboat.dev/v1alpha1", Kind: "Spoke", Name: "prod-1", UID: "1b4e28ba-2fa1-11d2-883f-0016d3cca427"}},
		}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"key": []byte("k")}}
	}

	forbidden := func(err error) { g.ExpectWithOffset(1, apierrors.IsForbidden(err)).To(BeTrue(), "%v", err) }
	forbidden(hub.Get(ctx, client.ObjectKey{Namespace: "other", Name: "creds"}, &corev1.Secret{}))
	forbidden(hub.Create(ctx, keySecret("other"), client.DryRunAll))
	// Where it may create Secrets, it cannot mint a ServiceAccount token
	// (the token controller fills in a Secret of that type), nor create
	// any Secret but a Spoke's key (policy tugboat-hub-secrets).
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "minted",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}
	// The API server enforces a policy once its informer has it.
	g.Eventually(func() error { return hub.Create(ctx, token.DeepCopy(), client.DryRunAll) }).WithTimeout(hubWait).
		Should(MatchError(ContainSubstring("the tugboat hub creates only Opaque Secrets")))
	g.Expect(hub.Create(ctx, keySecret("fleet"), client.DryRunAll)).To(Succeed())
	g.Expect(hub.Create(ctx, keySecret("tugboat-system"), client.DryRunAll)).To(Succeed())
	g.Expect(hub.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "loose"}}, client.DryRunAll)).
		To(MatchError(ContainSubstring("the tugboat hub creates only a Spoke's key Secret")))
	// Its Lease (leader election) only in its own namespace.
	lease := func(ns string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tugboat-hub.tugboat.dev"}}
	}
	g.Eventually(func() error { return hub.Create(ctx, lease("tugboat-system"), client.DryRunAll) }).WithTimeout(hubWait).Should(Succeed())
	forbidden(hub.Create(ctx, lease("fleet"), client.DryRunAll))
	forbidden(hub.List(ctx, &coordinationv1.LeaseList{}))
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

// agentClient installs the agent chart with values on c and returns a client
// acting as the agent's ServiceAccount.
func agentClient(t *testing.T, c *harness.Cluster, values map[string]any) client.Client {
	t.Helper()
	values["spoke"], values["hub"], values["replicas"] = "rbac-1", map[string]any{"url": "https://hub.invalid"}, 0
	if _, err := config.Apply(context.Background(), config.Target{Kubeconfig: c.KubeconfigPath, Namespace: "tugboat-system"}, config.AgentChart, values, hubWait); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:tugboat-system:tugboat-agent"}
	agent, err := client.New(cfg, client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return agent
}

// TestAgent_readsAndBackfillsOnlyTheNamespacesItWatches: with watchNamespaces
// [apps], the agent chart's ServiceAccount lists Secrets (Helm's storage) and
// patches labels (the backfill) in apps only, not cluster-wide; and where
// the agent does not keep its webhook certificate itself (here: no
// webhooks), it may not update its webhook configurations (security review
// 3, medium 5: the reads were bound cluster-wide whatever watchNamespaces
// said, the backfill too, and the update was granted in every mode).
func TestAgent_readsAndBackfillsOnlyTheNamespacesItWatches(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := harness.StartT(t, harness.Options{Name: "spoke-rbac-watch", ControlPlaneOnly: true})
	for _, ns := range []string{"apps", "web"} {
		g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		g.Expect(c.Client.Create(ctx, deployment(ns, "existing"))).To(Succeed())
	}
	own := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "tugboat-agent"}}
	g.Expect(c.Client.Create(ctx, own)).To(Succeed())
	agent := agentClient(t, c, map[string]any{"watchNamespaces": []any{"apps"}, "webhook": map[string]any{"enabled": false}})
	label := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"tugboat.dev/release":"x"}}}`))

	g.Eventually(func() error {
		return agent.List(ctx, &corev1.SecretList{}, client.InNamespace("apps"))
	}).WithTimeout(hubWait).Should(Succeed(), "Helm's storage informers list Secrets where the agent watches")
	g.Eventually(func() error {
		return agent.Patch(ctx, deployment("apps", "existing"), label, client.DryRunAll)
	}).WithTimeout(hubWait).Should(Succeed(), "the backfill labels where the agent watches")

	forbidden := func(err error, what string) {
		g.ExpectWithOffset(1, apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", what, err)
	}
	forbidden(agent.List(ctx, &corev1.SecretList{}), "list Secrets cluster-wide")
	forbidden(agent.List(ctx, &corev1.SecretList{}, client.InNamespace("web")), "list Secrets in web")
	forbidden(agent.Patch(ctx, deployment("web", "existing"), label, client.DryRunAll), "patch a Deployment in web")
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(own), own)).To(Succeed())
	forbidden(agent.Update(ctx, own, client.DryRunAll), "update its own webhook configuration when it keeps no certificate")
}

// TestAgent_neverWritesInTheSystemNamespaces: watching every namespace, the
// backfill's patch is bound cluster-wide; the policy
// tugboat-agent-protected-namespaces still refuses the agent's patches in
// kube-system (security review 3, medium 5), and allows them elsewhere.
func TestAgent_neverWritesInTheSystemNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := harness.StartT(t, harness.Options{Name: "spoke-rbac-system", ControlPlaneOnly: true})
	g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}})).To(Succeed())
	for _, ns := range []string{"web", "kube-system"} {
		g.Expect(c.Client.Create(ctx, deployment(ns, "existing"))).To(Succeed())
	}
	agent := agentClient(t, c, map[string]any{})
	label := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"tugboat.dev/release":"x"}}}`))
	g.Eventually(func() error {
		return agent.Patch(ctx, deployment("web", "existing"), label, client.DryRunAll)
	}).WithTimeout(hubWait).Should(Succeed())
	// The API server enforces a policy once its informer has it.
	g.Eventually(func() error {
		return agent.Patch(ctx, deployment("kube-system", "existing"), label, client.DryRunAll)
	}).WithTimeout(hubWait).Should(MatchError(ContainSubstring("the tugboat agent does not write in kube-system")))
}

// TestHub_servesMetricsOnlyToAuthorizedScrapers: with --metrics-secure (the
// chart's default) the hub, running as its chart's ServiceAccount, serves
// /metrics over HTTPS only to a caller whose bearer token the API server
// authenticates and whose RBAC allows get on /metrics (the chart's
// ClusterRole tugboat-hub-metrics-reader): the DORA gauges name every
// tenant's Pipelines (security review 3, low 8).
func TestHub_servesMetricsOnlyToAuthorizedScrapers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := startHubCluster(t)
	g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}})).To(Succeed())
	installHubChart(t, c)
	opts := hubtest.Options()
	opts.MetricsBindAddress, opts.MetricsSecure = freeAddr(t), true
	hubtest.Start(t, identity.HubConfig(c.RESTConfig), opts)

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: "prometheus"}}
	g.Expect(c.Client.Create(ctx, sa)).To(Succeed())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	g.Expect(c.Client.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	scrape := func(token string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+opts.MetricsBindAddress+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		// The hub's metrics certificate is self-signed.
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	g.Eventually(func() int { code, _ := scrape(""); return code }).WithTimeout(hubWait).Should(Equal(http.StatusUnauthorized), "no token")
	code, _ := scrape(tr.Status.Token)
	g.Expect(code).To(Equal(http.StatusForbidden), "a token without the reader role")

	g.Expect(c.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-reads-tugboat"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tugboat-hub-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: "prometheus"}},
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		code, body := scrape(tr.Status.Token)
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(body).To(ContainSubstring("tugboat_"))
	}).WithTimeout(hubWait).Should(Succeed())
}
