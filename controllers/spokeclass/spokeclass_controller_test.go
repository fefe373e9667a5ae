package spokeclass_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/spoke"
	"tugboat.dev/tugboat/controllers/spokeclass"
	"tugboat.dev/tugboat/e2e/harness"
)

var cluster *harness.Cluster

func TestMain(m *testing.M) {
	// tugboat's CRDs only: Cluster API's are not installed, so a List of
	// Clusters fails for real.
	os.Exit(harness.Main(harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true}, func(c *harness.Cluster) int {
		cluster = c
		return m.Run()
	}))
}

// TestReconciler_aFailedListLeavesACondition: a List the API server refuses
// (here: Cluster API's kinds are not served) is an error the workqueue
// retries, and the SpokeClass says it in Ready=False (issue 29: the status
// was patched at each return instead of in a defer, so this way out left no
// condition at all).
func TestReconciler_aFailedListLeavesACondition(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, err := client.New(cluster.RESTConfig, client.Options{Scheme: harness.DefaultScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	class := &tugboatv1alpha1.SpokeClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "edge"},
		Spec:       tugboatv1alpha1.SpokeClassSpec{ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}}},
	}
	g.Expect(c.Create(ctx, class)).To(Succeed())
	r := &spokeclass.Reconciler{Client: c, AllowedValues: spoke.DefaultAllowedValues()}
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(class)})
	g.Expect(err).To(MatchError(ContainSubstring("listing Clusters")))

	got := &tugboatv1alpha1.SpokeClass{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
	ready := apimeta.FindStatusCondition(got.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(spokeclass.ReconcileFailedReason.String()))
	g.Expect(ready.Message).To(ContainSubstring("listing Clusters"))
}
