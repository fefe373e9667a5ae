//go:build !agentonly

package app_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// previewFixture gives Promotion web-production-1.4.0 in ns a Ready preview
// of two distinct changes (a changed Deployment, a changed Secret, an
// added Service, a values diff), and web-production-1.4.1 a failed one.
func previewFixture(t *testing.T, ns string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	reportedPipeline(t, ns)
	p := &tugboatv1alpha1.Pipeline{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, p)).To(Succeed())
	pr, err := request.Create(ctx, cluster.Client, p, "production", "1.4.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	failed, err := request.Create(ctx, cluster.Client, p, "production", "1.4.1", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())

	pp := &tugboatv1alpha1.PromotionPreview{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pr.Name},
		Spec: tugboatv1alpha1.PromotionPreviewSpec{Promotion: pr.Name, Version: "1.4.0", TotalTargets: 3, Deadline: t1,
			Targets: []tugboatv1alpha1.PreviewTarget{
				{Spoke: "prod-1", Namespace: "apps", Release: "web", ActionID: strings.Repeat("1a", 16), Targets: 2, Spokes: []string{"prod-1", "prod-2"}},
				{Spoke: "prod-3", Namespace: "apps", Release: "web", ActionID: strings.Repeat("2b", 16), Targets: 1, Spokes: []string{"prod-3"}},
			}},
	}
	g.Expect(controllerutil.SetControllerReference(pr, pp, cluster.Client.Scheme())).To(Succeed())
	g.Expect(cluster.Client.Create(ctx, pp)).To(Succeed())
	deployment := tugboatv1alpha1.PreviewObject{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web", Change: tugboatv1alpha1.PreviewChanged,
		Diff: "--- Deployment apps/web (live)\n+++ Deployment apps/web (promoted)\n@@ -7,3 +7,6 @@\n     spec:\n-      - image: registry.example/web:1.3.0\n+      - image: registry.example/web:1.4.0\n+      tolerations:\n+      - key: dedicated\n"}
	secret := tugboatv1alpha1.PreviewObject{APIVersion: "v1", Kind: "Secret", Namespace: "apps", Name: "web-db", Change: tugboatv1alpha1.PreviewChanged, Secret: true}
	service := tugboatv1alpha1.PreviewObject{APIVersion: "v1", Kind: "Service", Namespace: "apps", Name: "web", Change: tugboatv1alpha1.PreviewAdded,
		Diff: "--- Service apps/web (live)\n+++ Service apps/web (promoted)\n@@ -0,0 +1,2 @@\n+apiVersion: v1\n+kind: Service\n"}
	pp.Status = tugboatv1alpha1.PromotionPreviewStatus{Groups: []tugboatv1alpha1.PreviewGroup{
		{Digest: strings.Repeat("c0", 32), Targets: 2, Spokes: []string{"prod-1", "prod-2"}, FromVersion: "1.3.0", DryRun: "server", ObjectsChanged: 3, LinesChanged: 7,
			Objects:    []tugboatv1alpha1.PreviewObject{deployment, secret, service},
			ValuesDiff: "--- values (live)\n+++ values (promoted)\n@@ -1,2 +1,2 @@\n-logLevel: info\n+logLevel: debug\n password: <redacted>\n"},
		{Digest: strings.Repeat("d1", 32), Targets: 1, Spokes: []string{"prod-3"}, FromVersion: "1.3.0", DryRun: "client", ObjectsChanged: 1, LinesChanged: 2,
			Objects: []tugboatv1alpha1.PreviewObject{deployment}, Truncated: true, Note: "truncated: 1 diffs cut at 16 KiB"},
	}}
	g.Expect(cluster.Client.Status().Update(ctx, pp)).To(Succeed())

	orig := pr.DeepCopy()
	pr.Status.Phase = tugboatv1alpha1.PromotionWaitingApproval
	pr.Status.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewReady, Name: pp.Name, Digest: strings.Repeat("c0", 32),
		ObjectsChanged: 3, LinesChanged: 7, Groups: 2, TargetsPreviewed: 3, ComputedAt: &t1}
	g.Expect(cluster.Client.Status().Patch(ctx, pr, client.MergeFrom(orig))).To(Succeed())
	orig = failed.DeepCopy()
	failed.Status.Phase = tugboatv1alpha1.PromotionWaitingApproval
	failed.Status.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewFailed, Name: failed.Name,
		Reason: "1 of 1 targets asked did not answer by 2026-01-01T00:00:00Z (is the agent running, with actions enabled?)"}
	g.Expect(cluster.Client.Status().Patch(ctx, failed, client.MergeFrom(orig))).To(Succeed())

	// Approved, then computed again (a previewed release moved): another
	// change than the one approved.
	drifted, err := request.Create(ctx, cluster.Client, p, "production", "1.4.2", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	orig = drifted.DeepCopy()
	drifted.Status.Phase = tugboatv1alpha1.PromotionRunning
	drifted.Status.Approval = &tugboatv1alpha1.Approval{ApprovedBy: "alice", Time: t1}
	drifted.Status.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewReady, Name: drifted.Name + "-recheck", Digest: strings.Repeat("e2", 32),
		ObjectsChanged: 2, LinesChanged: 9, Groups: 1, TargetsPreviewed: 1, ComputedAt: &t1, RecomputedAt: &t1,
		ApprovedPhase: tugboatv1alpha1.PreviewStale, ApprovedDigest: strings.Repeat("c0", 32), ChangedSinceApproval: true}
	g.Expect(cluster.Client.Status().Patch(ctx, drifted, client.MergeFrom(orig))).To(Succeed())

	// Approved, computed again, another change, and the gate asks for
	// approval again (reapproveOnChange): alice's vote no longer counts.
	reasked, err := request.Create(ctx, cluster.Client, p, "production", "1.4.4", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	orig = reasked.DeepCopy()
	reasked.Status.Phase = tugboatv1alpha1.PromotionWaitingApproval
	reasked.Status.Approvals = []tugboatv1alpha1.ApprovalVote{{Decision: tugboatv1alpha1.DecisionApprove, User: "alice", Source: tugboatv1alpha1.ApprovalSourceKubernetes, Time: t1}}
	reasked.Status.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewReady, Name: reasked.Name + "-recheck", Digest: strings.Repeat("e2", 32),
		ObjectsChanged: 2, LinesChanged: 9, Groups: 1, TargetsPreviewed: 1, ComputedAt: &t1, RecomputedAt: &t1,
		ApprovedPhase: tugboatv1alpha1.PreviewStale, ApprovedDigest: strings.Repeat("c0", 32), ChangedSinceApproval: true, ApprovalsReset: 1}
	g.Expect(cluster.Client.Status().Patch(ctx, reasked, client.MergeFrom(orig))).To(Succeed())

	// Its preview's name taken by someone else: an on-demand preview they
	// created under the name, which the Promotion does not own.
	squatted, err := request.Create(ctx, cluster.Client, p, "production", "1.4.3", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	squat := &tugboatv1alpha1.PromotionPreview{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: squatted.Name},
		Spec:       tugboatv1alpha1.PromotionPreviewSpec{Pipeline: "web", From: "staging", To: "production"},
	}
	g.Expect(cluster.Client.Create(ctx, squat)).To(Succeed())
	squat.Status = pp.Status
	g.Expect(cluster.Client.Status().Update(ctx, squat)).To(Succeed())
	orig = squatted.DeepCopy()
	squatted.Status.Phase = tugboatv1alpha1.PromotionWaitingApproval
	squatted.Status.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewReady, Name: squat.Name, Digest: strings.Repeat("c0", 32),
		ObjectsChanged: 3, LinesChanged: 7, Groups: 2, TargetsPreviewed: 3, ComputedAt: &t1}
	g.Expect(cluster.Client.Status().Patch(ctx, squatted, client.MergeFrom(orig))).To(Succeed())
}

