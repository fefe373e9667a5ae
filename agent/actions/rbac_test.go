package actions

import (
	"context"
	"testing"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/config"
)

// helmStrategyRole is the opt-in ClusterRole of the helm strategy, as the
// agent's chart renders it.
func helmStrategyRole(t *testing.T) rbacv1.ClusterRole {
	t.Helper()
	objs, err := config.Render(config.AgentChart, "tugboat-system", map[string]any{
		"spoke": "s1", "hub": map[string]any{"url": "https://hub.example.com"},
		"helmStrategy": map[string]any{"enabled": true, "allowedNamespaces": []any{"apps"}, "allowedChartSources": []any{"*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetName() == "tugboat-agent-helm-strategy" {
			var role rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
				t.Fatal(err)
			}
			return role
		}
	}
	t.Fatal("the agent chart renders no ClusterRole tugboat-agent-helm-strategy")
	return rbacv1.ClusterRole{}
}

// Issue 12, Medium 3: the helm strategy's opt-in role is enough for its
// upgrades (Helm SDK and the Flux path) in a namespace where it is bound,
// and the agent's identity can do nothing in a namespace where it is not:
// the executor runs as the agent's ServiceAccount (impersonated), not as
// admin.
func TestExecutor_helmStrategyRoleIsEnoughWhereBoundAndOnlyThere(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	role := helmStrategyRole(t)
	role.Name += "-" + randomHex(3) // one per test run on the shared cluster
	g.Expect(cluster.Client.Create(ctx, &role)).To(Succeed())
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), &role) })

	saNS := newNamespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: saNS, Name: "tugboat-agent"}}
	g.Expect(cluster.Client.Create(ctx, sa)).To(Succeed())
	allowed, other := newNamespace(t), newNamespace(t)
	g.Expect(cluster.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: allowed, Name: "tugboat-agent-helm-strategy"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: sa.Name}},
	})).To(Succeed())
	for _, ns := range []string{allowed, other} {
		install(t, ns, "web", "1.0.0", nil)
		g.Expect(cluster.Client.Create(ctx, helmRelease(ns, "api", "1.0.0"))).To(Succeed())
	}

	cfg := rest.CopyConfig(cluster.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + saNS + ":" + sa.Name}
	e, err := NewExecutor(cfg, testOptions(allowAll()), testr.New(t))
	g.Expect(err).NotTo(HaveOccurred())

	out := execute(t, e, upgradeAction(allowed, "web", "1.1.0"))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(last(t, allowed, "web").Chart.Metadata.Version).To(Equal("1.1.0"))
	hr := upgradeAction(allowed, "api", "1.1.0")
	hr.HelmRelease = &wire.HelmReleaseRef{Name: "api"}
	out = execute(t, e, hr)
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(nested(getHelmRelease(g, allowed, "api").Object, "spec", "chart", "spec", "version")).To(Equal("1.1.0"))

	// Where the role is not bound, the same identity cannot read the
	// release, let alone upgrade it.
	out = execute(t, e, upgradeAction(other, "web", "1.1.0"))
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(ContainSubstring("forbidden"))
	g.Expect(last(t, other, "web").Chart.Metadata.Version).To(Equal("1.0.0"))
	hr = upgradeAction(other, "api", "1.1.0")
	hr.HelmRelease = &wire.HelmReleaseRef{Name: "api"}
	out = execute(t, e, hr)
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(nested(getHelmRelease(g, other, "api").Object, "spec", "chart", "spec", "version")).To(Equal("1.0.0"))
}
