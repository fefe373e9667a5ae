package actions_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// releaseWithValues is release with a values digest.
func releaseWithValues(ns, name, version string, revision int, values string) wire.ReleaseState {
	r := release(ns, name, version, revision)
	r.ValuesDigest = "sha256:" + strings.Repeat(values, 64/len(values))
	return r
}

// previewOutcome is a Succeeded preview answer of digest d (one hex digit,
// repeated) changing a Deployment and a Secret.
func previewOutcome(id string, d string, revision int) wire.ActionOutcome {
	return wire.ActionOutcome{ID: id, Result: wire.ActionSucceeded, Message: "previewed", Time: time.Now(), Preview: &wire.PreviewResult{
		Digest: strings.Repeat(d, 64), FromVersion: "0.9.0", Revision: revision, DryRun: wire.DryRunServer,
		Objects: []wire.PreviewObject{
			{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web", Change: wire.ChangeChanged, Diff: "-      - image: web:0.9.0\n+      - image: web:1.0.0\n"},
			{APIVersion: "v1", Kind: "Secret", Namespace: "apps", Name: "web-db", Change: wire.ChangeChanged, Secret: true},
		},
		ObjectsChanged: 2, LinesChanged: 3, ValuesDiff: "-tier: a\n+tier: b\n",
	}}
}

func (a *fakeAgent) send(g Gomega, o wire.ActionOutcome) int {
	body, err := json.Marshal(o)
	g.Expect(err).NotTo(HaveOccurred())
	code, _, err := a.do(http.MethodPost, wire.ActionPath(a.name, o.ID), body)
	g.Expect(err).NotTo(HaveOccurred())
	return code
}

func getPreview(g Gomega, ns, name string) *tugboatv1alpha1.PromotionPreview {
	pp := &tugboatv1alpha1.PromotionPreview{}
	g.Expect(cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pp)).To(Succeed())
	return pp
}

