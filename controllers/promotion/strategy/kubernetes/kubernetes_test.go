package kubernetes

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/egress"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/controllers/promotion/strategy/spokeaccess"
)

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T, g Gomega) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "k8s-strategy-"}}
	g.Expect(cluster.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// kubeconfigSecret stores the cluster's kubeconfig file in Secret name/key.
func kubeconfigSecret(g Gomega, ns, name, key string) {
	data, err := os.ReadFile(cluster.KubeconfigPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster.Client.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string][]byte{key: data},
	})).To(Succeed())
}

// helmRelease creates a HelmRelease with chart web at version, some values
// and an interval, as its owner "flux-test".
func helmRelease(g Gomega, ns, name, version string) *unstructured.Unstructured {
	hr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/v2",
		"kind":       "HelmRelease",
		"metadata":   map[string]any{"namespace": ns, "name": name, "annotations": map[string]any{"team": "web"}},
		"spec": map[string]any{
			"interval": "5m",
			"chart": map[string]any{"spec": map[string]any{
				"chart":     "web",
				"version":   version,
				"sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"},
			}},
			"values": map[string]any{"replicas": int64(2)},
		},
	}}
	g.Expect(cluster.Client.Create(context.Background(), hr, client.FieldOwner("flux-test"))).To(Succeed())
	return hr
}

func getHR(g Gomega, ns, name string) *unstructured.Unstructured {
	hr := &unstructured.Unstructured{}
	hr.SetAPIVersion("helm.toolkit.fluxcd.io/v2")
	hr.SetKind("HelmRelease")
	g.Expect(cluster.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, hr)).To(Succeed())
	return hr
}

// nested is the string at path in obj, "" when absent.
func nested(obj map[string]any, path ...string) string {
	s, _, _ := unstructured.NestedString(obj, path...)
	return s
}

func spokeWithSecret(ns, secret string) *tugboatv1alpha1.Spoke {
	return &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "production-1"},
		Spec: tugboatv1alpha1.SpokeSpec{
			KubeConfigSecretRef: &tugboatv1alpha1.SecretKeyReference{Name: secret},
		},
	}
}

func request(ns string, version string, targets ...strategy.Target) strategy.Request {
	return strategy.Request{
		Promotion: &tugboatv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-production-" + strings.ReplaceAll(version, ".", "-")}},
		Pipeline:  &tugboatv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
		Targets:   targets,
		Version:   version,
		Strategy:  tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyKubernetes},
		Hub:       cluster.Client,
	}
}

func target(spoke *tugboatv1alpha1.Spoke, ns, hr string) strategy.Target {
	t := strategy.Target{Spoke: spoke, Namespace: ns, Release: "web"}
	if spoke != nil {
		t.SpokeName = spoke.Name
	}
	if hr != "" {
		t.HelmRelease = &tugboatv1alpha1.ObjectReference{Name: hr}
	}
	return t
}

func TestKubernetes_appliesVersionOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, g)
	kubeconfigSecret(g, ns, "production-1-kubeconfig", "value")
	helmRelease(g, ns, "web", "1.0.0")
	spoke := spokeWithSecret(ns, "production-1-kubeconfig")
	s := newOnLoopback()
	req := request(ns, "1.1.0", target(spoke, ns, "web"))

	res, err := s.Promote(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Message).To(ContainSubstring("set version 1.1.0 on HelmRelease production-1:" + ns + "/web (was 1.0.0)"))

	hr := getHR(g, ns, "web")
	version, _, _ := unstructured.NestedString(hr.Object, "spec", "chart", "spec", "version")
	g.Expect(version).To(Equal("1.1.0"))
	g.Expect(hr.GetAnnotations()).To(Equal(map[string]string{"team": "web", PromotionAnnotation: req.Promotion.Name}))
	// Everything else is as the owner left it.
	g.Expect(nested(hr.Object, "spec", "interval")).To(Equal("5m"))
	g.Expect(nested(hr.Object, "spec", "chart", "spec", "chart")).To(Equal("web"))
	g.Expect(nested(hr.Object, "spec", "chart", "spec", "sourceRef", "name")).To(Equal("charts"))
	replicas, _, _ := unstructured.NestedInt64(hr.Object, "spec", "values", "replicas")
	g.Expect(replicas).To(Equal(int64(2)))

	// tugboat owns exactly the version and its annotation; the version moved
	// away from the previous owner.
	var tugboat, owner *metav1.ManagedFieldsEntry
	for i, mf := range hr.GetManagedFields() {
		switch mf.Manager {
		case FieldManager:
			tugboat = &hr.GetManagedFields()[i]
		case "flux-test":
			owner = &hr.GetManagedFields()[i]
		}
	}
	g.Expect(tugboat).NotTo(BeNil())
	g.Expect(tugboat.Operation).To(Equal(metav1.ManagedFieldsOperationApply))
	var fields map[string]any
	g.Expect(json.Unmarshal(tugboat.FieldsV1.GetRawBytes(), &fields)).To(Succeed())
	g.Expect(fields).To(Equal(map[string]any{
		"f:metadata": map[string]any{"f:annotations": map[string]any{"f:" + PromotionAnnotation: map[string]any{}}},
		"f:spec":     map[string]any{"f:chart": map[string]any{"f:spec": map[string]any{"f:version": map[string]any{}}}},
	}))
	g.Expect(owner).NotTo(BeNil())
	g.Expect(owner.FieldsV1.GetRawString()).NotTo(ContainSubstring(`"f:version"`))
	g.Expect(owner.FieldsV1.GetRawString()).To(ContainSubstring(`"f:interval"`))

	// Promote again (a retry, a controller restart): nothing is written.
	rv := hr.GetResourceVersion()
	res, err = s.Promote(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Message).To(Equal("already at 1.1.0: production-1:" + ns + "/web"))
	g.Expect(getHR(g, ns, "web").GetResourceVersion()).To(Equal(rv))
}

