package e2e_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/promotion"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/identity"
)

// TestLifecycle_finishedEventsGoWithTheirPromotion runs the hub as its
// ServiceAccount on a cluster with kube-controller-manager's garbage
// collector: a pre step of 2s that no one handles times out (the hub marks
// its LifecycleEvent TimedOut and fails the Promotion); once the Promotion
// is deleted (as the Pipeline's history limit deletes old ones), the
// garbage collector deletes its event, which the hub published owned by it.
func TestLifecycle_finishedEventsGoWithTheirPromotion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real cluster")
	}
	g := NewWithT(t)
	ctx := context.Background()
	c := harness.StartT(t, harness.Options{Name: "lifecycle-gc", TugboatCRDs: true})
	g.Expect(identity.Install(ctx, c.Client)).To(Succeed())
	p := &tugboatv1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: tugboatv1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1.PromotionStrategy{Type: tugboatv1.StrategyNotification},
			Environments: []tugboatv1.Environment{
				{Name: "staging", Targets: []tugboatv1.Target{{Spoke: "gc-staging-1", Namespace: "apps"}}},
				{Name: "production", Targets: []tugboatv1.Target{{Spoke: "gc-prod-1", Namespace: "apps"}},
					Steps: &tugboatv1.Steps{Pre: []tugboatv1.Step{{Name: "migrate", Type: tugboatv1.StepExternal,
						Timeout: &metav1.Duration{Duration: 2 * time.Second}, External: &tugboatv1.ExternalStep{Lifecycle: "db-migrate"}}}}},
			},
		},
	}
	g.Expect(c.Client.Create(ctx, p)).To(Succeed())
	g.Expect(c.Client.Create(ctx, &tugboatv1.Lifecycle{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-migrate"},
		Spec: tugboatv1.LifecycleSpec{EventKey: "db-migrate"}})).To(Succeed())
	opts := hubtest.Options()
	opts.Strategies = strategy.Registry{tugboatv1.StrategyNotification: strategy.Func(func(context.Context, strategy.Request) (strategy.Result, error) {
		return strategy.Result{Message: "no-op"}, nil
	})}
	hubtest.Start(t, identity.HubConfig(c.RESTConfig), opts)
	hubc, err := client.New(identity.HubConfig(c.RESTConfig), client.Options{Scheme: c.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	pr, err := request.Create(ctx, hubc, p, "production", "2.0.0", tugboatv1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())

	g.Eventually(func() tugboatv1.PromotionPhase {
		got := &tugboatv1.Promotion{}
		g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(pr), got)).To(Succeed())
		return got.Status.Phase
	}).WithTimeout(60 * time.Second).Should(Equal(tugboatv1.PromotionFailed))
	ev := &tugboatv1.LifecycleEvent{}
	key := client.ObjectKey{Namespace: "default", Name: promotion.EventName(pr.Name, "migrate", 1)}
	g.Expect(c.Client.Get(ctx, key, ev)).To(Succeed())
	g.Expect(ev.Status.Phase).To(Equal(tugboatv1.EventTimedOut))

	g.Expect(c.Client.Delete(ctx, pr)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Client.Get(ctx, key, &tugboatv1.LifecycleEvent{}))
	}).WithTimeout(60*time.Second).Should(BeTrue(), "the garbage collector deletes the Promotion's event")
}
