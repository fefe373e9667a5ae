package deliver_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// The approval notice carries the summary of the Promotion's preview
// (issue 26), from status.preview, with how to see the diffs.
func TestDeliver_approvalNoticeCarriesThePreviewSummary(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-preview"
	rcv, url := newReceiver(t)
	fixture(t, ns, webhookNotifier("hook", url, ""))
	startDeliverer(t, fastOptions())
	pr := newPromotion(t, ns)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionCreated"}))
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		s.Phase = tugboatv1alpha1.PromotionWaitingApproval
		s.Conditions = ready(metav1.ConditionUnknown, tugboatv1alpha1.WaitingForApprovalReason, "waits for approval")
		s.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewReady, Name: pr.Name, Digest: strings.Repeat("ab", 32),
			ObjectsChanged: 3, LinesChanged: 7, Groups: 1, TargetsPreviewed: 2}
	})
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionCreated", "PromotionWaitingApproval"}))
	n := rcv.notices()[1]
	g.Expect(n.Promotion).NotTo(BeNil())
	g.Expect(n.Promotion.Preview).To(Equal("Ready: 3 objects and 7 lines change (2 targets previewed) (tugboat diff web-production-1.4.0)"))
	g.Expect(rcv.notices()[0].Promotion.Preview).To(BeEmpty(), "no preview yet when created")
}