// TestActions_previewBeforeApproval (issue 26): a helm Promotion into an
// environment that requires approval asks its agents for a preview first,
// one target per distinct set of values; the store offers each agent only
// its own preview action and records the answers in the PromotionPreview,
// grouped by digest with the targets each stands for; once every target
// asked answered, the Promotion waits for approval with the summary in
// status.preview.
func TestActions_previewBeforeApproval(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "preview")
	dev := registerSpoke(t, ns, "dev-p")
	s1, s2, s3 := registerSpoke(t, ns, "staging-p1"), registerSpoke(t, ns, "staging-p2"), registerSpoke(t, ns, "staging-p3")
	dev.report(g, release("apps", "web", "1.0.0", 1))
	s1.report(g, releaseWithValues("apps", "web", "0.9.0", 4, "a"))
	s2.report(g, releaseWithValues("apps", "web", "0.9.0", 2, "a")) // the same values as s1
	s3.report(g, releaseWithValues("apps", "web", "0.9.0", 7, "b"))
	p := helmPipeline(ns, "dev-p", &tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com", Chart: "web"},
		tugboatv1alpha1.Target{Spoke: "staging-p1", Namespace: "apps"},
		tugboatv1alpha1.Target{Spoke: "staging-p2", Namespace: "apps"},
		tugboatv1alpha1.Target{Spoke: "staging-p3", Namespace: "apps"})
	p.Spec.Environments[1].Gates.RequireApproval = true
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
	name := pipeline.PromotionName("web", "staging", "1.0.0")

	// s1 stands for s2 (the same values); s3 has its own.
	var pp *tugboatv1alpha1.PromotionPreview
	g.Eventually(func(g Gomega) { pp = getPreview(g, ns, name) }).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(pp.Spec.Targets).To(HaveLen(2))
	g.Expect(pp.Spec.Targets[0].Spoke).To(Equal("staging-p1"))
	g.Expect(pp.Spec.Targets[0].Targets).To(BeEquivalentTo(2))
	g.Expect(pp.Spec.Targets[0].Spokes).To(Equal([]string{"staging-p1", "staging-p2"}))
	g.Expect(pp.Spec.Targets[1].Spoke).To(Equal("staging-p3"))
	g.Expect(pp.Spec.TotalTargets).To(BeEquivalentTo(3))
	// The reconciler creates the preview, then writes the Promotion's
	// status: wait, with a bound, for that write (reading the Promotion
	// at once sometimes found it before its status was written).
	var pr *tugboatv1alpha1.Promotion
	g.Eventually(func(g Gomega) {
		pr = getPromotion(g, ns, name)
		g.Expect(pr.Status.Preview).NotTo(BeNil())
	}).WithTimeout(10 * time.Second).Should(Succeed())
	g.Expect(pp.OwnerReferences).To(ContainElement(HaveField("UID", pr.UID)))
	g.Expect(pr.Status.Phase).To(Equal(tugboatv1alpha1.PromotionPending))
	g.Expect(pr.Status.Preview).To(Equal(&tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewPending, Name: name}))

	acts := s1.poll(g)
	g.Expect(acts).To(HaveLen(1))
	a := acts[0]
	g.Expect(a.TypeOf()).To(Equal(wire.ActionPreview))
	g.Expect(a.Version).To(BeEmpty(), "only an upgrade sets version")
	g.Expect(a.Preview).To(Equal(&wire.PreviewAction{Chart: wire.ChartSource{Repository: "https://charts.example.com", Name: "web"}, Version: "1.0.0", ValuesPolicy: wire.ValuesReuse}))
	g.Expect(a.ID).To(Equal(pp.Spec.Targets[0].ActionID))
	g.Expect(a.ID).NotTo(Equal(wire.NewActionID(string(pr.UID), "staging-p1", "apps", "web")), "not the upgrade's id")
	g.Expect(getPreview(g, ns, name).Status.Targets).To(ConsistOf(HaveField("Phase", tugboatv1alpha1.ActionDelivered)))

	// Another spoke cannot answer it.
	g.Expect(s3.send(g, previewOutcome(a.ID, "e", 4))).To(Equal(http.StatusNotFound))
	for range 2 { // a repeated answer changes nothing
		g.Expect(s1.send(g, previewOutcome(a.ID, "c", 4))).To(Equal(http.StatusOK))
	}
	g.Expect(s1.send(g, previewOutcome(a.ID, "f", 4))).To(Equal(http.StatusConflict))
	g.Consistently(phase(ns, name)).WithTimeout(500*time.Millisecond).Should(Equal(tugboatv1alpha1.PromotionPending), "s3 has not answered yet")

	acts = s3.poll(g)
	g.Expect(acts).To(HaveLen(1))
	g.Expect(s3.send(g, previewOutcome(acts[0].ID, "d", 7))).To(Equal(http.StatusOK))

	g.Eventually(phase(ns, name)).WithTimeout(3*time.Second).Should(Equal(tugboatv1alpha1.PromotionWaitingApproval),
		"every target asked answered: no need to wait for the deadline")
	pr = getPromotion(g, ns, name)
	sum := pr.Status.Preview
	g.Expect(sum.Phase).To(Equal(tugboatv1alpha1.PreviewReady))
	g.Expect(sum.Digest).To(Equal(strings.Repeat("c", 64)), "the change most targets make")
	g.Expect(sum.ObjectsChanged).To(BeEquivalentTo(2))
	g.Expect(sum.LinesChanged).To(BeEquivalentTo(3))
	g.Expect(sum.Groups).To(BeEquivalentTo(2))
	g.Expect(sum.TargetsPreviewed).To(BeEquivalentTo(3))
	g.Expect(sum.Reason).To(BeEmpty())
	g.Expect(sum.ComputedAt).NotTo(BeNil())

	pp = getPreview(g, ns, name)
	g.Expect(pp.Status.Groups).To(HaveLen(2))
	first := pp.Status.Groups[0]
	g.Expect(first.Targets).To(BeEquivalentTo(2))
	g.Expect(first.Spokes).To(Equal([]string{"staging-p1", "staging-p2"}))
	g.Expect(first.Objects).To(HaveLen(2))
	g.Expect(first.Objects[0].Diff).To(ContainSubstring("+      - image: web:1.0.0"))
	g.Expect(first.Objects[1].Secret).To(BeTrue())
	g.Expect(first.Objects[1].Diff).To(BeEmpty())
	g.Expect(first.ValuesDiff).To(Equal("-tier: a\n+tier: b\n"))
	g.Expect(pp.Status.Groups[1].Spokes).To(Equal([]string{"staging-p3"}))
	g.Expect(pp.Status.Targets).To(ConsistOf(
		HaveField("Revision", BeEquivalentTo(4)), HaveField("Revision", BeEquivalentTo(7))))

	// Drift: staging-p1's release moves to another revision after the
	// preview; the approver is shown the preview is stale, and why.
	s1.report(g, releaseWithValues("apps", "web", "0.9.1", 5, "a"))
	g.Eventually(func(g Gomega) *tugboatv1alpha1.PreviewSummary { return getPromotion(g, ns, name).Status.Preview }).
		WithTimeout(10 * time.Second).Should(And(
		HaveField("Phase", tugboatv1alpha1.PreviewStale),
		HaveField("Reason", ContainSubstring("staging-p1/apps/web is at revision 5 since the preview (of revision 4)"))))
	g.Expect(phase(ns, name)(g)).To(Equal(tugboatv1alpha1.PromotionWaitingApproval), "a stale preview blocks nothing")
}

