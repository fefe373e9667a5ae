package promotion_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/e2e/identity"
)

// A promotion through a Flux HelmRelease reads the result back from what
// the HelmRelease says (the ReleaseHistory's status.helmRelease, which the
// spoke's agent reports): a suspended one is shown as the reason it waits,
// and when helm-controller stalls on the version, the Promotion fails at
// once with the HelmRelease's own message instead of waiting for its
// timeout.
func TestReconciler_failsWithTheMessageOfAHelmReleaseStalledOnTheVersion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "flux-"}}
	g.Expect(cluster.Client.Create(ctx, ns)).To(Succeed())
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "web"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyKubernetes},
			Environments: []tugboatv1alpha1.Environment{
				{Name: "staging", Targets: []tugboatv1alpha1.Target{{Spoke: "staging-1", Namespace: "apps"}}},
				{Name: "production", Targets: []tugboatv1alpha1.Target{{Spoke: "prod-1", Namespace: "apps",
					HelmRelease: &tugboatv1alpha1.ObjectReference{Name: "web"}}}},
			},
		},
	}
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
	// The strategy's change is made (as the kubernetes strategy sets the
	// HelmRelease's version); what follows is helm-controller's.
	applied := strategy.Func(func(context.Context, strategy.Request) (strategy.Result, error) {
		return strategy.Result{Message: "set version 1.4.0 on HelmRelease prod-1:apps/web (was 1.3.0)"}, nil
	})
	opts := hubtest.Options()
	opts.Strategies = strategy.Registry{tugboatv1alpha1.StrategyKubernetes: applied}
	hubtest.Start(t, identity.HubConfig(cluster.RESTConfig), opts)

	rh := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: tugboatv1alpha1.ReleaseHistoryName("prod-1", "apps", "web")},
		Spec: tugboatv1alpha1.ReleaseHistorySpec{Spoke: "prod-1", Namespace: "apps", Release: "web",
			HelmRelease: &tugboatv1alpha1.ObjectReference{Namespace: "apps", Name: "web"}},
	}
	g.Expect(cluster.Client.Create(ctx, rh)).To(Succeed())
	now := metav1.Now()
	rh.Status.Current = &tugboatv1alpha1.RevisionSummary{Revision: 3, Chart: "web", ChartVersion: "1.3.0",
		Status: tugboatv1alpha1.ReleaseStatusDeployed, Health: tugboatv1alpha1.HealthCurrent, LastDeployed: &now}
	rh.Status.Revisions = []tugboatv1alpha1.Revision{{RevisionSummary: *rh.Status.Current}}
	rh.Status.HelmRelease = &tugboatv1alpha1.HelmReleaseStatus{Ready: metav1.ConditionTrue, Reason: "UpgradeSucceeded",
		Message: "Helm upgrade succeeded for release apps/web.v3 with chart web@1.3.0", Suspended: true, LastAttemptedRevision: "1.3.0"}
	g.Expect(cluster.Client.Status().Update(ctx, rh)).To(Succeed())

	pr, err := request.Create(ctx, hubc, p, "production", "1.4.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	get := func(g Gomega) *tugboatv1alpha1.Promotion {
		cur := &tugboatv1alpha1.Promotion{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(pr), cur)).To(Succeed())
		return cur
	}
	g.Eventually(func(g Gomega) {
		cur := get(g)
		g.Expect(cur.Status.Phase).To(Equal(tugboatv1alpha1.PromotionVerifying), "%+v", cur.Status)
		pts := promotionTargets(t, pr.Namespace, pr.Name)
		g.Expect(pts).To(HaveLen(1))
		g.Expect(pts[0].Status.Message).To(Equal(
			"at 1.3.0 (deployed, Current); HelmRelease apps/web is suspended: helm-controller applies nothing until it is resumed"))
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())

	// Resumed, helm-controller tries 1.4.0, fails, rolls back and stalls.
	g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(rh), rh)).To(Succeed())
	const helmMessage = "Failed to upgrade after 1 attempt(s); Helm upgrade failed for release apps/web with chart web@1.4.0: context deadline exceeded"
	rh.Status.Current.Revision, rh.Status.Current.Health = 5, tugboatv1alpha1.HealthFailed
	rh.Status.Current.HealthReason = "HelmRelease apps/web is stalled (RetriesExceeded): " + helmMessage
	rh.Status.Revisions = []tugboatv1alpha1.Revision{{RevisionSummary: *rh.Status.Current}}
	rh.Status.HelmRelease = &tugboatv1alpha1.HelmReleaseStatus{Ready: metav1.ConditionFalse, Reason: "RetriesExceeded",
		Message: helmMessage, Stalled: true, LastAttemptedRevision: "1.4.0"}
	g.Expect(cluster.Client.Status().Update(ctx, rh)).To(Succeed())

	want := "prod-1/apps/web: HelmRelease apps/web stalled on 1.4.0: RetriesExceeded: " + helmMessage
	g.Eventually(func(g Gomega) {
		cur := get(g)
		g.Expect(cur.Status.Phase).To(Equal(tugboatv1alpha1.PromotionFailed))
		ready := findCondition(cur, tugboatv1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(tugboatv1alpha1.StrategyFailedReason.String()))
		g.Expect(ready.Message).To(Equal(want))
		g.Expect(promotionTargets(t, pr.Namespace, pr.Name)[0].Status.Message).To(Equal("HelmRelease apps/web stalled on 1.4.0: RetriesExceeded: " + helmMessage))
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
}

func findCondition(pr *tugboatv1alpha1.Promotion, t tugboatv1alpha1.ConditionType) *metav1.Condition {
	for i := range pr.Status.Conditions {
		if pr.Status.Conditions[i].Type == t.String() {
			return &pr.Status.Conditions[i]
		}
	}
	return nil
}
