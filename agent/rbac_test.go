package agent

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"tugboat.dev/tugboat/agent/ownership"
	"tugboat.dev/tugboat/config"
)

// readRoles decodes the ClusterRoles and Roles of a YAML file.
func readRoles(t *testing.T, path string) (cluster []rbacv1.ClusterRole, namespaced []rbacv1.Role) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil || meta.Kind == "" {
			continue
		}
		switch meta.Kind {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := yaml.Unmarshal(doc, &r); err != nil {
				t.Fatal(err)
			}
			cluster = append(cluster, r)
		case "Role":
			var r rbacv1.Role
			if err := yaml.Unmarshal(doc, &r); err != nil {
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
	cluster, namespaced := readRoles(t, "../config/agent/rbac/role.yaml")
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
	cluster, _ := readRoles(t, "../config/agent/rbac/backfill.yaml")
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
	cluster, _ := readRoles(t, "../config/agent/helm-strategy/clusterrole.yaml")
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

// config/agent binds the read-only role and the backfill's, never the helm
// strategy's; the helm-strategy component adds it, bound in a namespace by
// a RoleBinding only.
func TestRBAC_theHelmStrategyRoleIsOptIn(t *testing.T) {
	g := NewWithT(t)
	kinds := func(kustomization string) map[string]map[string]any {
		objs, err := config.Build([]byte(kustomization))
		g.Expect(err).NotTo(HaveOccurred())
		out := map[string]map[string]any{}
		for _, o := range objs {
			md, _ := o["metadata"].(map[string]any)
			out[o["kind"].(string)+"/"+md["name"].(string)] = o
		}
		return out
	}
	base := kinds("resources: [../agent]\n")
	g.Expect(base).To(HaveKey("ClusterRoleBinding/tugboat-agent"))
	g.Expect(base).To(HaveKey("ClusterRoleBinding/tugboat-agent-backfill"))
	g.Expect(base).NotTo(HaveKey("ClusterRole/tugboat-agent-helm-strategy"))
	for name, o := range base {
		if strings.HasPrefix(name, "ClusterRoleBinding/") || strings.HasPrefix(name, "RoleBinding/") {
			ref, _ := o["roleRef"].(map[string]any)
			g.Expect(ref["name"]).NotTo(Equal("tugboat-agent-helm-strategy"), name)
		}
	}
	opted := kinds("resources: [../agent]\ncomponents: [../agent/helm-strategy]\n")
	g.Expect(opted).To(HaveKey("ClusterRole/tugboat-agent-helm-strategy"))
	g.Expect(opted).To(HaveKey("RoleBinding/tugboat-agent-helm-strategy"))
	for name, o := range opted {
		if strings.HasPrefix(name, "ClusterRoleBinding/") {
			ref, _ := o["roleRef"].(map[string]any)
			g.Expect(ref["name"]).NotTo(Equal("tugboat-agent-helm-strategy"), "never bound cluster-wide: %s", name)
		}
	}
}
