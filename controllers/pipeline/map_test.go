package pipeline

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
)

// Issue 13, bug 6 (hub half): a failed list of the Pipelines a change
// concerns is not swallowed: the change is mapped again later. The list
// fails for real: a client without the cache asks the API server for a
// field selector it does not support on Pipelines.
func TestReconciler_mapRetriesAFailedList(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster, err := harness.Start(ctx, harness.Options{Name: "pipeline-map", ControlPlaneOnly: true, TugboatCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cluster.Stop() }()
	direct, err := client.New(cluster.RESTConfig, client.Options{Scheme: harness.DefaultScheme()})
	g.Expect(err).NotTo(HaveOccurred())

	r := &Reconciler{Client: direct, MapRetry: 50 * time.Millisecond}
	r.init()
	rh := &tugboatv1alpha1.ReleaseHistory{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "dev-1.apps.web"}}
	g.Expect(r.pipelinesForHistory(ctx, rh)).To(BeEmpty())
	var again event.GenericEvent
	g.Eventually(r.remap).WithTimeout(5 * time.Second).Should(Receive(&again))
	g.Expect(client.ObjectKeyFromObject(again.Object)).To(Equal(client.ObjectKeyFromObject(rh)))

	// Mapped again, it fails again and is retried again: never dropped.
	g.Expect(r.pipelinesForObject(ctx, again.Object)).To(BeEmpty())
	g.Eventually(r.remap).WithTimeout(5 * time.Second).Should(Receive())
	sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "dev-1"}}
	g.Expect(r.pipelinesForSpoke(ctx, sp)).To(BeEmpty())
	g.Eventually(r.remap).WithTimeout(5 * time.Second).Should(Receive(&again))
	g.Expect(again.Object).To(BeAssignableToTypeOf(&tugboatv1alpha1.Spoke{}))
}

// The Pipelines a Spoke or a ReleaseHistory concerns, read through a real
// cache with the reconciler's field indexes: a spokeSelector maps a Spoke
// by its labels (the old and the new object of an update are mapped each),
// and a history by its Spoke's labels and its own namespace and release.
func TestPipelinesFor_selectorsMapSpokesAndHistories(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster, err := harness.Start(ctx, harness.Options{Name: "pipeline-selector-map", ControlPlaneOnly: true, TugboatCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cluster.Stop() }()
	c := cluster.Client
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}})).To(Succeed())

	production := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}}
	newPipeline := func(name string, target tugboatv1alpha1.Target) *tugboatv1alpha1.Pipeline {
		return &tugboatv1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name},
			Spec: tugboatv1alpha1.PipelineSpec{Release: "web", Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm},
				Environments: []tugboatv1alpha1.Environment{
					{Name: "staging", Targets: []tugboatv1alpha1.Target{{Spoke: "staging-1", Namespace: "apps"}}},
					{Name: "production", Targets: []tugboatv1alpha1.Target{target}},
				}},
		}
	}
	for _, p := range []*tugboatv1alpha1.Pipeline{
		newPipeline("selects", tugboatv1alpha1.Target{SpokeSelector: production, Namespace: "apps"}),
		newPipeline("selects-api", tugboatv1alpha1.Target{SpokeSelector: production, Namespace: "apps", Release: "api"}),
		newPipeline("names", tugboatv1alpha1.Target{Spoke: "prod-1", Namespace: "apps"}),
	} {
		g.Expect(c.Create(ctx, p)).To(Succeed())
	}
	spoke := func(name string, lbls map[string]string) *tugboatv1alpha1.Spoke {
		sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name, Labels: lbls},
			Spec: tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}}}
		return sp
	}
	g.Expect(c.Create(ctx, spoke("prod-2", map[string]string{"env": "production"}))).To(Succeed())
	g.Expect(c.Create(ctx, spoke("lab-1", map[string]string{"env": "lab"}))).To(Succeed())

	ca, err := cache.New(cluster.RESTConfig, cache.Options{Scheme: harness.DefaultScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(indexFields(ctx, ca)).To(Succeed())
	go func() { _ = ca.Start(ctx) }()
	g.Expect(ca.WaitForCacheSync(ctx)).To(BeTrue())

	names := func(o client.Object) func(g Gomega) []string {
		return func(g Gomega) []string {
			list, err := PipelinesFor(ctx, ca, o)
			g.Expect(err).NotTo(HaveOccurred())
			out := []string{}
			for _, p := range list {
				out = append(out, p.Name)
			}
			return out
		}
	}
	eventually := func(o client.Object, want ...string) {
		t.Helper()
		g.Eventually(names(o)).WithTimeout(10*time.Second).WithPolling(50*time.Millisecond).Should(ConsistOf(want), "%T %s", o, o.GetName())
	}
	// A Spoke: by name, and by labels.
	eventually(spoke("prod-2", map[string]string{"env": "production"}), "selects", "selects-api")
	eventually(spoke("prod-2", nil)) // the old object of an update that removed the label
	eventually(spoke("prod-1", map[string]string{"env": "production"}), "names", "selects", "selects-api")
	eventually(spoke("lab-1", map[string]string{"env": "lab"}))

	// A ReleaseHistory: its Spoke's labels, its namespace and release.
	rh := func(spoke, ns, release string) *tugboatv1alpha1.ReleaseHistory {
		return &tugboatv1alpha1.ReleaseHistory{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: tugboatv1alpha1.ReleaseHistoryName(spoke, ns, release)},
			Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: spoke, Namespace: ns, Release: release},
		}
	}
	eventually(rh("prod-2", "apps", "web"), "selects")
	eventually(rh("prod-2", "apps", "api"), "selects-api")
	eventually(rh("prod-2", "other", "web"))
	eventually(rh("lab-1", "apps", "web"))
	eventually(rh("prod-1", "apps", "web"), "names") // prod-1 has no Spoke: nothing selects it
	eventually(rh("staging-1", "apps", "web"), "names", "selects", "selects-api")
}