func TestKubernetes_clusterAPIKubeconfigAndSeveralTargets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, g)
	// The Cluster is in the Spoke's namespace: a Spoke reaches no other
	// (issue 12, High 1; spokeaccess tests the refusal).
	kubeconfigSecret(g, ns, "prod-eu-kubeconfig", "value")
	helmRelease(g, ns, "web", "1.0.0")
	helmRelease(g, ns, "web-canary", "1.1.0")
	spoke := &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-eu"},
		Spec:       tugboatv1alpha1.SpokeSpec{ClusterRef: &tugboatv1alpha1.ObjectReference{Name: "prod-eu"}},
	}
	canary := target(spoke, ns, "web-canary")
	canary.Release = "web-canary"

	res, err := newOnLoopback().Promote(ctx, request(ns, "1.1.0", target(spoke, ns, "web"), canary))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Message).To(Equal("set version 1.1.0 on HelmRelease prod-eu:" + ns + "/web (was 1.0.0); already at 1.1.0: prod-eu:" + ns + "/web-canary"))
	g.Expect(nested(getHR(g, ns, "web").Object, "spec", "chart", "spec", "version")).To(Equal("1.1.0"))
	// The canary had the version but not the annotation: it gets the annotation.
	g.Expect(getHR(g, ns, "web-canary").GetAnnotations()).To(HaveKey(PromotionAnnotation))
}

func TestKubernetes_missingHelmReleaseIsNamedAndNotCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, g)
	kubeconfigSecret(g, ns, "kc", "value")

	_, err := newOnLoopback().Promote(ctx, request(ns, "1.1.0", target(spokeWithSecret(ns, "kc"), ns, "absent")))
	g.Expect(err).To(MatchError(ContainSubstring("HelmRelease " + ns + "/absent not found")))
	g.Expect(strategy.IsTerminal(err)).To(BeFalse(), "it may yet be created by Flux")

	hr := &unstructured.Unstructured{}
	hr.SetAPIVersion("helm.toolkit.fluxcd.io/v2")
	hr.SetKind("HelmRelease")
	err = cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "absent"}, hr)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}

func TestKubernetes_configurationErrorsAreTerminal(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, g)
	kubeconfigSecret(g, ns, "kc", "value")
	helmRelease(g, ns, "web", "1.0.0")
	good := target(spokeWithSecret(ns, "kc"), ns, "web")

	noKubeconfig := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}}
	_, err := newOnLoopback().Promote(ctx, request(ns, "1.1.0", good, target(noKubeconfig, ns, "web")))
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring("spoke " + ns + "/edge has no kubeconfig for the hub: set spec.kubeConfigSecretRef or spec.clusterRef")))

	_, err = newOnLoopback().Promote(ctx, request(ns, "1.1.0", good, target(spokeWithSecret(ns, "kc"), ns, "")))
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring("target production-1/" + ns + "/web has no helmRelease")))

	// Nothing was applied to the good target: configuration is checked first.
	g.Expect(nested(getHR(g, ns, "web").Object, "spec", "chart", "spec", "version")).To(Equal("1.0.0"))

	// A HelmRelease that takes its chart from chartRef has no version to set.
	ref := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/v2",
		"kind":       "HelmRelease",
		"metadata":   map[string]any{"namespace": ns, "name": "oci"},
		"spec":       map[string]any{"interval": "5m", "chartRef": map[string]any{"kind": "OCIRepository", "name": "web"}},
	}}
	g.Expect(cluster.Client.Create(ctx, ref)).To(Succeed())
	_, err = newOnLoopback().Promote(ctx, request(ns, "1.1.0", target(spokeWithSecret(ns, "kc"), ns, "oci")))
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring("HelmRelease " + ns + "/oci takes its chart from spec.chartRef")))
}

func TestKubernetes_missingSpokeIsRetryable(t *testing.T) {
	g := NewWithT(t)
	tg := strategy.Target{SpokeName: "gone", Namespace: "apps", Release: "web", HelmRelease: &tugboatv1alpha1.ObjectReference{Name: "web"}}
	_, err := newOnLoopback().Promote(context.Background(), request("default", "1.1.0", tg))
	g.Expect(err).To(MatchError(ContainSubstring(`spoke "gone" not found`)))
	g.Expect(strategy.IsTerminal(err)).To(BeFalse())
}

// TestApply_uidPreconditionNeverCreates checks the API server behavior
// apply relies on: an apply carrying a UID does not create a missing object
// (one carrying only a resourceVersion would).
func TestApply_uidPreconditionNeverCreates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, g)
	patch := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/v2",
		"kind":       "HelmRelease",
		"metadata":   map[string]any{"namespace": ns, "name": "deleted-meanwhile", "uid": "0b4e8fd1-2d6e-4c5a-9d6e-9a1f3f1b2c3d"},
		"spec":       map[string]any{"chart": map[string]any{"spec": map[string]any{"version": "1.1.0"}}},
	}}
	err := cluster.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(patch), client.FieldOwner(FieldManager), client.ForceOwnership)
	g.Expect(err).To(HaveOccurred())
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "%v", err)
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(patch.GroupVersionKind())
	g.Expect(apierrors.IsNotFound(cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "deleted-meanwhile"}, hr))).To(BeTrue())
}

// newOnLoopback is the strategy as the hub builds it, with an egress
// policy that lets it reach the test's API servers on loopback.
func newOnLoopback() *Strategy {
	return New(spokeaccess.NewCache(nil).WithEgress(egress.Policy{AllowLoopback: true}))
}
