package pipeline

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
)

// TestReconciler_supersedesOnlyAPromotionThatHasNotMovedOn (issue 29, the
// writers of Promotion.status): a newer version supersedes an older
// Promotion that has not started, on the real API server. A Promotion the
// Promotion reconciler started since the Pipeline's (cached) copy was
// read is not aborted under its running strategy: the write conflicts,
// and the Promotion keeps running. Before, the supersede wrote phase
// Aborted over Running.
func TestReconciler_supersedesOnlyAPromotionThatHasNotMovedOn(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster, err := harness.Start(ctx, harness.Options{Name: "pipeline-supersede", ControlPlaneOnly: true, TugboatCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cluster.Stop() }()
	c, err := client.New(cluster.RESTConfig, client.Options{Scheme: harness.DefaultScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}})).To(Succeed())
	create := func(name string, phase tugboatv1alpha1.PromotionPhase) *tugboatv1alpha1.Promotion {
		pr := &tugboatv1alpha1.Promotion{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name},
			Spec:       tugboatv1alpha1.PromotionSpec{Pipeline: "web", To: "production", Version: "1.0.0", RequestedBy: tugboatv1alpha1.RequestedByAuto},
		}
		g.Expect(c.Create(ctx, pr)).To(Succeed())
		pr.Status.Phase = phase
		g.Expect(c.Status().Update(ctx, pr)).To(Succeed())
		return pr
	}
	phase := func(pr *tugboatv1alpha1.Promotion) tugboatv1alpha1.PromotionPhase {
		got := &tugboatv1alpha1.Promotion{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pr), got)).To(Succeed())
		return got.Status.Phase
	}
	r := &Reconciler{Client: c, Now: time.Now}

	waiting := create("web-production-1.0.0", tugboatv1alpha1.PromotionWaitingApproval)
	g.Expect(r.supersede(ctx, []tugboatv1alpha1.Promotion{*waiting.DeepCopy()}, "production", "1.1.0")).To(Succeed())
	g.Expect(phase(waiting)).To(Equal(tugboatv1alpha1.PromotionAborted), "a Promotion that had not started is superseded")

	started := create("web-production-1.0.1", tugboatv1alpha1.PromotionPending)
	cached := started.DeepCopy() // what the Pipeline reconciler's cache still holds
	started.Status.Phase = tugboatv1alpha1.PromotionRunning
	g.Expect(c.Status().Update(ctx, started)).To(Succeed(), "the Promotion reconciler starts it")
	err = r.supersede(ctx, []tugboatv1alpha1.Promotion{*cached}, "production", "1.1.0")
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)
	g.Expect(phase(started)).To(Equal(tugboatv1alpha1.PromotionRunning), "not aborted under its strategy")
}
