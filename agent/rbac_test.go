package agent

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"tugboat.dev/tugboat/agent/ownership"
	"tugboat.dev/tugboat/config"
)

// chartRoles renders the agent's chart (config/charts/tugboat-agent, with
// the helm strategy's opt-in role) in namespace tugboat-system and returns
// its ClusterRoles and Roles named name.
func chartRoles(t *testing.T, name string) (cluster []rbacv1.ClusterRole, namespaced []rbacv1.Role) {
	t.Helper()
	objs, err := config.Render(config.AgentChart, "tugboat-system", map[string]any{
		"spoke": "s1", "hub": map[string]any{"url": "https://hub.example.com"},
		"helmStrategy": map[string]any{"enabled": true, "allowedNamespaces": []any{"apps"}, "allowedChartSources": []any{"*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetName() != name {
			continue
		}
		switch o.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatal(err)
			}
			cluster = append(cluster, r)
		case "Role":
			var r rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatal(err)
			}
			namespaced = append(namespaced, r)
		}
	}
	return cluster, namespaced
}

var readVerbs = []string{"get", "list", "watch"}

// Issue 12, Medium 3: the agent's default ClusterRole (generated from the
// markers in agent/) reads, and writes nothing but its own webhook
// configurations, by name: no patch of workloads anywhere, no get of
// Secrets, no update of another webhook configuration, nothing of the helm
// strategy.
func TestRBAC_theDefaultRoleOnlyReads(t *testing.T) {
	g := NewWithT(t)
	opts := NewOptions()
	cluster, namespaced := chartRoles(t, "tugboat-agent")
	g.Expect(cluster).To(HaveLen(1))
	g.Expect(cluster[0].Name).To(Equal("tugboat-agent"))
	for _, r := range cluster[0].Rules {
		for _, v := range r.Verbs {
			if slices.Contains(readVerbs, v) {
				continue
			}
			g.Expect(v).To(Equal("update"), "rule %v", r)
			g.Expect(r.APIGroups).To(Equal([]string{"admissionregistration.k8s.io"}), "rule %v", r)
			g.Expect(r.ResourceNames).To(Equal([]string{opts.Webhook.Name}), "only the agent's own webhook configurations: %v", r)
		}
		if slices.Contains(r.Resources, "secrets") {
			g.Expect(r.Verbs).To(ConsistOf("list", "watch"), "Secrets only through the label-selected informer: %v", r)
		}
		if slices.Contains(r.APIGroups, "helm.toolkit.fluxcd.io") {
			// Seen as HelmReleases; the helm strategy's patch is opt-in.
			g.Expect(r.Resources).To(Equal([]string{"helmreleases"}), "rule %v", r)
			g.Expect(r.Verbs).To(ConsistOf("get", "list", "watch"), "rule %v", r)
		}
	}
	// In its own namespace: the certificate rotator's Secret, by name.
	g.Expect(namespaced).To(HaveLen(1))
	g.Expect(namespaced[0].Namespace).To(Equal(opts.Webhook.AgentNamespace))
	for _, r := range namespaced[0].Rules {
		if slices.ContainsFunc(r.Verbs, func(v string) bool { return !slices.Contains(readVerbs, v) }) {
			g.Expect(r.Verbs).To(Equal([]string{"update"}))
			g.Expect(r.ResourceNames).To(Equal([]string{opts.Webhook.CertSecretName}))
		}
	}
}

// The backfill's role grants patch on exactly what the backfill lists.
func TestRBAC_theBackfillRoleCoversTheBackfill(t *testing.T) {
	g := NewWithT(t)
	cluster, _ := chartRoles(t, "tugboat-agent-backfill")
	g.Expect(cluster).To(HaveLen(1))
	var granted []string
	for _, r := range cluster[0].Rules {
		g.Expect(r.Verbs).To(Equal([]string{"patch"}))
		for _, grp := range r.APIGroups {
			for _, res := range r.Resources {
				granted = append(granted, grp+"/"+res)
			}
		}
	}
	var want []string
	for _, gvr := range ownership.DefaultBackfillResources() {
		want = append(want, gvr.Group+"/"+gvr.Resource)
	}
	g.Expect(granted).To(ConsistOf(want))
}

// The helm strategy's role is separate, and holds what its code uses:
// Helm's release storage and the HelmRelease version patch.
func TestRBAC_theHelmStrategyRoleIsSeparate(t *testing.T) {
	g := NewWithT(t)
	cluster, _ := chartRoles(t, "tugboat-agent-helm-strategy")
	g.Expect(cluster).To(HaveLen(1))
	g.Expect(cluster[0].Name).To(Equal("tugboat-agent-helm-strategy"))
	g.Expect(cluster[0].Rules).To(ContainElement(And(
		HaveField("APIGroups", []string{"helm.toolkit.fluxcd.io"}),
		HaveField("Resources", []string{"helmreleases"}),
		HaveField("Verbs", ConsistOf("get", "patch")))))
	g.Expect(cluster[0].Rules).To(ContainElement(And(
		HaveField("Resources", ContainElement("secrets")),
		HaveField("Verbs", ContainElements("get", "list", "create", "update", "delete")))))
	for _, r := range cluster[0].Rules {
		g.Expect(r.APIGroups).NotTo(ContainElement("rbac.authorization.k8s.io"), "a chart must not escalate the agent's rights")
	}
}
