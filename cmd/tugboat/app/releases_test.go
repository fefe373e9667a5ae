//go:build !agentonly

package app_test

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// recordRelease writes a ReleaseHistory with a current revision, as the
// hub's recorder would.
func recordRelease(t *testing.T, ns, spoke, namespace, release, chart, version string, h tugboatv1alpha1.Health) {
	t.Helper()
	rh := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName(spoke, namespace, release)},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: spoke, Namespace: namespace, Release: release},
	}
	if err := cluster.Client.Create(context.Background(), rh); err != nil {
		t.Fatal(err)
	}
	cur := tugboatv1alpha1.RevisionSummary{Revision: 3, Chart: chart, ChartVersion: version, Status: tugboatv1alpha1.ReleaseStatusDeployed, Health: h, LastDeployed: &t0}
	rh.Status.Current = &cur
	rh.Status.Revisions = []tugboatv1alpha1.Revision{{RevisionSummary: cur}}
	if err := cluster.Client.Status().Update(context.Background(), rh); err != nil {
		t.Fatal(err)
	}
}

func TestReleases_listsTheFleetAndFilters(t *testing.T) {
	g := NewWithT(t)
	ns, other := newNamespace(t), newNamespace(t)
	recordRelease(t, ns, "prod-1", "apps", "web", "web", "1.4.0", tugboatv1alpha1.HealthCurrent)
	recordRelease(t, ns, "dev-1", "apps", "web", "web", "1.5.0", tugboatv1alpha1.HealthFailed)
	recordRelease(t, ns, "dev-1", "apps", "api", "api", "2.0.0", tugboatv1alpha1.HealthCurrent)
	recordRelease(t, other, "edge-1", "apps", "web", "web", "1.4.0", tugboatv1alpha1.HealthCurrent)

	out, _, err := tugboat("releases", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lineWith(out, "SPOKE", "RELEASE", "HEALTH")).NotTo(BeNil(), out)
	g.Expect(lineWith(out, "prod-1", "web")).To(Equal([]string{"prod-1", "apps", "web", "3", "web", "1.4.0", "deployed", "Current", "2026-05-01T10:00:00Z"}), out)
	g.Expect(lineWith(out, "dev-1", "api")).NotTo(BeNil(), out)
	g.Expect(lineWith(out, "edge-1")).To(BeNil(), "another namespace: %s", out)

	out, _, err = tugboat("releases", "-n", ns, "--unhealthy", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var list struct {
		Releases []struct {
			Spoke, Release, ChartVersion, Health string
		}
	}
	g.Expect(json.Unmarshal([]byte(out), &list)).To(Succeed(), out)
	g.Expect(list.Releases).To(HaveLen(1))
	g.Expect(list.Releases[0].Spoke).To(Equal("dev-1"))
	g.Expect(list.Releases[0].Health).To(Equal("Failed"))

	out, _, err = tugboat("releases", "-A", "--chart", "web", "--version", "1.4.0", "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred())
	var y struct {
		Releases []struct {
			Spoke        string `json:"spoke"`
			HubNamespace string `json:"hubNamespace"`
		} `json:"releases"`
	}
	g.Expect(yaml.Unmarshal([]byte(out), &y)).To(Succeed(), out)
	spokes := []string{}
	for _, r := range y.Releases {
		if r.HubNamespace == ns || r.HubNamespace == other {
			spokes = append(spokes, r.Spoke)
		}
	}
	g.Expect(spokes).To(ConsistOf("prod-1", "edge-1"))

	out, errOut, err := tugboat("releases", "-n", ns, "--spoke", "nope")
	g.Expect(err).NotTo(HaveOccurred(), "an empty list is not an error")
	g.Expect(lineWith(out, "prod-1")).To(BeNil())
	g.Expect(errOut).To(ContainSubstring("No releases in namespace " + ns))

	_, _, err = tugboat("releases", "-n", ns, "-o", "xml")
	g.Expect(err).To(MatchError(ContainSubstring(`unknown output format "xml"`)))
}

func TestTarget_showsTheHubTheContextAndTheNamespace(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	// A context whose namespace is ns: the CLI talks to it, as kubectl does.
	kc := kubeconfigVariant(t, cluster.KubeconfigPath, func(c *clientcmdapi.Config) {
		for _, ctx := range c.Contexts {
			ctx.Namespace = ns
		}
	})
	out, _, err := run("target", "--kubeconfig", kc, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var v struct {
		Server, Namespace, NamespaceFrom, User, Version string
		Reachable, TugboatCRDs                          bool
	}
	g.Expect(json.Unmarshal([]byte(out), &v)).To(Succeed(), out)
	g.Expect(v.Server).To(Equal(cluster.RESTConfig.Host))
	g.Expect(v.Namespace).To(Equal(ns))
	g.Expect(v.NamespaceFrom).To(Equal("context"))
	g.Expect(v.Reachable).To(BeTrue())
	g.Expect(v.TugboatCRDs).To(BeTrue())
	g.Expect(v.User).NotTo(BeEmpty(), "the user the API server authenticated")

	out, _, err = run("target", "--kubeconfig", kc, "-n", "elsewhere")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(lineWith(out, "Namespace:", "elsewhere", "(from", "flag)")).NotTo(BeNil(), out)
	g.Expect(lineWith(out, "tugboat.dev/v1alpha1:", "served")).NotTo(BeNil(), out)

	dead := kubeconfigVariant(t, cluster.KubeconfigPath, func(c *clientcmdapi.Config) {
		for _, cl := range c.Clusters {
			cl.Server = "https://127.0.0.1:1"
		}
	})
	out, _, err = run("target", "--kubeconfig", dead)
	g.Expect(err).To(MatchError(ContainSubstring("cannot reach the hub at https://127.0.0.1:1")))
	g.Expect(lineWith(out, "Hub:", "https://127.0.0.1:1")).NotTo(BeNil(), out)
}
