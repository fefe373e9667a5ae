package admission_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"tugboat.dev/tugboat/agent/admission"
	"tugboat.dev/tugboat/agent/ownership"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
)

// TestWebhooks_labelHelmReleaseAndItsDependents installs the test chart
// with the Helm SDK while the webhooks are registered: Helm's objects get
// the labels from their annotations, the ReplicaSet and Pods that
// kube-controller-manager creates get them through their owners in the
// index, whose UIDs the observing webhook recorded, and the release Secret
// write is reported.
func TestWebhooks_labelHelmReleaseAndItsDependents(t *testing.T) {
	g := NewWithT(t)
	c := spoke(t)
	ctx := context.Background()
	const ns = "apps"
	createNamespace(t, c, ns)
	ix := ownership.NewIndex(0)
	run := startWebhooks(t, c, &admission.Webhooks{Index: ix}, ns)

	rel, err := helmInstall(ctx, t, c, ns, "web")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Info.Status.String()).To(Equal("deployed"))
	want := ownership.Release{Name: "web", Namespace: ns}

	dep := &appsv1.Deployment{}
	for _, obj := range []client.Object{dep, &corev1.Service{}, &corev1.ConfigMap{}} {
		name := "web"
		if _, ok := obj.(*corev1.ConfigMap); ok {
			name = "web-config"
		}
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)).To(Succeed())
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue(tugboatv1alpha1.LabelRelease, "web"), "%T", obj)
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue(tugboatv1alpha1.LabelReleaseNamespace, ns), "%T", obj)
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/name", "web"), "chart labels kept")
	}
	g.Expect(dep.Spec.Template.Labels).NotTo(HaveKey(tugboatv1alpha1.LabelRelease), "the pod template is not touched")
	g.Expect(found(ix.Lookup(dep.UID))).To(Equal(want), "the observing webhook recorded the Deployment's UID")

	selector := client.MatchingLabels{"app.kubernetes.io/instance": "web"}
	var rs appsv1.ReplicaSet
	g.Eventually(func(g Gomega) {
		var list appsv1.ReplicaSetList
		g.Expect(c.Client.List(ctx, &list, client.InNamespace(ns), selector)).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1), "one ReplicaSet: labeling caused no rollout")
		rs = list.Items[0]
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(rs.OwnerReferences).To(ContainElement(HaveField("UID", dep.UID)))
	g.Expect(rs.Labels).To(HaveKeyWithValue(tugboatv1alpha1.LabelRelease, "web"))
	g.Expect(rs.Labels).To(HaveKeyWithValue(tugboatv1alpha1.LabelReleaseNamespace, ns))
	g.Expect(found(ix.Lookup(rs.UID))).To(Equal(want))

	g.Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(c.Client.List(ctx, &pods, client.InNamespace(ns), selector)).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(2))
		for _, p := range pods.Items {
			g.Expect(p.OwnerReferences).To(ContainElement(HaveField("UID", rs.UID)))
			g.Expect(p.Labels).To(HaveKeyWithValue(tugboatv1alpha1.LabelRelease, "web"), p.Name)
			g.Expect(p.Labels).To(HaveKeyWithValue(tugboatv1alpha1.LabelReleaseNamespace, ns), p.Name)
		}
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	g.Expect(run.releaseSecrets()).To(ContainElement("CREATE apps/sh.helm.release.v1.web.v1"))
	g.Expect(run.metrics.Decisions("mutate-ownership", admission.ResultLabeled)).To(BeNumerically(">=", 6))
	g.Expect(run.metrics.Decisions("mutate-ownership", admission.ResultError)).To(BeZero())
	g.Expect(run.metrics.Decisions("observe-ownership", admission.ResultObserved)).To(BeNumerically(">=", 2))
}

