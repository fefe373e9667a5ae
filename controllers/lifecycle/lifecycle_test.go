package lifecycle_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/lifecycle"
	"tugboat.dev/tugboat/e2e/identity"
)

// TestReconciler_readyWhileAControllerClaimsTheLifecycle runs the hub as
// its ServiceAccount: a Lifecycle no one claimed is Ready=False
// (NotClaimed); claimed by a step controller (a ServiceAccount bound to
// tugboat-step-controller) in its own name it is Ready=True (Claimed),
// naming it; a claim older than ClaimWindow is Ready=False
// (ClaimExpired). A claim in someone else's name, and a condition written
// by the controller, are refused by the policy tugboat-lifecycles.
func TestReconciler_readyWhileAControllerClaimsTheLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lifecycle-"}}
	g.Expect(cluster.Client.Create(ctx, ns)).To(Succeed())
	user := "system:serviceaccount:" + ns.Name + ":migrator"
	g.Expect(cluster.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "migrator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tugboat-step-controller"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns.Name, Name: "migrator"}},
	})).To(Succeed())
	g.Eventually(func() bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns.Name, Verb: "patch", Group: "tugboat.dev", Resource: "lifecycles", Subresource: "status"}}}
		g.Expect(cluster.Client.Create(ctx, sar)).To(Succeed())
		return sar.Status.Allowed
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	migrator, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), user, "system:serviceaccounts")
	g.Expect(err).NotTo(HaveOccurred())
	hubtest.Start(t, identity.HubConfig(cluster.RESTConfig), hubtest.Options())

	lc := &tugboatv1alpha1.Lifecycle{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "db-migrate"}, Spec: tugboatv1alpha1.LifecycleSpec{EventKey: "db-migrate"}}
	g.Expect(cluster.Client.Create(ctx, lc)).To(Succeed())
	ready := func() string {
		got := &tugboatv1alpha1.Lifecycle{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(lc), got)).To(Succeed())
		c := apimeta.FindStatusCondition(got.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
		if c == nil {
			return ""
		}
		return string(c.Status) + " " + c.Reason + ": " + c.Message
	}
	g.Eventually(ready).WithTimeout(30 * time.Second).Should(HavePrefix("False NotClaimed: no controller has claimed lifecycle db-migrate"))

	claimed, err := lifecycle.Claim(ctx, migrator, ns.Name, "db-migrate")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(claimed.Status.ClaimedBy).To(Equal(user))
	g.Eventually(ready).WithTimeout(30 * time.Second).Should(HavePrefix("True Claimed: claimed by " + user + " at "))

	// Refused: a claim in another name, a condition written by the controller.
	cur := &tugboatv1alpha1.Lifecycle{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(lc), cur)).To(Succeed())
	forged := cur.DeepCopy()
	forged.Status.ClaimedBy = "someone-else"
	g.Expect(migrator.Status().Patch(ctx, forged, client.MergeFrom(cur))).To(MatchError(ContainSubstring("status.claimedBy must name you (user " + user + ")")))
	forged = cur.DeepCopy()
	apimeta.SetStatusCondition(&forged.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Claimed", Message: "trust me"})
	forged.Status.Conditions[0].Message = "trust me"
	g.Expect(migrator.Status().Patch(ctx, forged, client.MergeFrom(cur))).To(MatchError(ContainSubstring("only the tugboat hub writes a Lifecycle's conditions")))

	// A claim older than the window: the controller stopped.
	old := cur.DeepCopy()
	long := metav1.NewTime(time.Now().Add(-lifecycle.ClaimWindow - time.Hour))
	old.Status.LastClaimedAt = &long
	g.Expect(migrator.Status().Patch(ctx, old, client.MergeFrom(cur))).To(Succeed())
	g.Eventually(ready).WithTimeout(30 * time.Second).Should(HavePrefix("False ClaimExpired: last claimed by " + user))
}

// TestPolicy_onlyTheHubFinishesAWebhookStepsReportEvent (review of issue
// 25): the event of a webhook step that answered 202 (lifecycle
// tugboat-webhook-report) is finished only by the hub, on a report the
// step's key authenticated through the CI API; a step controller (a
// ServiceAccount bound to tugboat-step-controller) that finishes events of
// its own lifecycle is refused on it. Before, any step controller passed
// the webhook step with `tugboat lifecycle done`.
func TestPolicy_onlyTheHubFinishesAWebhookStepsReportEvent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lifecycle-report-"}}
	g.Expect(cluster.Client.Create(ctx, ns)).To(Succeed())
	user := "system:serviceaccount:" + ns.Name + ":migrator"
	g.Expect(cluster.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "migrator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tugboat-step-controller"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns.Name, Name: "migrator"}},
	})).To(Succeed())
	migrator, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), user, "system:serviceaccounts")
	g.Expect(err).NotTo(HaveOccurred())
	hub, err := client.New(identity.HubConfig(cluster.RESTConfig), client.Options{Scheme: cluster.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	event := func(name, lc string) {
		ev := &tugboatv1alpha1.LifecycleEvent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
			Spec: tugboatv1alpha1.LifecycleEventSpec{Lifecycle: lc, EventKey: lc, Promotion: "web-production-1.0.0", Pipeline: "web",
				Environment: "production", Version: "1.0.0", Step: "qa", Stage: tugboatv1alpha1.StepStagePre, Attempt: 1,
				Deadline: metav1.NewTime(time.Now().Add(time.Hour))},
		}
		g.Expect(hub.Create(ctx, ev)).To(Succeed())
	}
	event("web-production-1.0.0-qa-1", "tugboat-webhook-report")
	event("web-production-1.0.0-migrate-1", "db-migrate")

	g.Eventually(func() error {
		_, err := lifecycle.Finish(ctx, migrator, ns.Name, "web-production-1.0.0-migrate-1", tugboatv1alpha1.EventDone, "migrated")
		return err
	}).WithTimeout(30*time.Second).Should(Succeed(), "its own lifecycle's event: the RBAC binding took effect")
	_, err = lifecycle.Finish(ctx, migrator, ns.Name, "web-production-1.0.0-qa-1", tugboatv1alpha1.EventDone, "trust me")
	g.Expect(err).To(MatchError(ContainSubstring("only the tugboat hub finishes its event")))
	got := &tugboatv1alpha1.LifecycleEvent{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "web-production-1.0.0-qa-1"}, got)).To(Succeed())
	g.Expect(got.Status.Phase).NotTo(Equal(tugboatv1alpha1.EventDone))
}
