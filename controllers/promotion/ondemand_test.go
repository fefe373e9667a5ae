package promotion_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/e2e/identity"
)

// onDemandFixture creates a namespace with Pipeline web (staging-1 in
// staging; prod-1 and prod-2 in production, helm strategy; dev with a
// target that never reported), the ReleaseHistories of staging (1.4.0) and
// production (1.3.0, the same values), and binds the chart's ClusterRole
// tugboat-approver to carol there.
func onDemandFixture(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ondemand-"}}
	g.Expect(cluster.Client.Create(ctx, ns)).To(Succeed())
	target := func(spokes ...string) []tugboatv1alpha1.Target {
		var out []tugboatv1alpha1.Target
		for _, s := range spokes {
			out = append(out, tugboatv1alpha1.Target{Spoke: s, Namespace: "apps"})
		}
		return out
	}
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "web"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release: "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm, Helm: &tugboatv1alpha1.HelmStrategy{
				Repository: "https://charts.example.com", Chart: "web"}},
			Environments: []tugboatv1alpha1.Environment{
				{Name: "dev", Targets: target("dev-1")},
				{Name: "staging", Targets: target("staging-1")},
				{Name: "production", Targets: target("prod-1", "prod-2"), Gates: tugboatv1alpha1.Gates{RequireApproval: true}},
			},
		},
	}
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), p) })
	for spoke, version := range map[string]string{"staging-1": "1.4.0", "prod-1": "1.3.0", "prod-2": "1.3.0"} {
		rh := &tugboatv1alpha1.ReleaseHistory{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: tugboatv1alpha1.ReleaseHistoryName(spoke, "apps", "web")},
			Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: spoke, Namespace: "apps", Release: "web"},
		}
		g.Expect(cluster.Client.Create(ctx, rh)).To(Succeed())
		now := metav1.Now()
		rh.Status.Current = &tugboatv1alpha1.RevisionSummary{Revision: 2, Chart: "web", ChartVersion: version, Status: tugboatv1alpha1.ReleaseStatusDeployed,
			Health: tugboatv1alpha1.HealthCurrent, LastDeployed: &now, ValuesDigest: "sha256:" + strings.Repeat(version[2:3], 64)}
		rh.Status.Revisions = []tugboatv1alpha1.Revision{{RevisionSummary: *rh.Status.Current}}
		g.Expect(cluster.Client.Status().Update(ctx, rh)).To(Succeed())
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "carol-approver"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: identity.ApproverRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "carol"}},
	}
	g.Expect(cluster.Client.Create(ctx, binding)).To(Succeed())
	// mallory may write previews and their status by RBAC: the policy
	// tugboat-previews still refuses what only the hub writes.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "mallory"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"tugboat.dev"}, Resources: []string{"promotionpreviews", "promotionpreviews/status"},
		Verbs: []string{"get", "list", "create", "update", "patch"},
	}}}
	g.Expect(cluster.Client.Create(ctx, role)).To(Succeed())
	g.Expect(cluster.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "mallory"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "mallory"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "mallory"}},
	})).To(Succeed())
	return ns.Name
}

func onDemand(ns, name, from, to string) *tugboatv1alpha1.PromotionPreview {
	return &tugboatv1alpha1.PromotionPreview{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       tugboatv1alpha1.PromotionPreviewSpec{Pipeline: "web", From: from, To: to},
	}
}

