package deliver_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify/deliver"
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

// With the dashboard's public address, a notice about a Promotion of the
// namespace the dashboard shows links to its page; of another namespace,
// not.
func TestDeliver_noticeLinksToTheDashboard(t *testing.T) {
	g := NewWithT(t)
	shown, other := "notify-dash", "notify-dash-other"
	rcv, url := newReceiver(t)
	fixture(t, shown, webhookNotifier("hook", url, ""))
	fixture(t, other, webhookNotifier("hook", url, ""))
	opts := fastOptions()
	opts.DashboardURL, opts.DashboardNamespace = "https://tugboat.example.com/ui/", shown
	startDeliverer(t, opts)
	newPromotion(t, shown)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(HaveLen(1))
	g.Expect(rcv.notices()[0].Promotion.DashboardURL).To(Equal("https://tugboat.example.com/ui/promotions/web-production-1.4.0"))
	newPromotion(t, other)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(HaveLen(2))
	g.Expect(rcv.notices()[1].Promotion.DashboardURL).To(BeEmpty())
}

func TestValidateDashboardURL(t *testing.T) {
	for _, tc := range []struct {
		url, err string
	}{
		{"", ""},
		{"https://tugboat.example.com/ui/", ""},
		{"http://127.0.0.1:8443/ui/", ""},
		{"ftp://tugboat.example.com/ui/", `scheme "ftp"`},
		{"/ui/", `scheme ""`},
		{"https:///ui/", "must name a host"},
		{"https://user:pass@tugboat.example.com/ui/", "credentials"},
		{"https://tugboat.example.com/ui/?token=x", "query or fragment"},
		{"https://tugboat.example.com/ui/#x", "query or fragment"},
		{"https://tugboat.example.com/%zz", "not a URL"},
		{"https://tugboat.example.com/" + strings.Repeat("a", deliver.MaxDashboardURL), "at most 2048 characters"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			g := NewWithT(t)
			err := deliver.ValidateDashboardURL(tc.url)
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
		})
	}
}

// A preview computed again after the approval that differs from the one
// approved (issue 26, drift on the way) is told to every notifier: a
// PromotionPreviewChanged notice with the new summary and the digest
// approved. One computed again and found unchanged tells nothing.
func TestDeliver_previewChangedSinceApprovalIsTold(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-preview-changed"
	rcv, url := newReceiver(t)
	fixture(t, ns, webhookNotifier("hook", url, ""))
	startDeliverer(t, fastOptions())
	pr := newPromotion(t, ns)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionCreated"}))
	approved := strings.Repeat("ab", 32)
	now := metav1.Now()
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		s.Phase = tugboatv1alpha1.PromotionWaitingApproval
		s.Conditions = ready(metav1.ConditionUnknown, tugboatv1alpha1.ProgressingReason, "approved; computing the preview again")
		s.Approval = &tugboatv1alpha1.Approval{ApprovedBy: "alice", Time: now}
		// Computed again, the same change: nothing more to tell.
		s.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewReady, Name: pr.Name + "-recheck", Digest: approved,
			ObjectsChanged: 3, LinesChanged: 7, Groups: 1, TargetsPreviewed: 1,
			ApprovedPhase: tugboatv1alpha1.PreviewStale, ApprovedDigest: approved, RecomputedAt: &now, ComputedAt: &now}
	})
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionCreated", "PromotionWaitingApproval"}))
	g.Consistently(rcv.events, 2*time.Second, 100*time.Millisecond).Should(HaveLen(2))

	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		s.Preview.Digest, s.Preview.ObjectsChanged, s.Preview.LinesChanged = strings.Repeat("cd", 32), 4, 12
		s.Preview.ChangedSinceApproval = true
	})
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionCreated", "PromotionWaitingApproval", "PromotionPreviewChanged"}))
	n := rcv.notices()[2]
	g.Expect(n.Promotion).NotTo(BeNil())
	g.Expect(n.Promotion.Preview).To(Equal("Ready: changed since approval: 4 objects and 12 lines change (1 target previewed), " +
		"not the change approved (digest abababababab…) (tugboat diff web-production-1.4.0)"))
}

// When the preview changed since the approval and the gate asks for
// approval again (reapproveOnChange: status.preview.approvalsReset), the
// PromotionPreviewChanged notice carries the new preview, the digest
// approved, and that the approval is asked again (issue 26).
func TestDeliver_previewChangedNoticeSaysTheApprovalIsAskedAgain(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-reapprove"
	rcv, url := newReceiver(t)
	fixture(t, ns, webhookNotifier("hook", url, "", tugboatv1alpha1.EventPromotionPreviewChanged))
	startDeliverer(t, fastOptions())
	pr := newPromotion(t, ns)
	now := metav1.Now()
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		s.Phase = tugboatv1alpha1.PromotionWaitingApproval
		s.Conditions = ready(metav1.ConditionUnknown, tugboatv1alpha1.WaitingForApprovalReason, "waits for approval again")
		s.Approvals = []tugboatv1alpha1.ApprovalVote{{Decision: tugboatv1alpha1.DecisionApprove, User: "alice", Source: tugboatv1alpha1.ApprovalSourceKubernetes, Time: now}}
		s.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewReady, Name: pr.Name + "-recheck", Digest: strings.Repeat("b2", 32),
			ObjectsChanged: 1, LinesChanged: 2, Groups: 1, TargetsPreviewed: 1, ComputedAt: &now, RecomputedAt: &now,
			ApprovedPhase: tugboatv1alpha1.PreviewStale, ApprovedDigest: strings.Repeat("a1", 32), ChangedSinceApproval: true, ApprovalsReset: 1}
	})
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionPreviewChanged"}))
	line := rcv.notices()[0].Promotion.Preview
	g.Expect(line).To(HavePrefix("Ready: changed since approval: 1 object and 2 lines change (1 target previewed), not the change approved (digest a1a1a1a1a1"))
	g.Expect(line).To(HaveSuffix(" (tugboat diff web-production-1.4.0); approval asked again (reapproveOnChange): the earlier votes no longer count"))
}