// A preview never blocks the approval: a target that does not answer by the
// deadline, and one that refuses, leave the preview Failed with the
// reasons, and the Promotion waits for approval all the same; past the
// deadline the preview is no longer offered.
func TestActions_aPreviewNoOneAnswersFailsWithoutBlocking(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "preview-late")
	dev, s1, silent := registerSpoke(t, ns, "dev-q"), registerSpoke(t, ns, "staging-q1"), registerSpoke(t, ns, "staging-q2")
	dev.report(g, release("apps", "web", "1.0.0", 1))
	s1.report(g, releaseWithValues("apps", "web", "0.9.0", 1, "a"))
	silent.report(g, releaseWithValues("apps", "web", "0.9.0", 1, "b"))
	p := helmPipeline(ns, "dev-q", &tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com", Chart: "web"},
		tugboatv1alpha1.Target{Spoke: "staging-q1", Namespace: "apps"},
		tugboatv1alpha1.Target{Spoke: "staging-q2", Namespace: "apps"})
	p.Spec.Environments[1].Gates.RequireApproval = true
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
	name := pipeline.PromotionName("web", "staging", "1.0.0")

	g.Eventually(func(g Gomega) { g.Expect(getPreview(g, ns, name).Spec.Targets).To(HaveLen(2)) }).WithTimeout(30 * time.Second).Should(Succeed())
	deadline := getPreview(g, ns, name).Spec.Deadline.Time
	acts := s1.poll(g)
	g.Expect(acts).To(HaveLen(1))
	g.Expect(s1.send(g, wire.ActionOutcome{ID: acts[0].ID, Result: wire.ActionRefused, Message: "namespace apps is not in --actions-allowed-namespaces", Time: time.Now()})).
		To(Equal(http.StatusOK))
	g.Consistently(phase(ns, name)).WithTimeout(time.Until(deadline) - 500*time.Millisecond).Should(Equal(tugboatv1alpha1.PromotionPending))
	g.Eventually(phase(ns, name)).WithTimeout(5 * time.Second).Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))
	sum := getPromotion(g, ns, name).Status.Preview
	g.Expect(sum.Phase).To(Equal(tugboatv1alpha1.PreviewFailed))
	g.Expect(sum.Reason).To(ContainSubstring("1 of 2 targets asked did not answer by"))
	g.Expect(sum.Reason).To(ContainSubstring("staging-q1/apps/web Refused: namespace apps is not in --actions-allowed-namespaces"))
	// Past its deadline, the preview is no longer offered.
	g.Expect(silent.poll(g)).To(BeEmpty())
}