// TestBackfill_labelsReleaseInstalledBeforeTheWebhooks installs a release
// while no webhook is registered, registers them, and runs Backfill: every
// object of the release, down to the Pods, gets the labels, and a second
// pass finds nothing left to do.
func TestBackfill_labelsReleaseInstalledBeforeTheWebhooks(t *testing.T) {
	g := NewWithT(t)
	c := spoke(t)
	ctx := context.Background()
	const ns = "legacy"
	createNamespace(t, c, ns)

	_, err := helmInstall(ctx, t, c, ns, "old")
	g.Expect(err).NotTo(HaveOccurred())
	selector := client.MatchingLabels{"app.kubernetes.io/instance": "old"}
	objects := func(g Gomega) []client.Object {
		var deps appsv1.DeploymentList
		var rss appsv1.ReplicaSetList
		var pods corev1.PodList
		var svc corev1.Service
		var cm corev1.ConfigMap
		g.Expect(c.Client.List(ctx, &deps, client.InNamespace(ns), selector)).To(Succeed())
		g.Expect(c.Client.List(ctx, &rss, client.InNamespace(ns), selector)).To(Succeed())
		g.Expect(c.Client.List(ctx, &pods, client.InNamespace(ns), selector)).To(Succeed())
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "old"}, &svc)).To(Succeed())
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "old-config"}, &cm)).To(Succeed())
		g.Expect(deps.Items).To(HaveLen(1))
		g.Expect(rss.Items).To(HaveLen(1))
		g.Expect(pods.Items).To(HaveLen(2))
		objs := []client.Object{&deps.Items[0], &rss.Items[0], &pods.Items[0], &pods.Items[1], &svc, &cm}
		return objs
	}
	g.Eventually(func(g Gomega) {
		for _, obj := range objects(g) {
			g.Expect(obj.GetLabels()).NotTo(HaveKey(tugboatv1alpha1.LabelRelease), "installed before any webhook")
		}
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	ix := ownership.NewIndex(0)
	startWebhooks(t, c, &admission.Webhooks{Index: ix}, ns)
	mc, err := metadata.NewForConfig(c.RESTConfig)
	g.Expect(err).NotTo(HaveOccurred())
	start := time.Now()
	res, err := ownership.Backfill(ctx, mc, ix, ownership.BackfillOptions{Namespaces: []string{ns}, PatchesPerSecond: 4})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(ownership.BackfillResult{Listed: res.Listed, Labeled: 6, Untracked: res.Untracked}))
	// 4 patches/s with a burst of 4: the last two patches waited.
	g.Expect(time.Since(start)).To(BeNumerically(">=", 400*time.Millisecond), "patches are rate-limited")

	want := ownership.Release{Name: "old", Namespace: ns}
	g.Eventually(func(g Gomega) {
		for _, obj := range objects(g) {
			g.Expect(obj.GetLabels()).To(HaveKeyWithValue(tugboatv1alpha1.LabelRelease, want.Name), "%T %s", obj, obj.GetName())
			g.Expect(obj.GetLabels()).To(HaveKeyWithValue(tugboatv1alpha1.LabelReleaseNamespace, want.Namespace), "%T %s", obj, obj.GetName())
			g.Expect(found(ix.Lookup(obj.GetUID()))).To(Equal(want))
		}
	}).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	again, err := ownership.Backfill(ctx, mc, ownership.NewIndex(0), ownership.BackfillOptions{Namespaces: []string{ns}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Labeled).To(BeZero())
	g.Expect(again.AlreadyLabeled).To(Equal(6))
}

// TestWebhooks_unreachableNeverBlockAnInstall registers the webhooks, stops
// their server, and installs a release: failurePolicy Ignore lets every
// write through, promptly.
func TestWebhooks_unreachableNeverBlockAnInstall(t *testing.T) {
	g := NewWithT(t)
	c := spoke(t)
	const ns = "down"
	createNamespace(t, c, ns)
	run := startWebhooks(t, c, &admission.Webhooks{Index: ownership.NewIndex(0)}, ns)
	run.stopServer(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	rel, err := helmInstall(ctx, t, c, ns, "web")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Info.Status.String()).To(Equal("deployed"))
	g.Expect(time.Since(start)).To(BeNumerically("<", 15*time.Second))

	var dep appsv1.Deployment
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &dep)).To(Succeed())
	g.Expect(dep.Labels).NotTo(HaveKey(tugboatv1alpha1.LabelRelease), "the webhook was really not reached")
	g.Expect(run.releaseSecrets()).To(BeEmpty())
}

