package e2e_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/e2e/harness"
)

var helmReleaseGVK = schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"}

// fakeHelmController stands in for Flux helm-controller on one spoke, and
// reconciles as helm-controller v1.6 does (internal/controller
// reconcileRelease, internal/reconcile AtomicRelease): on a new generation,
// and every spec.interval however nothing changed, it sets
// Reconciling=True ("Fulfilling prerequisites") and keeps Ready as it was
// while it loads the chart (prerequisites: a short while here, where the
// real one takes milliseconds to seconds); when the HelmRelease's
// spec.chart.spec.version differs from the installed release, it sets
// Ready=Unknown and Reconciling "Running 'upgrade' action", upgrades the
// release (upgrade nil: a Helm SDK upgrade with the web test chart) and
// writes the status helm-controller writes after a successful release
// (markReleased), which the spoke's agent folds into the release's health;
// when they agree, it finds the release in sync and removes Reconciling.
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
	const prerequisites = 150 * time.Millisecond
	key := client.ObjectKey{Namespace: ns, Name: name}
	logf := func(format string, args ...any) {
		if ctx.Err() == nil {
			t.Logf("helm-controller stand-in: HelmRelease %s/%s: "+format, append([]any{ns, name}, args...)...)
		}
	}
	var last time.Time // the last reconcile
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		hr := &unstructured.Unstructured{}
		hr.SetGroupVersionKind(helmReleaseGVK)
		if err := c.Client.Get(ctx, key, hr); err != nil {
			continue
		}
		want, _, _ := unstructured.NestedString(hr.Object, "spec", "chart", "spec", "version")
		observed, _, _ := unstructured.NestedInt64(hr.Object, "status", "observedGeneration")
		if want == "" || (observed == hr.GetGeneration() && time.Since(last) < hrInterval(hr)) {
			continue
		}
		last = time.Now()
		if reconciles != nil {
			reconciles.Add(1)
		}
		if err := setHRConditions(ctx, c.Client, key, hrCond("Reconciling", "True", "Progressing", "Fulfilling prerequisites")); err != nil {
			logf("%v", err)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(prerequisites):
		}
		rel, err := h.get(name)
		if err != nil {
			continue
		}
		if rel.Chart.Metadata.Version != want {
			const running = "Running 'upgrade' action with timeout of 5m0s"
			if err := setHRConditions(ctx, c.Client, key, hrCond("Reconciling", "True", "Progressing", running),
				hrCond("Ready", "Unknown", "Progressing", running)); err != nil {
				logf("%v", err)
				continue
			}
			upgrade(want)
			if rel, err = h.get(name); err != nil || rel.Chart.Metadata.Version != want {
				continue // the upgrade is not done yet: the next reconcile looks again
			}
		}
		if err := c.Client.Get(ctx, key, hr); err != nil {
			continue
		}
		if observed, _, _ = unstructured.NestedInt64(hr.Object, "status", "observedGeneration"); observed != hr.GetGeneration() || rel.Version > historyVersion(hr) {
			if err := markReleased(ctx, c.Client, hr, rel); err != nil {
				logf("writing the status: %v", err)
			}
			continue
		}
		// In sync: Reconciling goes, Ready stays as it was.
		if err := setHRConditions(ctx, c.Client, key, map[string]any{"type": "Reconciling"}); err != nil {
			logf("%v", err)
		}
	}
}

// hrInterval is the HelmRelease's spec.interval (5m when unset or not a
// duration).
func hrInterval(hr *unstructured.Unstructured) time.Duration {
	s, _, _ := unstructured.NestedString(hr.Object, "spec", "interval")
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d
	}
	return 5 * time.Minute
}

// historyVersion is the Helm revision of the HelmRelease's latest
// status.history entry (0 when none).
func historyVersion(hr *unstructured.Unstructured) int {
	history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
	if len(history) == 0 {
		return 0
	}
	latest, _ := history[0].(map[string]any)
	v, _, _ := unstructured.NestedInt64(latest, "version")
	return int(v)
}

// hrCond is a HelmRelease condition as helm-controller writes it, for the
// generation it reconciles (filled in by setHRConditions).
func hrCond(typ, status, reason, msg string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}
}

// setHRConditions sets conds on the HelmRelease's status.conditions,
// replacing those of the same type, and keeps the others; a condition
// with only a type is removed. It retries on conflicts.
func setHRConditions(ctx context.Context, c client.Client, key client.ObjectKey, conds ...map[string]any) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		hr := &unstructured.Unstructured{}
		hr.SetGroupVersionKind(helmReleaseGVK)
		if err := c.Get(ctx, key, hr); err != nil {
			return err
		}
		now := time.Now().UTC().Format(time.RFC3339)
		existing, _, _ := unstructured.NestedSlice(hr.Object, "status", "conditions")
		for _, want := range conds {
			kept := existing[:0:0]
			for _, e := range existing {
				if m, ok := e.(map[string]any); !ok || m["type"] != want["type"] {
					kept = append(kept, e)
				}
			}
			existing = kept
			if _, ok := want["status"]; ok {
				cond := map[string]any{"observedGeneration": hr.GetGeneration(), "lastTransitionTime": now}
				for k, v := range want {
					cond[k] = v
				}
				existing = append(existing, cond)
			}
		}
		if err := unstructured.SetNestedSlice(hr.Object, existing, "status", "conditions"); err != nil {
			return err
		}
		return c.Status().Update(ctx, hr)
	})
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
