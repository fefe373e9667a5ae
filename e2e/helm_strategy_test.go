package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/agent"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/devenv"
	"tugboat.dev/tugboat/e2e/harness"
)

// TestHelmStrategy_agentsPromoteWithinTheirLimits runs a hub and three
// spokes (dev, staging, production) whose agents carry out promotions
// themselves (helm strategy; the hub holds no kubeconfig for any spoke):
// a release installed with the real helm CLI in dev reaches staging and
// production through the agents' Helm upgrades; actions outside a spoke's
// limits are refused and the Promotion says why; a production agent that
// is offline makes the Promotion fail at the timeout, naming the target.
func TestHelmStrategy_agentsPromoteWithinTheirLimits(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root, err := bins.FindRepoRoot(".")
	g.Expect(err).NotTo(HaveOccurred())
	helmCLI, err := bins.EnsureHelm(ctx, root, nil)
	g.Expect(err).NotTo(HaveOccurred())
	repo, err := devenv.StartChartRepo(t.TempDir(), "1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(repo.Stop)

	hubCluster, clusters := startClusters(t, 3)
	f := newFleetWith(t, hubCluster, func(o *hub.Options) { o.Receiver.ActionPollTimeout = 2 * time.Second })
	names := []string{"dev", "staging", "production"}
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 0})
	stops := map[string]func(){}
	for i, n := range names {
		keyFile := filepath.Join(t.TempDir(), n+".key")
		g.Expect(os.WriteFile(keyFile, f.registerSpoke(n), 0o600)).To(Succeed())
		_, stop := f.agentWith(n, f.agentConfig(clusters[i], "apps"), keyFile, log.WithName(n), func(o *agent.Options) {
			o.Actions.Limits.Namespaces = []string{"apps"}
			o.Actions.Limits.ChartSources = []string{repo.URL}
		})
		stops[n] = stop
	}
	helmCLIInstall := func(i int, version string) {
		t.Helper()
		out, err := exec.Command(helmCLI, "--kubeconfig", clusters[i].KubeconfigPath, "install", "demo", repo.ChartURL(version),
			"-n", "apps", "--create-namespace").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
	}
	// staging and production run 1.0.0 (revision 1).
	helmCLIInstall(1, "1.0.0")
	helmCLIInstall(2, "1.0.0")

	p := webPipeline(f.ns, tugboatv1alpha1.StrategyHelm)
	p.Name = "demo"
	p.Spec.Release = "demo"
	p.Spec.Promotion.Helm = &tugboatv1alpha1.HelmStrategy{Repository: repo.URL, Chart: "demo"}
	p.Spec.Timeout = &metav1.Duration{Duration: 20 * time.Second}
	g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())

	t.Run("a helm CLI install in dev reaches staging and production through the agents", func(t *testing.T) {
		g := NewWithT(t)
		helmCLIInstall(0, "1.1.0")
		for _, env := range []string{"staging", "production"} {
			name := pipeline.PromotionName("demo", env, "1.1.0")
			g.Eventually(f.phase(name)).WithTimeout(120*time.Second).WithPolling(200*time.Millisecond).
				Should(Equal(tugboatv1alpha1.PromotionSucceeded), "promotion %s", name)
			g.Expect(f.targets(g, name)).To(HaveLen(1))
			g.Expect(f.targets(g, name)[0].Action).NotTo(BeNil())
			g.Expect(f.targets(g, name)[0].Action.Phase).To(Equal(tugboatv1alpha1.ActionSucceeded))
			g.Expect(f.targets(g, name)[0].Action.Revision).To(Equal(int32(2)))
			g.Expect(f.current(env, "apps", "demo")(g)).To(Equal(current{2, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
		}
		// The revision was made by the agent's action.
		h := newHelm(t, clusters[2], "apps")
		rel, err := h.get("demo")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rel.Version).To(Equal(2))
		g.Expect(rel.Info.Description).To(ContainSubstring("tugboat action"))
	})

	t.Run("actions outside a spoke's limits are refused and the Promotion says why", func(t *testing.T) {
		g := NewWithT(t)
		// A downgrade requested by hand.
		var got tugboatv1alpha1.Pipeline
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		pr, err := request.Create(ctx, hubCluster.Client, &got, "staging", "1.0.0", tugboatv1alpha1.RequestedByUser, "test")
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(f.phase(pr.Name)).WithTimeout(60 * time.Second).Should(Equal(tugboatv1alpha1.PromotionFailed))
		g.Expect(readyMessage(f.promotion(g, pr.Name))).To(And(ContainSubstring("refused"), ContainSubstring("downgrade")))

		// A chart source the spoke does not allow.
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		patch := client.MergeFrom(got.DeepCopy())
		got.Spec.Environments[1].Promotion = &tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm,
			Helm: &tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example/other", Chart: "demo"}}
		g.Expect(hubCluster.Client.Patch(ctx, &got, patch)).To(Succeed())
		pr, err = request.Create(ctx, hubCluster.Client, &got, "staging", "1.4.0", tugboatv1alpha1.RequestedByUser, "test")
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(f.phase(pr.Name)).WithTimeout(60 * time.Second).Should(Equal(tugboatv1alpha1.PromotionFailed))
		g.Expect(readyMessage(f.promotion(g, pr.Name))).To(And(ContainSubstring("refused"), ContainSubstring("charts.example/other")))

		// A namespace the spoke does not allow.
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		patch = client.MergeFrom(got.DeepCopy())
		got.Spec.Environments[1].Promotion = nil
		// Only the forbidden target: staging itself must not move here.
		got.Spec.Environments[1].Targets = []tugboatv1alpha1.Target{{Spoke: "staging", Namespace: "forbidden"}}
		g.Expect(hubCluster.Client.Patch(ctx, &got, patch)).To(Succeed())
		pr, err = request.Create(ctx, hubCluster.Client, &got, "staging", "1.4.0", tugboatv1alpha1.RequestedByUser, "test")
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(f.phase(pr.Name)).WithTimeout(60 * time.Second).Should(Equal(tugboatv1alpha1.PromotionFailed))
		g.Expect(readyMessage(f.promotion(g, pr.Name))).To(And(ContainSubstring("staging/forbidden/demo"), ContainSubstring("refused"), ContainSubstring("forbidden")))
		// Nothing changed on staging.
		g.Expect(f.current("staging", "apps", "demo")(g).Revision).To(Equal(int32(2)))

		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		patch = client.MergeFrom(got.DeepCopy())
		got.Spec.Environments[1].Targets = []tugboatv1alpha1.Target{{Spoke: "staging", Namespace: "apps"}}
		g.Expect(hubCluster.Client.Patch(ctx, &got, patch)).To(Succeed())
	})

	t.Run("a Flux HelmRelease target is updated by the spoke's agent, with no hub kubeconfig", func(t *testing.T) {
		g := NewWithT(t)
		hctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		t.Cleanup(func() { cancel(); wg.Wait() })
		prod := clusters[2]
		g.Expect(harness.InstallCRDs(ctx, prod.Client, fluxCRDs)).To(Succeed())
		// The HelmRelease names the chart its release runs (demo), as with
		// a real helm-controller: the agent refuses an action for another.
		hrObj := newHelmRelease("apps", "demo", "1.1.0")
		g.Expect(unstructured.SetNestedField(hrObj.Object, "demo", "spec", "chart", "spec", "chart")).To(Succeed())
		g.Expect(prod.Client.Create(ctx, hrObj)).To(Succeed())
		wg.Add(1)
		go fakeHelmController(hctx, t, prod, "apps", "demo", &wg, func(version string) {
			out, err := exec.Command(helmCLI, "--kubeconfig", prod.KubeconfigPath, "upgrade", "demo", repo.ChartURL(version), "-n", "apps").CombinedOutput()
			if err != nil {
				t.Errorf("helm-controller stand-in: helm upgrade demo %s: %v: %s", version, err, out)
			}
		})
		var got tugboatv1alpha1.Pipeline
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		patch := client.MergeFrom(got.DeepCopy())
		got.Spec.Environments[2].Targets[0].HelmRelease = &tugboatv1alpha1.ObjectReference{Name: "demo"}
		g.Expect(hubCluster.Client.Patch(ctx, &got, patch)).To(Succeed())
		var sp tugboatv1alpha1.Spoke
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "production"}, &sp)).To(Succeed())
		g.Expect(sp.Spec.KubeConfigSecretRef).To(BeNil())
		g.Expect(sp.Spec.ClusterRef).To(BeNil())

		out, err := exec.Command(helmCLI, "--kubeconfig", clusters[0].KubeconfigPath, "upgrade", "demo", repo.ChartURL("1.2.0"), "-n", "apps").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		name := pipeline.PromotionName("demo", "production", "1.2.0")
		g.Eventually(f.phase(name)).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionSucceeded))
		hr := newHelmRelease("apps", "demo", "")
		g.Expect(prod.Client.Get(ctx, client.ObjectKeyFromObject(hr), hr)).To(Succeed())
		v, _, _ := unstructured.NestedString(hr.Object, "spec", "chart", "spec", "version")
		g.Expect(v).To(Equal("1.2.0"))
		managers := map[string]bool{}
		for _, mf := range hr.GetManagedFields() {
			managers[mf.Manager] = true
		}
		g.Expect(managers).To(HaveKey("tugboat"))
		g.Expect(f.current("production", "apps", "demo")(g).Version).To(Equal("1.2.0"))
	})

	t.Run("an offline production agent: the Promotion fails at the timeout naming the target", func(t *testing.T) {
		g := NewWithT(t)
		stops["production"]()
		helmCLIUpgrade := exec.Command(helmCLI, "--kubeconfig", clusters[0].KubeconfigPath, "upgrade", "demo", repo.ChartURL("1.3.0"), "-n", "apps")
		out, err := helmCLIUpgrade.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		name := pipeline.PromotionName("demo", "production", "1.3.0")
		g.Eventually(f.phase(name)).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionFailed))
		msg := readyMessage(f.promotion(g, name))
		g.Expect(msg).To(ContainSubstring("timed out"))
		g.Expect(msg).To(ContainSubstring("production/apps/demo"))
		g.Expect(strings.ToLower(msg)).To(ContainSubstring("not fetched"))
	})
}

func readyMessage(pr *tugboatv1alpha1.Promotion) string {
	if pr == nil {
		return ""
	}
	for _, c := range pr.Status.Conditions {
		if c.Type == "Ready" {
			return c.Message
		}
	}
	return ""
}