// TestOnDemandPreview_aPersonAsksAndTheHubResolves (issue 26): carol, with
// the chart's ClusterRole tugboat-approver, asks for an on-demand preview
// of web from staging to production; the hub, as its ServiceAccount with
// the chart's RBAC, writes the version staging runs (1.4.0) and one
// production target standing for both (the same values), with a deadline.
// What it cannot resolve (an unknown environment, an environment where no
// version runs) it records in status.failure. The policy tugboat-previews
// refuses a person's preview naming its own targets or version, a change
// of its spec, and a write of its status, even where RBAC allows them; and
// the hub deletes every on-demand preview once its time to live passed.
func TestOnDemandPreview_aPersonAsksAndTheHubResolves(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := onDemandFixture(t)
	carol, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), "carol")
	g.Expect(err).NotTo(HaveOccurred())
	mallory, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), "mallory")
	g.Expect(err).NotTo(HaveOccurred())

	opts := hubtest.Options()
	opts.Promotion.PreviewTTL = 20 * time.Second
	_, stop := hubtest.Start(t, identity.HubConfig(cluster.RESTConfig), opts)
	defer stop()

	g.Eventually(func() error { return carol.Create(ctx, onDemand(ns, "staging-production", "staging", "production")) }).
		WithTimeout(30*time.Second).Should(Succeed(), "RBAC in effect")
	g.Expect(carol.Create(ctx, onDemand(ns, "dev-production", "dev", "production"))).To(Succeed())
	g.Expect(carol.Create(ctx, onDemand(ns, "qa-production", "qa", "production"))).To(Succeed())

	get := func(name string) func(g Gomega) *tugboatv1alpha1.PromotionPreview {
		return func(g Gomega) *tugboatv1alpha1.PromotionPreview {
			pp := &tugboatv1alpha1.PromotionPreview{}
			g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pp)).To(Succeed())
			return pp
		}
	}
	g.Eventually(get("staging-production")).WithTimeout(30 * time.Second).Should(HaveField("Spec.Version", "1.4.0"))
	pp := get("staging-production")(g)
	g.Expect(pp.Spec.Targets).To(HaveLen(1))
	g.Expect(pp.Spec.Targets[0]).To(And(HaveField("Spoke", "prod-1"), HaveField("Targets", int32(2)), HaveField("Spokes", []string{"prod-1", "prod-2"})))
	g.Expect(pp.Spec.TotalTargets).To(BeEquivalentTo(2))
	g.Expect(pp.Spec.Deadline.IsZero()).To(BeFalse())
	g.Expect(pp.OwnerReferences).To(BeEmpty())

	g.Eventually(get("dev-production")).WithTimeout(30 * time.Second).
		Should(HaveField("Status.Failure", "no version runs in dev: none of its targets reported a release yet"))
	g.Eventually(get("qa-production")).WithTimeout(30 * time.Second).
		Should(HaveField("Status.Failure", `pipeline web has no environment "qa"`))
	g.Expect(get("qa-production")(g).Spec.Targets).To(BeEmpty())

	// Only the hub writes what a preview shows.
	forged := onDemand(ns, "forged", "staging", "production")
	forged.Spec.Version, forged.Spec.TotalTargets, forged.Spec.Deadline = "6.6.6", 1, metav1.Now()
	forged.Spec.Targets = pp.Spec.Targets
	err = mallory.Create(ctx, forged)
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("a person asks only for an on-demand preview"))
	err = carol.Create(ctx, forged)
	g.Expect(err).To(HaveOccurred())

	status := get("staging-production")(g)
	status.Status.Failure = "forged"
	err = mallory.Status().Update(ctx, status)
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("only the tugboat hub changes a PromotionPreview's spec or writes its status"))
	err = carol.Status().Update(ctx, status)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "RBAC: the approver role has no promotionpreviews/status; got %v", err)

	fresh := onDemand(ns, "fresh", "staging", "production")
	g.Expect(mallory.Create(ctx, fresh)).To(Succeed())
	fresh.Spec.Version, fresh.Spec.TotalTargets, fresh.Spec.Deadline, fresh.Spec.Targets = "6.6.6", 1, metav1.Now(), pp.Spec.Targets
	err = mallory.Update(ctx, fresh)
	g.Expect(err).To(HaveOccurred())

	// Gone once the time to live passed.
	g.Eventually(func() bool {
		err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "staging-production"}, &tugboatv1alpha1.PromotionPreview{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(BeTrue())
}

// TestPreview_onlyTheHubWritesAPromotionsPreview: a person who may approve
// (and so write promotions/status) cannot write status.preview, neither
// what the approvers saw nor whether it changed since (the policy
// tugboat-approvals keeps it the hub's), while adding their own vote
// still works.
func TestPreview_onlyTheHubWritesAPromotionsPreview(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := onDemandFixture(t)
	g.Expect(identity.Grant(ctx, cluster.Client, ns, "alice", "web/production")).To(Succeed())
	alice, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), "alice")
	g.Expect(err).NotTo(HaveOccurred())
	pr := &tugboatv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-production-1.4.0"},
		Spec: tugboatv1alpha1.PromotionSpec{Pipeline: "web", From: "staging", To: "production", Version: "1.4.0",
			RequestedBy: tugboatv1alpha1.RequestedByAuto},
	}
	g.Expect(hubc.Create(ctx, pr)).To(Succeed())
	orig := pr.DeepCopy()
	now := metav1.Now()
	pr.Status.Phase = tugboatv1alpha1.PromotionWaitingApproval
	pr.Status.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewStale, Name: pr.Name, Digest: strings.Repeat("c0", 32), ComputedAt: &now}
	g.Expect(hubc.Status().Patch(ctx, pr, client.MergeFrom(orig))).To(Succeed())

	for name, forge := range map[string]func(*tugboatv1alpha1.PreviewSummary){
		"approvedDigest": func(s *tugboatv1alpha1.PreviewSummary) {
			s.ApprovedPhase, s.ApprovedDigest = tugboatv1alpha1.PreviewReady, strings.Repeat("d1", 32)
		},
		"phase":                func(s *tugboatv1alpha1.PreviewSummary) { s.Phase = tugboatv1alpha1.PreviewReady },
		"changedSinceApproval": func(s *tugboatv1alpha1.PreviewSummary) { s.ChangedSinceApproval = true },
		"approvalsReset":       func(s *tugboatv1alpha1.PreviewSummary) { s.ApprovalsReset = 1 },
	} {
		forged := pr.DeepCopy()
		forge(forged.Status.Preview)
		err := alice.Status().Patch(ctx, forged, client.MergeFrom(pr))
		g.Expect(err).To(MatchError(ContainSubstring("only the tugboat hub writes a Promotion's status")), name)
	}
	voted := pr.DeepCopy()
	voted.Status.Approvals = append(voted.Status.Approvals, tugboatv1alpha1.ApprovalVote{
		User: "alice", Source: tugboatv1alpha1.ApprovalSourceKubernetes, Decision: tugboatv1alpha1.DecisionApprove, Time: metav1.NewTime(now.Truncate(time.Second))})
	g.Expect(alice.Status().Patch(ctx, voted, client.MergeFrom(pr))).To(Succeed())
}
