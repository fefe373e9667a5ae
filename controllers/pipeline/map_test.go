package pipeline

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	cluster, err := harness.Start(ctx, harness.Options{Name: "pipeline-map", ControlPlaneOnly: true, CRDPaths: []string{"../../config/charts/tugboat-hub/files/crds"}})
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