// TestGolden_diff: `tugboat diff` prints a Promotion's preview (each
// distinct change with the targets it stands for, the objects, their
// diffs, the values diff; a Secret only as changed), a failed one with its
// reason, one computed again after the approval and found changed (and
// one whose approval was asked again because of it), and
// an unknown Promotion as not found; and refuses a PromotionPreview of the
// preview's name that the Promotion does not own (PromotionPreview.Of:
// someone else created it), in every format; in table, JSON and YAML,
// never colored into a buffer.
func TestGolden_diff(t *testing.T) {
	ns := newNamespace(t)
	previewFixture(t, ns)
	masks := map[string]string{cluster.RESTConfig.Host: "https://HUB", cluster.KubeconfigPath: "KUBECONFIG"}
	kc := []string{"-n", ns, "--kubeconfig", cluster.KubeconfigPath}
	for _, f := range []string{"table", "json", "yaml"} {
		expectGolden(t, "diff."+f, goldenRun(ns, masks, append([]string{"diff", "web-production-1.4.0", "-o", f}, kc...)...))
	}
	expectGolden(t, "diff-failed", goldenRun(ns, masks, append([]string{"diff", "web-production-1.4.1"}, kc...)...))
	expectGolden(t, "diff-changed-since-approval", goldenRun(ns, masks, append([]string{"diff", "web-production-1.4.2"}, kc...)...))
	expectGolden(t, "diff-approval-asked-again", goldenRun(ns, masks, append([]string{"diff", "web-production-1.4.4"}, kc...)...))
	expectGolden(t, "diff-not-ours", goldenRun(ns, masks, append([]string{"diff", "web-production-1.4.3", "-o", "json"}, kc...)...))
	expectGolden(t, "diff-unknown", goldenRun(ns, masks, append([]string{"diff", "nope"}, kc...)...))
	out := goldenRun(ns, masks, append([]string{"diff", "web-production-1.4.0"}, kc...)...)
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colored into a buffer:\n%s", out)
	}
}