// A preview that went stale is computed again after the approval, before
// the strategy acts (issue 26, drift on the way), with new action ids and
// the same deadline: a target that does not answer the second round holds
// the promotion at most until that deadline; then it proceeds, and
// status.preview says the change could not be confirmed
// (changedSinceApproval, with the reason).
func TestActions_aStalePreviewIsAskedAgainAndNeverBlocksThePromotion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "preview-recheck")
	dev, s1 := registerSpoke(t, ns, "dev-r"), registerSpoke(t, ns, "staging-r1")
	dev.report(g, release("apps", "web", "1.0.0", 1))
	s1.report(g, releaseWithValues("apps", "web", "0.9.0", 4, "a"))
	p := helmPipeline(ns, "dev-r", &tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com", Chart: "web"},
		tugboatv1alpha1.Target{Spoke: "staging-r1", Namespace: "apps"})
	p.Spec.Environments[1].Gates.RequireApproval = true
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
	name := pipeline.PromotionName("web", "staging", "1.0.0")

	g.Eventually(func(g Gomega) { g.Expect(getPreview(g, ns, name).Spec.Targets).To(HaveLen(1)) }).WithTimeout(30 * time.Second).Should(Succeed())
	var acts []wire.Action
	g.Eventually(func() []wire.Action { acts = s1.poll(g); return acts }).WithTimeout(10 * time.Second).Should(HaveLen(1))
	first := acts[0].ID
	g.Expect(s1.send(g, previewOutcome(first, "c", 4))).To(Equal(http.StatusOK))
	g.Eventually(phase(ns, name)).WithTimeout(5 * time.Second).Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))

	s1.report(g, releaseWithValues("apps", "web", "0.9.0", 5, "a"))
	g.Eventually(func(g Gomega) tugboatv1alpha1.PreviewPhase { return getPromotion(g, ns, name).Status.Preview.Phase }).
		WithTimeout(10 * time.Second).Should(Equal(tugboatv1alpha1.PreviewStale))
	pr := getPromotion(g, ns, name)
	orig := pr.DeepCopy()
	pr.Status.Approval = &tugboatv1alpha1.Approval{ApprovedBy: "alice", Time: metav1.Now()}
	g.Expect(cluster.Client.Status().Patch(ctx, pr, client.MergeFrom(orig))).To(Succeed())

	var recheck *tugboatv1alpha1.PromotionPreview
	g.Eventually(func(g Gomega) { recheck = getPreview(g, ns, name+"-recheck") }).WithTimeout(10 * time.Second).Should(Succeed())
	g.Expect(recheck.OwnerReferences).To(ContainElement(HaveField("UID", pr.UID)))
	// The PromotionPreview is created before the Promotion's status says so.
	g.Eventually(func(g Gomega) *tugboatv1alpha1.PreviewSummary { return getPromotion(g, ns, name).Status.Preview }).WithTimeout(5 * time.Second).
		Should(And(HaveField("Phase", tugboatv1alpha1.PreviewPending), HaveField("Name", name+"-recheck"),
			HaveField("ApprovedPhase", tugboatv1alpha1.PreviewStale), HaveField("ApprovedDigest", strings.Repeat("c", 64)),
			HaveField("RecomputedAt", Not(BeNil()))))
	g.Eventually(func() []wire.Action { acts = s1.poll(g); return acts }).WithTimeout(10 * time.Second).Should(HaveLen(1))
	g.Expect(acts[0].TypeOf()).To(Equal(wire.ActionPreview))
	g.Expect(acts[0].ID).NotTo(Equal(first), "a new round, a new action")

	// Nobody answers: the promotion waits until the deadline, no longer.
	deadline := recheck.Spec.Deadline.Time
	g.Consistently(phase(ns, name)).WithTimeout(time.Until(deadline) - 500*time.Millisecond).Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))
	g.Eventually(phase(ns, name)).WithTimeout(5*time.Second).Should(BeElementOf(tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.PromotionVerifying),
		"the strategy acted")
	sum := getPromotion(g, ns, name).Status.Preview
	g.Expect(sum.Phase).To(Equal(tugboatv1alpha1.PreviewFailed))
	g.Expect(sum.ChangedSinceApproval).To(BeTrue())
	g.Expect(sum.Reason).To(HavePrefix("the preview went stale after the approval and could not be computed again: 1 of 1 targets asked did not answer by"))
}

// TestActions_aPreviewSomeoneElseNamedIsNeverTheApprovers (review of issue
// 26): anyone allowed to ask for on-demand previews may create a
// PromotionPreview under the name a Promotion's preview will have (names
// are predictable). The hub never takes it for the Promotion's: the
// Promotion's preview is Failed, saying so, and the squatter's preview is
// never shown or answered as the Promotion's. Before, the hub adopted it,
// and its summary was what the approvers saw.
func TestActions_aPreviewSomeoneElseNamedIsNeverTheApprovers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "preview-squat")
	dev := registerSpoke(t, ns, "dev-sq")
	staging := registerSpoke(t, ns, "staging-sq")
	dev.report(g, release("apps", "web", "1.0.0", 1))
	staging.report(g, releaseWithValues("apps", "web", "0.9.0", 4, "a"))
	name := pipeline.PromotionName("web", "staging", "1.0.0")
	squat := &tugboatv1alpha1.PromotionPreview{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       tugboatv1alpha1.PromotionPreviewSpec{Pipeline: "web", From: "dev", To: "staging"},
	}
	g.Expect(cluster.Client.Create(ctx, squat)).To(Succeed())

	p := helmPipeline(ns, "dev-sq", &tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com", Chart: "web"},
		tugboatv1alpha1.Target{Spoke: "staging-sq", Namespace: "apps"})
	p.Spec.Environments[1].Gates.RequireApproval = true
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())

	g.Eventually(func(g Gomega) {
		pr := getPromotion(g, ns, name)
		g.Expect(pr.Status.Preview).NotTo(BeNil())
		g.Expect(pr.Status.Preview.Phase).To(Equal(tugboatv1alpha1.PreviewFailed))
		g.Expect(pr.Status.Preview.Reason).To(ContainSubstring("is not this Promotion's"))
		g.Expect(pr.Status.Phase).To(Equal(tugboatv1alpha1.PromotionWaitingApproval), "a failed preview never blocks the approval")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	got := getPreview(g, ns, name)
	g.Expect(got.OwnerReferences).To(BeEmpty(), "the squatter's preview is left as it was")
	g.Expect(got.Spec.Promotion).To(BeEmpty())
}