// TestFallback_resolvesOwnersTheIndexMissed resolves a Pod's owner chain
// (ReplicaSet → Helm-annotated Deployment) that the index does not know,
// with metadata GETs against the real API server: bounded in number, rate
// and time, and cached both ways.
func TestFallback_resolvesOwnersTheIndexMissed(t *testing.T) {
	g := NewWithT(t)
	c := spoke(t)
	ctx := context.Background()
	const ns = "fallback"
	createNamespace(t, c, ns)

	want := ownership.Release{Name: "tracked", Namespace: ns}
	// Labeled by an earlier backfill: labels are not copied to the
	// ReplicaSet, so its release is two owners up.
	tracked := createDeployment(t, c, ns, "tracked", want.Labels(), nil)
	// Helm-annotated: the deployment controller copies the annotations to
	// the ReplicaSet, whose own metadata then names the release.
	annotated := createDeployment(t, c, ns, "annotated", nil, map[string]string{
		ownership.AnnotationHelmReleaseName: "tracked", ownership.AnnotationHelmReleaseNamespace: ns,
	})
	untracked := createDeployment(t, c, ns, "untracked", nil, nil)
	trackedRS, annotatedRS, untrackedRS := replicaSetOf(t, c, tracked), replicaSetOf(t, c, annotated), replicaSetOf(t, c, untracked)

	var calls atomic.Int32
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			calls.Add(1)
			return rt.RoundTrip(r)
		})
	})
	mc, err := metadata.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	podOwner := func(rs *appsv1.ReplicaSet) []metav1.OwnerReference {
		return []metav1.OwnerReference{controllerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)}
	}

	// A generous deadline, so that call counts do not depend on the load of
	// the machine; the default 100ms is exercised below.
	ix := ownership.NewIndex(0)
	fb := ownership.NewFallback(mc, ix, ownership.FallbackOptions{Timeout: 10 * time.Second})
	g.Expect(found(fb.Resolve(ctx, ns, podOwner(trackedRS)))).To(Equal(want))
	g.Expect(calls.Load()).To(BeEquivalentTo(2), "GET the ReplicaSet, then its Deployment")
	g.Expect(found(ix.Lookup(trackedRS.UID))).To(Equal(want), "cached in the index")
	g.Expect(found(ix.Lookup(tracked.UID))).To(Equal(want))
	g.Expect(found(fb.Resolve(ctx, ns, podOwner(trackedRS)))).To(Equal(want))
	g.Expect(calls.Load()).To(BeEquivalentTo(2), "answered from the index")
	g.Expect(found(fb.Resolve(ctx, ns, podOwner(annotatedRS)))).To(Equal(want))
	g.Expect(calls.Load()).To(BeEquivalentTo(3), "the ReplicaSet's copied annotations suffice")

	_, ok := fb.Resolve(ctx, ns, podOwner(untrackedRS))
	g.Expect(ok).To(BeFalse())
	g.Expect(calls.Load()).To(BeEquivalentTo(5))
	_, ok = fb.Resolve(ctx, ns, podOwner(untrackedRS))
	g.Expect(ok).To(BeFalse())
	g.Expect(calls.Load()).To(BeEquivalentTo(5), "a negative answer is cached too")
	gone := []metav1.OwnerReference{controllerRef("apps/v1", "ReplicaSet", "gone", types.UID("gone-uid"))}
	_, ok = fb.Resolve(ctx, ns, gone)
	g.Expect(ok).To(BeFalse())
	g.Expect(calls.Load()).To(BeEquivalentTo(6))

	// The mutating webhook uses it when its index misses.
	w := &admission.Webhooks{Index: ownership.NewIndex(0), Fallback: ownership.NewFallback(mc, ownership.NewIndex(0), ownership.FallbackOptions{Timeout: 10 * time.Second})}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "tracked-", Namespace: ns, OwnerReferences: podOwner(trackedRS)}}
	d := w.Mutate(ctx, request(admissionv1.Create, podKind, pod))
	g.Expect(d.Result).To(Equal(admission.ResultLabeled))
	g.Expect(d.Release).To(Equal(want))

	// Out of tokens: misses at once, without calling the API server.
	calls.Store(0)
	limited := ownership.NewFallback(mc, ownership.NewIndex(0), ownership.FallbackOptions{QPS: 0.001, Burst: 1})
	start := time.Now()
	_, ok = limited.Resolve(ctx, ns, podOwner(trackedRS))
	g.Expect(ok).To(BeFalse(), "the Deployment's GET found no token")
	for range 10 {
		_, ok = limited.Resolve(ctx, ns, podOwner(trackedRS))
		g.Expect(ok).To(BeFalse())
	}
	g.Expect(calls.Load()).To(BeEquivalentTo(1))
	g.Expect(time.Since(start)).To(BeNumerically("<", time.Second))

	// Past its deadline a lookup gives up; the default deadline is 100ms.
	slow := ownership.NewFallback(mc, ownership.NewIndex(0), ownership.FallbackOptions{Timeout: time.Nanosecond})
	start = time.Now()
	_, ok = slow.Resolve(ctx, ns, podOwner(trackedRS))
	g.Expect(ok).To(BeFalse())
	g.Expect(time.Since(start)).To(BeNumerically("<", time.Second))
	start = time.Now()
	_, _ = ownership.NewFallback(mc, ownership.NewIndex(0), ownership.FallbackOptions{}).Resolve(ctx, ns, podOwner(trackedRS))
	g.Expect(time.Since(start)).To(BeNumerically("<", time.Second), "bounded by the default deadline")
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func createDeployment(t *testing.T, c *harness.Cluster, ns, name string, objLabels, annotations map[string]string) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: objLabels, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/" + name + ":1"}}},
			},
		},
	}
	if err := c.Client.Create(context.Background(), dep); err != nil {
		t.Fatalf("creating deployment: %v", err)
	}
	return dep
}

