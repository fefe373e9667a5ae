package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
)

// TestReconciler_prunesTheOldestFinishedPromotions: beyond
// spec.historyLimit, the finished Promotions that completed first are
// deleted from the real API server; the newest finished ones stay, and so
// does every unfinished one, however old.
func TestReconciler_prunesTheOldestFinishedPromotions(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster, err := harness.Start(ctx, harness.Options{Name: "pipeline-prune", ControlPlaneOnly: true, TugboatCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cluster.Stop() }()
	c, err := client.New(cluster.RESTConfig, client.Options{Scheme: harness.DefaultScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}})).To(Succeed())
	p := &tugboatv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "web"}, Spec: tugboatv1alpha1.PipelineSpec{HistoryLimit: ptr.To[int32](2)}}

	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	create := func(name string, phase tugboatv1alpha1.PromotionPhase, completed time.Duration) {
		pr := &tugboatv1alpha1.Promotion{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name},
			Spec:       tugboatv1alpha1.PromotionSpec{Pipeline: "web", To: "production", Version: "1.0.0", RequestedBy: tugboatv1alpha1.RequestedByAuto},
		}
		g.Expect(c.Create(ctx, pr)).To(Succeed())
		pr.Status.Phase = phase
		if phase.Terminal() {
			pr.Status.CompletedAt = ptr.To(metav1.NewTime(base.Add(completed)))
		}
		g.Expect(c.Status().Update(ctx, pr)).To(Succeed())
	}
	// Created in another order than they finished.
	create("newest", tugboatv1alpha1.PromotionSucceeded, 5*time.Hour)
	create("oldest", tugboatv1alpha1.PromotionFailed, time.Hour)
	create("second-newest", tugboatv1alpha1.PromotionAborted, 4*time.Hour)
	create("running-for-ages", tugboatv1alpha1.PromotionVerifying, 0)
	create("middle", tugboatv1alpha1.PromotionSucceeded, 3*time.Hour)
	create("waiting", tugboatv1alpha1.PromotionWaitingApproval, 0)

	var promos tugboatv1alpha1.PromotionList
	g.Expect(c.List(ctx, &promos, client.InNamespace("fleet"))).To(Succeed())
	r := &Reconciler{Client: c}
	g.Expect(r.prune(ctx, p, promos.Items)).To(Succeed())

	g.Expect(c.List(ctx, &promos, client.InNamespace("fleet"))).To(Succeed())
	var left []string
	for _, pr := range promos.Items {
		left = append(left, fmt.Sprintf("%s %s", pr.Name, pr.Status.Phase))
	}
	g.Expect(left).To(ConsistOf("newest Succeeded", "second-newest Aborted", "running-for-ages Verifying", "waiting WaitingApproval"))

	// Within the limit, nothing more goes.
	g.Expect(r.prune(ctx, p, promos.Items)).To(Succeed())
	g.Expect(c.List(ctx, &promos, client.InNamespace("fleet"))).To(Succeed())
	g.Expect(promos.Items).To(HaveLen(4))
}
