package promotion_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/identity"
)

// answerPreview answers, as the hub's actions store does when the agent
// answered, the PromotionPreview name: its one target compared against
// revision and found the change digest.
func answerPreview(g Gomega, ns, name string, revision int32, digest string) {
	ctx := context.Background()
	pp := &tugboatv1alpha1.PromotionPreview{}
	g.Eventually(func() error { return hubc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pp) }, 30*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Expect(pp.Spec.Targets).To(HaveLen(1))
	orig := pp.DeepCopy()
	pp.Status = tugboatv1alpha1.PromotionPreviewStatus{
		Targets: []tugboatv1alpha1.PreviewTargetStatus{{ActionID: pp.Spec.Targets[0].ActionID, Phase: tugboatv1alpha1.ActionSucceeded, Digest: digest, Revision: revision}},
		Groups:  []tugboatv1alpha1.PreviewGroup{{Digest: digest, Targets: 1, Spokes: []string{"prod-1"}, ObjectsChanged: 1, LinesChanged: 2}},
	}
	g.Expect(hubc.Status().Patch(ctx, pp, client.MergeFrom(orig))).To(Succeed())
}

// TestReconciler_reapproveOnChangeAsksForApprovalAgain (issue 26): two helm
// Pipelines whose production requires approval, one with
// gates.reapproveOnChange, one without. Each Promotion is previewed (the
// agent's answer written as the hub's actions store would), approved by
// alice, and the previewed release moves to another revision before the
// approval, so the hub computes the preview again after it, and the change
// differs from the one approved. Without reapproveOnChange the Promotion
// proceeds (today's behavior). With it, the approval is asked again: the
// hub clears status.approval, sets status.preview.approvalsReset (alice's
// vote no longer counts), says why in the Ready message and an Event
// ApprovalAskedAgain, and waits; alice approves again (request.Decide
// takes a second vote of hers), and it proceeds. The hub runs as its
// ServiceAccount, alice as herself, under the approval policy.
func TestReconciler_reapproveOnChangeAsksForApprovalAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "reapprove-"}}
	g.Expect(cluster.Client.Create(ctx, ns)).To(Succeed())
	pipelines := map[string]*tugboatv1alpha1.Pipeline{}
	for name, reapprove := range map[string]bool{"strict": true, "lenient": false, "blocked": true} {
		p := &tugboatv1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
			Spec: tugboatv1alpha1.PipelineSpec{
				Release: name,
				Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm, Helm: &tugboatv1alpha1.HelmStrategy{
					Repository: "https://charts.example.com", Chart: "web"}},
				Environments: []tugboatv1alpha1.Environment{{
					Name: "production", Targets: []tugboatv1alpha1.Target{{Spoke: "prod-1", Namespace: "apps"}},
					Gates: tugboatv1alpha1.Gates{RequireApproval: true, ReapproveOnChange: reapprove},
				}},
			},
		}
		g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
		pipelines[name] = p
		rh := &tugboatv1alpha1.ReleaseHistory{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: tugboatv1alpha1.ReleaseHistoryName("prod-1", "apps", name)},
			Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: "prod-1", Namespace: "apps", Release: name},
		}
		g.Expect(cluster.Client.Create(ctx, rh)).To(Succeed())
		now := metav1.Now()
		rh.Status.Current = &tugboatv1alpha1.RevisionSummary{Revision: 2, Chart: "web", ChartVersion: "1.3.0", Status: tugboatv1alpha1.ReleaseStatusDeployed,
			Health: tugboatv1alpha1.HealthCurrent, LastDeployed: &now, ValuesDigest: "sha256:" + strings.Repeat("a", 64)}
		rh.Status.Revisions = []tugboatv1alpha1.Revision{{RevisionSummary: *rh.Status.Current}}
		g.Expect(cluster.Client.Status().Update(ctx, rh)).To(Succeed())
	}
	g.Expect(identity.Grant(ctx, cluster.Client, ns.Name, "alice", "strict/production", "lenient/production", "blocked/production")).To(Succeed())
	opts := hubtest.Options()
	opts.Promotion.PreviewTimeout = 2 * time.Minute
	hubtest.Start(t, identity.HubConfig(cluster.RESTConfig), opts)
	alice, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), "alice")
	g.Expect(err).NotTo(HaveOccurred())
	get := func(name string) *tugboatv1alpha1.Promotion {
		pr := &tugboatv1alpha1.Promotion{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: name}, pr)).To(Succeed())
		return pr
	}
	previewPhase := func(name string) func() tugboatv1alpha1.PreviewPhase {
		return func() tugboatv1alpha1.PreviewPhase {
			if sum := get(name).Status.Preview; sum != nil {
				return sum.Phase
			}
			return ""
		}
	}
	approve := func(name, message string) {
		_, err := request.Decide(ctx, alice, ns.Name, name, tugboatv1alpha1.ApprovalVote{
			Decision: tugboatv1alpha1.DecisionApprove, User: "alice", Source: tugboatv1alpha1.ApprovalSourceKubernetes, Message: message})
		g.Expect(err).NotTo(HaveOccurred())
	}
	approved, changed := strings.Repeat("a1", 32), strings.Repeat("b2", 32)

	names := map[string]string{}
	for name, p := range pipelines {
		pr, err := request.Create(ctx, hubc, p, "production", "1.4.0", tugboatv1alpha1.RequestedByCI, "ci")
		g.Expect(err).NotTo(HaveOccurred())
		names[name] = pr.Name
		answerPreview(g, ns.Name, pr.Name, 2, approved)
		g.Eventually(previewPhase(pr.Name), 30*time.Second, 50*time.Millisecond).Should(Equal(tugboatv1alpha1.PreviewReady), name)
		g.Eventually(func() tugboatv1alpha1.PromotionPhase { return get(pr.Name).Status.Phase }, 30*time.Second, 50*time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionWaitingApproval), name)

		// Someone upgrades the release by hand: the preview goes Stale.
		rh := &tugboatv1alpha1.ReleaseHistory{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: tugboatv1alpha1.ReleaseHistoryName("prod-1", "apps", name)}, rh)).To(Succeed())
		rh.Status.Current.Revision = 3
		g.Expect(cluster.Client.Status().Update(ctx, rh)).To(Succeed())
		g.Eventually(previewPhase(pr.Name), 30*time.Second, 50*time.Millisecond).Should(Equal(tugboatv1alpha1.PreviewStale), name)

		if name == "blocked" {
			// A Flux HelmRelease manages the release now: no target can
			// be previewed again, so what the strategy will do is unknown.
			g.Eventually(func() error {
				p := &tugboatv1alpha1.Pipeline{}
				if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: name}, p); err != nil {
					return err
				}
				p.Spec.Environments[0].Targets[0].HelmRelease = &tugboatv1alpha1.ObjectReference{Name: name}
				return cluster.Client.Update(ctx, p)
			}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
			approve(pr.Name, "looks fine")
			continue
		}
		approve(pr.Name, "looks fine")
		// Computed again after the approval: another change.
		answerPreview(g, ns.Name, pr.Name+"-recheck", 3, changed)
	}

	// With reapproveOnChange, a preview that could not be computed again
	// asks for approval again too.
	blocked := names["blocked"]
	g.Eventually(func() int32 {
		if sum := get(blocked).Status.Preview; sum != nil {
			return sum.ApprovalsReset
		}
		return 0
	}, 30*time.Second, 50*time.Millisecond).Should(BeEquivalentTo(1))
	g.Expect(get(blocked).Status.Approval).To(BeNil())
	g.Expect(get(blocked).Status.Preview.Phase).To(Equal(tugboatv1alpha1.PreviewFailed))
	g.Expect(get(blocked).Status.Preview.Reason).To(ContainSubstring("could not be computed again"))
	g.Consistently(func() *metav1.Time { return get(blocked).Status.StartedAt }, 2*time.Second, 100*time.Millisecond).Should(BeNil())

	// Without reapproveOnChange: told, and it proceeds.
	lenient := names["lenient"]
	g.Eventually(func() *metav1.Time { return get(lenient).Status.StartedAt }, 30*time.Second, 50*time.Millisecond).ShouldNot(BeNil())
	sum := get(lenient).Status.Preview
	g.Expect(sum.ChangedSinceApproval).To(BeTrue())
	g.Expect(sum.ApprovalsReset).To(BeZero())
	g.Expect(get(lenient).Status.Approval).NotTo(BeNil())

	// With it: the approval is asked again, and the Promotion waits.
	strict := names["strict"]
	g.Eventually(func() int32 {
		if sum := get(strict).Status.Preview; sum != nil {
			return sum.ApprovalsReset
		}
		return 0
	}, 30*time.Second, 50*time.Millisecond).Should(BeEquivalentTo(1))
	pr := get(strict)
	g.Expect(pr.Status.Approval).To(BeNil())
	g.Expect(pr.Status.Phase).To(Equal(tugboatv1alpha1.PromotionWaitingApproval))
	g.Expect(pr.Status.Preview.ChangedSinceApproval).To(BeTrue())
	g.Expect(pr.Status.Preview.Digest).To(Equal(changed))
	g.Expect(pr.Status.Preview.ApprovedDigest).To(Equal(approved), "what the first approval saw stays")
	g.Expect(pr.Status.Approvals).To(HaveLen(1), "the vote stays on record")
	waitsAgain := "approval asked again: the preview changed since the approval (Ready: changed since approval: 1 object and 2 lines change (1 target previewed); approved: digest a1a1a1a1a1a1), and the gate of production sets reapproveOnChange, so the vote cast before no longer counts"
	g.Eventually(func() string { return readyMessage(get(strict)) }, 30*time.Second, 50*time.Millisecond).Should(Equal(
		"promotion of 1.4.0 into production has 0 of 1 approval; waiting for 1 more approval (tugboat approve " + strict + "); " + waitsAgain))
	g.Consistently(func() *metav1.Time { return get(strict).Status.StartedAt }, 2*time.Second, 100*time.Millisecond).Should(BeNil())
	g.Eventually(func(g Gomega) []string { return promotionEvents(g, ns.Name, strict) }, 30*time.Second, 100*time.Millisecond).Should(ContainElements(
		HavePrefix("Warning PreviewChanged: the change differs from what was approved (digest a1a1a1a1a1a1)"),
		"Warning ApprovalAskedAgain: "+waitsAgain))

	// alice approves again, having seen the new change: it proceeds.
	approve(strict, "seen the new change")
	g.Eventually(func() *metav1.Time { return get(strict).Status.StartedAt }, 30*time.Second, 50*time.Millisecond).ShouldNot(BeNil())
	pr = get(strict)
	g.Expect(pr.Status.Approval).NotTo(BeNil())
	g.Expect(pr.Status.Approval.ApprovedBy).To(Equal("alice"))
	g.Expect(pr.Status.Approval.Message).To(Equal("seen the new change"))
	g.Expect(pr.Status.Approvals).To(HaveLen(2))
	g.Expect(pr.Status.Preview.ApprovalsReset).To(BeEquivalentTo(1))
}