func replicaSetOf(t *testing.T, c *harness.Cluster, dep *appsv1.Deployment) *appsv1.ReplicaSet {
	t.Helper()
	var rs appsv1.ReplicaSet
	NewWithT(t).Eventually(func(g Gomega) {
		var list appsv1.ReplicaSetList
		g.Expect(c.Client.List(context.Background(), &list, client.InNamespace(dep.Namespace), client.MatchingLabels(dep.Spec.Selector.MatchLabels))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		rs = list.Items[0]
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	return &rs
}

// TestCertRotation_injectsCABundle runs the cert-controller rotator in a
// manager against the cluster: it fills the Secret, the test copies the
// Secret's files to the cert dir as the kubelet would, and the rotator
// injects the CA into both configurations; a Server loads the files.
func TestCertRotation_injectsCABundle(t *testing.T) {
	g := NewWithT(t)
	c := spoke(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "rotation"
	createNamespace(t, c, ns)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tugboat-agent-webhook-certs", Namespace: ns}}
	g.Expect(c.Client.Create(ctx, secret)).To(Succeed())

	reg := admission.Registration{
		Name:           "tugboat-agent-rotation",
		AgentNamespace: ns,
		Namespaces:     []string{ns},
		Service:        &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "tugboat-agent", Port: ptr.To[int32](443)},
	}
	g.Expect(reg.Apply(ctx, c.Client)).To(Succeed())
	t.Cleanup(func() { _ = reg.Delete(context.Background(), c.Client) })

	mgr, err := manager.New(c.RESTConfig, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	g.Expect(err).NotTo(HaveOccurred())
	certDir := t.TempDir()
	ready, err := admission.AddCertRotator(mgr, admission.CertRotation{
		SecretNamespace: ns, SecretName: secret.Name, ServiceName: "tugboat-agent", CertDir: certDir, Registration: reg,
	})
	g.Expect(err).NotTo(HaveOccurred())
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		g.Eventually(mgrDone).WithTimeout(30 * time.Second).Should(Receive())
	}()

	// The kubelet's part: the Secret's keys become files.
	g.Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		for _, key := range []string{"tls.crt", "tls.key", "ca.crt"} {
			g.Expect(secret.Data).To(HaveKey(key))
		}
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	for key, data := range secret.Data {
		g.Expect(os.WriteFile(filepath.Join(certDir, key), data, 0o600)).To(Succeed())
	}
	g.Eventually(ready).WithTimeout(60 * time.Second).Should(BeClosed())

	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: reg.Mutating().Name}, &mwc)).To(Succeed())
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: reg.Validating().Name}, &vwc)).To(Succeed())
	g.Expect(mwc.Webhooks[0].ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]))
	for _, w := range vwc.Webhooks {
		g.Expect(w.ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]))
	}

	// Re-applying the registration without a CA leaves the injected one.
	g.Expect(reg.Apply(ctx, c.Client)).To(Succeed())
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: reg.Mutating().Name}, &mwc)).To(Succeed())
	g.Expect(mwc.Webhooks[0].ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]))

	srv, err := admission.NewServer(admission.ServerOptions{CertDir: certDir, Webhooks: &admission.Webhooks{Index: ownership.NewIndex(0)}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(srv.CABundle()).To(Equal(secret.Data["ca.crt"]))
}
