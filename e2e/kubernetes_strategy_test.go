package e2e_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/e2e/fluxtest"
	"tugboat.dev/tugboat/e2e/harness"
)

var helmReleaseGVK = fluxtest.HelmReleaseGVK

// fakeHelmController runs helm-controller's stand-in (fluxtest.HelmController)
// for HelmRelease ns/name on c until ctx ends: upgrade (nil: a Helm SDK
// upgrade with the web test chart) upgrades the release.
func fakeHelmController(ctx context.Context, t *testing.T, c *harness.Cluster, ns, name string, wg *sync.WaitGroup, upgrade func(version string)) {
	countingHelmController(ctx, t, c, ns, name, wg, upgrade, nil)
}

// countingHelmController is fakeHelmController counting its reconciles in
// reconciles (when not nil).
func countingHelmController(ctx context.Context, t *testing.T, c *harness.Cluster, ns, name string, wg *sync.WaitGroup, upgrade func(version string), reconciles *atomic.Int64) {
	defer wg.Done()
	h := newHelm(t, c, ns)
	if upgrade == nil {
		upgrade = func(version string) { h.upgrade(name, version, nil) }
	}
	hc := helmControllerFor(t, c, h, name, func(_ context.Context, version string) error {
		upgrade(version)
		return nil
	})
	hc.Reconciles = reconciles
	hc.Run(ctx)
}

// helmControllerFor is the stand-in for HelmRelease name of h's namespace on
// c, reading and rolling back the release through h, upgrading with upgrade.
func helmControllerFor(t *testing.T, c *harness.Cluster, h *helmClient, name string, upgrade func(ctx context.Context, version string) error) *fluxtest.HelmController {
	return &fluxtest.HelmController{
		Client:  c.Client,
		Key:     client.ObjectKey{Namespace: h.ns, Name: name},
		Release: func() (*release.Release, error) { return h.get(name) },
		Upgrade: upgrade,
		Rollback: func(_ context.Context, revision int) error {
			h.rollback(name, revision)
			return nil
		},
		Logf: t.Logf,
	}
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

// TestKubernetesStrategy_aFluxIntervalDoesNotRestartTheSoak soaks staging,
// Flux-managed, for 30 s while helm-controller (the stand-in, reconciling as
// v1.6 does) reconciles its HelmRelease every second, setting
// Reconciling=True each time with nothing to do: the soak completes on time
// (staging's healthySince never moves, the Promotion into production starts
// at most 5 s after the soak ends), and the routine reconciles add no event
// to staging's ReleaseHistory.
func TestKubernetesStrategy_aFluxIntervalDoesNotRestartTheSoak(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	hubCluster, clusters := startClusters(t, 2)
	f := newFleet(t, hubCluster)
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 0})
	var reconciles atomic.Int64
	for i, n := range []string{"staging", "production"} {
		g.Expect(harness.InstallCRDs(ctx, clusters[i].Client, fluxCRDs)).To(Succeed())
		f.addSpoke(n, clusters[i], log.WithName(n))
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
		version := map[string]string{"staging": "1.0.0", "production": "0.9.0"}[n]
		newHelm(t, clusters[i], "apps").install("web", version)
		hr := newHelmRelease("apps", "web", version)
		g.Expect(unstructured.SetNestedField(hr.Object, "1s", "spec", "interval")).To(Succeed())
		g.Expect(clusters[i].Client.Create(ctx, hr)).To(Succeed())
		wg.Add(1)
		var counter *atomic.Int64
		if n == "staging" {
			counter = &reconciles
		}
		go countingHelmController(ctx, t, clusters[i], "apps", "web", &wg, nil, counter)
	}
	// Staging is Flux's and healthy before the Pipeline looks at it.
	g.Eventually(func(g Gomega) {
		rh := f.history(g, "staging", "apps", "web")
		g.Expect(rh).NotTo(BeNil())
		g.Expect(rh.Status.HelmRelease).NotTo(BeNil())
		g.Expect(rh.Status.HelmRelease.Ready).To(Equal(metav1.ConditionTrue))
		g.Expect(rh.Status.Current.Health).To(Equal(tugboatv1alpha1.HealthCurrent))
	}).WithTimeout(hubWait).WithPolling(poll).Should(Succeed())

	const soak = 30 * time.Second
	p := webPipeline(f.ns, tugboatv1alpha1.StrategyKubernetes)
	p.Spec.Environments = p.Spec.Environments[1:]
	p.Spec.Environments[0].Gates.SoakTime = &metav1.Duration{Duration: soak}
	for i := range p.Spec.Environments {
		p.Spec.Environments[i].Targets[0].HelmRelease = &tugboatv1alpha1.ObjectReference{Name: "web"}
	}
	g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())
	pipelineStatus := func(g Gomega) *tugboatv1alpha1.Pipeline {
		var got tugboatv1alpha1.Pipeline
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		return &got
	}
	var since time.Time
	g.Eventually(func(g Gomega) {
		envs := pipelineStatus(g).Status.Environments
		g.Expect(envs).NotTo(BeEmpty())
		g.Expect(envs[0].HealthySince).NotTo(BeNil())
		since = envs[0].HealthySince.Time
	}).WithTimeout(30 * time.Second).WithPolling(poll).Should(Succeed())
	events := func(g Gomega) int {
		rh := f.history(g, "staging", "apps", "web")
		n := 0
		for _, r := range rh.Status.Revisions {
			for _, e := range r.Events {
				n += max(int(e.Count), 1)
			}
		}
		return n
	}
	eventsAtStart, reconcilesAtStart := events(g), reconciles.Load()

	name := pipeline.PromotionName("web", "production", "1.0.0")
	g.Eventually(func() *tugboatv1alpha1.Promotion { return f.promotion(nil, name) }).
		WithTimeout(time.Until(since.Add(soak+5*time.Second))).WithPolling(200*time.Millisecond).
		ShouldNot(BeNil(), func() string {
			return fmt.Sprintf("the Promotion into production starts once staging soaked %s (healthy since %s); staging's healthySince is now %v",
				soak, since, pipelineStatus(g).Status.Environments[0].HealthySince)
		})
	created := f.promotion(g, name).CreationTimestamp.Time
	g.Expect(created).NotTo(BeTemporally("<", since.Add(soak).Truncate(time.Second)), "not before the soak ends")
	g.Expect(pipelineStatus(g).Status.Environments[0].HealthySince.Time).To(BeTemporally("==", since), "the soak was never restarted")
	g.Expect(reconciles.Load()-reconcilesAtStart).To(BeNumerically(">=", 20), "helm-controller reconciled every second meanwhile")
	g.Expect(events(g)).To(Equal(eventsAtStart), "routine reconciles add no event to the history")
	g.Eventually(f.phase(name)).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).
		Should(Equal(tugboatv1alpha1.PromotionSucceeded))
}