// readyMessage is the message of pr's Ready condition.
func readyMessage(pr *tugboatv1alpha1.Promotion) string {
	for _, c := range pr.Status.Conditions {
		if c.Type == tugboatv1alpha1.ReadyCondition.String() {
			return c.Message
		}
	}
	return ""
}

// TestReconciler_aFluxTargetIsNotPreviewedAndSaysWhy (issue 26): a helm
// Promotion into an environment that requires approval, whose only target
// a Flux HelmRelease manages, is not previewed, and its status.preview
// says so (Failed, "not previewed: Flux target"); it still waits for
// approval, and the approval is counted.
func TestReconciler_aFluxTargetIsNotPreviewedAndSaysWhy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "flux-preview-"}}
	g.Expect(cluster.Client.Create(ctx, ns)).To(Succeed())
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "web"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release: "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm, Helm: &tugboatv1alpha1.HelmStrategy{
				Repository: "https://charts.example.com", Chart: "web"}},
			Environments: []tugboatv1alpha1.Environment{{
				Name: "production", Gates: tugboatv1alpha1.Gates{RequireApproval: true},
				Targets: []tugboatv1alpha1.Target{{Spoke: "prod-1", Namespace: "apps", HelmRelease: &tugboatv1alpha1.ObjectReference{Name: "web"}}},
			}},
		},
	}
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
	g.Expect(identity.Grant(ctx, cluster.Client, ns.Name, "alice", "web/production")).To(Succeed())
	hubtest.Start(t, identity.HubConfig(cluster.RESTConfig), hubtest.Options())
	pr, err := request.Create(ctx, hubc, p, "production", "1.4.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	get := func() *tugboatv1alpha1.Promotion {
		got := &tugboatv1alpha1.Promotion{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(pr), got)).To(Succeed())
		return got
	}
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return get().Status.Phase }, 30*time.Second, 50*time.Millisecond).
		Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))
	sum := get().Status.Preview
	g.Expect(sum).NotTo(BeNil())
	g.Expect(sum.Phase).To(Equal(tugboatv1alpha1.PreviewFailed))
	g.Expect(sum.Reason).To(HavePrefix("no target can be previewed: prod-1/apps/web not previewed: Flux target (a Flux HelmRelease manages the release"))
	g.Expect(sum.Line()).To(HavePrefix("Failed: no target can be previewed: prod-1/apps/web not previewed: Flux target"))

	alice, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), "alice")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = request.Decide(ctx, alice, ns.Name, pr.Name, tugboatv1alpha1.ApprovalVote{
		Decision: tugboatv1alpha1.DecisionApprove, User: "alice", Source: tugboatv1alpha1.ApprovalSourceKubernetes})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() *metav1.Time { return get().Status.StartedAt }, 30*time.Second, 50*time.Millisecond).ShouldNot(BeNil())
}
