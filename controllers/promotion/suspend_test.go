package promotion_test

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/e2e/identity"
)

// TestReconciler_neverPromotesIntoASuspendedSpoke: a Promotion asked for by
// CI (or a person, or approved) into an environment whose Spoke is
// suspended does not run its strategy: it waits, saying why, and runs once
// the Spoke is resumed (security review 3: only the Pipeline controller's
// automatic decisions honored spec.suspend).
func TestReconciler_neverPromotesIntoASuspendedSpoke(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, p := stagingProduction(g, "suspend", nil)
	spoke := &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "prod-1"},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: "prod-1-key"}, Suspend: true},
	}
	g.Expect(cluster.Client.Create(ctx, spoke)).To(Succeed())

	var mu sync.Mutex
	ran := 0
	calls := func() int { mu.Lock(); defer mu.Unlock(); return ran }
	opts := hubtest.Options()
	opts.Strategies = strategy.Registry{tugboatv1alpha1.StrategyNotification: strategy.Func(func(_ context.Context, req strategy.Request) (strategy.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		// Only this test's Promotion: the hub also reconciles what other
		// tests of the package left in their namespaces.
		if req.Promotion.Namespace == ns.Name {
			ran++
		}
		return strategy.Result{Message: "notified"}, nil
	})}
	hubtest.Start(t, identity.HubConfig(cluster.RESTConfig), opts)

	pr, err := request.Create(ctx, hubc, p, "production", "2.0.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	ready := func() string {
		got := &tugboatv1alpha1.Promotion{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(pr), got)).To(Succeed())
		if c := apimeta.FindStatusCondition(got.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil {
			return string(got.Status.Phase) + " " + c.Reason + ": " + c.Message
		}
		return string(got.Status.Phase)
	}
	g.Eventually(ready).WithTimeout(30 * time.Second).Should(Equal(
		"Running Suspended: waiting to promote 2.0.0 into production: spoke prod-1 is suspended (spec.suspend); the strategy runs once it is resumed"))
	g.Expect(calls()).To(BeZero(), "the strategy did not run for a suspended spoke")

	patch := client.MergeFrom(spoke.DeepCopy())
	spoke.Spec.Suspend = false
	g.Expect(cluster.Client.Patch(ctx, spoke, patch)).To(Succeed())
	g.Eventually(calls).WithTimeout(30*time.Second).Should(Equal(1), "resumed, the strategy runs")
	g.Eventually(ready).WithTimeout(30 * time.Second).Should(HavePrefix("Verifying"))
}
