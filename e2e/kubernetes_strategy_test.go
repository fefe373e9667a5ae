package e2e_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/e2e/harness"
)

var helmReleaseGVK = schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"}

// fakeHelmController stands in for Flux helm-controller on one spoke: when
// the HelmRelease's spec.chart.spec.version differs from the installed
// release, it upgrades the release to that version (upgrade nil: a Helm SDK
// upgrade with the web test chart); once they agree, it writes the status
// helm-controller writes after a successful release (markReleased), which
// the spoke's agent folds into the release's health.
func fakeHelmController(ctx context.Context, t *testing.T, c *harness.Cluster, ns, name string, wg *sync.WaitGroup, upgrade func(version string)) {
	defer wg.Done()
	h := newHelm(t, c, ns)
	if upgrade == nil {
		upgrade = func(version string) { h.upgrade(name, version, nil) }
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		hr := &unstructured.Unstructured{}
		hr.SetGroupVersionKind(helmReleaseGVK)
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hr); err != nil {
			continue
		}
		want, _, _ := unstructured.NestedString(hr.Object, "spec", "chart", "spec", "version")
		rel, err := h.get(name)
		if err != nil || want == "" {
			continue
		}
		if rel.Chart.Metadata.Version != want {
			upgrade(want)
			continue
		}
		observed, _, _ := unstructured.NestedInt64(hr.Object, "status", "observedGeneration")
		if observed != hr.GetGeneration() {
			if err := markReleased(ctx, c.Client, hr, rel); err != nil && ctx.Err() == nil {
				t.Logf("helm-controller stand-in: writing the status of HelmRelease %s/%s: %v", ns, name, err)
			}
		}
	}
}

// markReleased writes the status helm-controller v1.6 writes on hr after
// it installed or upgraded the Helm release to rel: Ready and Released
// True, the release in history, lastAttemptedRevision, and the generation
// observed.
func markReleased(ctx context.Context, c client.Client, hr *unstructured.Unstructured, rel *release.Release) error {
	gen := hr.GetGeneration()
	now := time.Now().UTC().Format(time.RFC3339)
	verb, action := "upgrade", "upgrade"
	if rel.Version == 1 {
		verb, action = "install", "install"
	}
	reason := strings.ToUpper(verb[:1]) + verb[1:] + "Succeeded"
	version := rel.Chart.Metadata.Version
	msg := fmt.Sprintf("Helm %s succeeded for release %s/%s.v%d with chart %s@%s", verb, rel.Namespace, rel.Name, rel.Version, rel.Chart.Metadata.Name, version)
	cond := func(typ string) any {
		return map[string]any{"type": typ, "status": "True", "reason": reason, "message": msg, "observedGeneration": gen, "lastTransitionTime": now}
	}
	digest := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(rel.Manifest)))
	hr.Object["status"] = map[string]any{
		"observedGeneration": gen, "lastAttemptedGeneration": gen, "lastAttemptedRevision": version,
		"lastAttemptedReleaseAction": action, "storageNamespace": rel.Namespace,
		"history": []any{map[string]any{
			"apiVersion": "helm.toolkit.fluxcd.io/v2", "name": rel.Name, "namespace": rel.Namespace, "version": int64(rel.Version),
			"chartName": rel.Chart.Metadata.Name, "chartVersion": version, "appVersion": rel.Chart.Metadata.AppVersion,
			"status": "deployed", "digest": digest, "configDigest": digest, "firstDeployed": now, "lastDeployed": now,
		}},
		"conditions": []any{cond("Ready"), cond("Released")},
	}
	return c.Status().Update(ctx, hr)
}

func newHelmRelease(ns, name, version string) *unstructured.Unstructured {
	hr := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"interval": "5m",
			"chart": map[string]any{"spec": map[string]any{
				"chart": "web", "version": version,
				"sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"},
			}},
		},
	}}
	hr.SetGroupVersionKind(helmReleaseGVK)
	hr.SetNamespace(ns)
	hr.SetName(name)
	return hr
}

// TestKubernetesStrategy_promotesThroughFluxHelmReleases installs 1.0.0 in
// dev and lets the kubernetes strategy carry it to staging and production by
// server-side applying spec.chart.spec.version on their HelmReleases; the
// test plays helm-controller, so the releases on the spokes are real.
func TestKubernetesStrategy_promotesThroughFluxHelmReleases(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	hubCluster, clusters := startClusters(t, 3)
	f := newFleet(t, hubCluster)
	names := []string{"dev", "staging", "production"}
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 0})
	for i, n := range names {
		g.Expect(harness.InstallCRDs(ctx, clusters[i].Client, fluxCRDs)).To(Succeed())
		f.addSpoke(n, clusters[i], log.WithName(n))
		// The hub reaches the spoke through a kubeconfig Secret.
		kubeconfig, err := os.ReadFile(clusters[i].KubeconfigPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(hubCluster.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: n + "-kubeconfig"},
			Data:       map[string][]byte{"value": kubeconfig},
		})).To(Succeed())
		var sp tugboatv1alpha1.Spoke
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: n}, &sp)).To(Succeed())
		patch := client.MergeFrom(sp.DeepCopy())
		sp.Spec.KubeConfigSecretRef = &tugboatv1alpha1.SecretKeyReference{Name: n + "-kubeconfig"}
		g.Expect(hubCluster.Client.Patch(ctx, &sp, patch)).To(Succeed())

		version := "0.9.0"
		if n == "dev" {
			version = "1.0.0"
		}
		newHelm(t, clusters[i], "apps").install("web", version)
		g.Expect(clusters[i].Client.Create(ctx, newHelmRelease("apps", "web", version))).To(Succeed())
		wg.Add(1)
		go fakeHelmController(ctx, t, clusters[i], "apps", "web", &wg, nil)
	}

	p := webPipeline(f.ns, tugboatv1alpha1.StrategyKubernetes)
	for i := range p.Spec.Environments {
		p.Spec.Environments[i].Targets[0].HelmRelease = &tugboatv1alpha1.ObjectReference{Name: "web"}
	}
	g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())

	for _, env := range []string{"staging", "production"} {
		name := pipeline.PromotionName("web", env, "1.0.0")
		g.Eventually(f.phase(name)).WithTimeout(90*time.Second).WithPolling(200*time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionSucceeded), "promotion %s", name)
		g.Eventually(f.current(env, "apps", "web")).WithTimeout(30 * time.Second).
			Should(Equal(current{2, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
	}
	// The HelmRelease carries the version, set by tugboat's field manager.
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(helmReleaseGVK)
	g.Expect(clusters[2].Client.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "web"}, hr)).To(Succeed())
	v, _, _ := unstructured.NestedString(hr.Object, "spec", "chart", "spec", "version")
	g.Expect(v).To(Equal("1.0.0"))
	managers := map[string]bool{}
	for _, mf := range hr.GetManagedFields() {
		managers[mf.Manager] = true
	}
	g.Expect(managers).To(HaveKey("tugboat"))
	// Each environment got exactly one Helm upgrade (revision 2).
	var promos tugboatv1alpha1.PromotionList
	g.Expect(hubCluster.Client.List(ctx, &promos, client.InNamespace(f.ns))).To(Succeed())
	g.Expect(promos.Items).To(HaveLen(2))
}
