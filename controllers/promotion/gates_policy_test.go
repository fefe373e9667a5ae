package promotion_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/identity"
)

// TestPolicy_weakeningAGateNeedsTheApproveVerb: with the hub chart's policy
// tugboat-gates on the real API server, a user who may update Pipelines
// still changes targets and raises a gate, but may not turn an approval
// gate off, lower its count, change its approvers or the CI approval
// credentials unless RBAC also lets them approve promotions into that
// environment (security review 3, medium 3: anyone who could update a
// Pipeline could drop the gate or add themselves as an approver).
func TestPolicy_weakeningAGateNeedsTheApproveVerb(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, p := stagingProduction(g, "gates", func(gates *tugboatv1alpha1.Gates) {
		gates.RequireApproval, gates.Approvals = true, ptr.To[int32](2)
		gates.Approvers = &tugboatv1alpha1.Approvers{SlackUsers: []string{"U012ALICE"}}
		gates.ReapproveOnChange = true
	})
	editorRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "pipeline-editor"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"tugboat.dev"}, Resources: []string{"pipelines"}, Verbs: []string{"get", "update", "patch"}},
	}}
	g.Expect(cluster.Client.Create(ctx, editorRole)).To(Succeed())
	for _, user := range []string{"eddie", "lena"} {
		g.Expect(cluster.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "pipeline-editor-" + user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pipeline-editor"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		})).To(Succeed())
	}
	// lena may also approve promotions into production; eddie may not.
	g.Expect(identity.Grant(ctx, cluster.Client, ns.Name, "lena", "web/production")).To(Succeed())

	as := func(user string) client.Client {
		c, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), user)
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	eddie, lena := as("eddie"), as("lena")
	update := func(c client.Client, change func(*tugboatv1alpha1.Pipeline)) error {
		cur := &tugboatv1alpha1.Pipeline{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
			return err
		}
		change(cur)
		return c.Update(ctx, cur)
	}
	production := func(p *tugboatv1alpha1.Pipeline) *tugboatv1alpha1.Gates { return &p.Spec.Environments[1].Gates }
	const refused = "user eddie may not weaken or change the approval gate of web/production (requireApproval, approvals, approvers): " +
		"RBAC must allow the verb approve on environments.tugboat.dev with that name or web/*"

	// The API server enforces the policy once its informer has it, and
	// RBAC once it has the bindings.
	g.Eventually(func() error {
		return update(eddie, func(p *tugboatv1alpha1.Pipeline) { production(p).Approvals = ptr.To[int32](1) })
	}).WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring(refused)))

	for name, weaken := range map[string]func(*tugboatv1alpha1.Pipeline){
		"approval off": func(p *tugboatv1alpha1.Pipeline) {
			g := production(p)
			g.RequireApproval, g.Approvals, g.Approvers, g.ReapproveOnChange = false, nil, nil, false
		},
		"an approver added": func(p *tugboatv1alpha1.Pipeline) {
			production(p).Approvers.SlackUsers = append(production(p).Approvers.SlackUsers, "U666EDDIE")
		},
		"the approvers gone":    func(p *tugboatv1alpha1.Pipeline) { production(p).Approvers = nil },
		"approvals defaulted":   func(p *tugboatv1alpha1.Pipeline) { production(p).Approvals = nil },
		"approvals lowered to":  func(p *tugboatv1alpha1.Pipeline) { production(p).Approvals = ptr.To[int32](1) },
		"reapproveOnChange off": func(p *tugboatv1alpha1.Pipeline) { production(p).ReapproveOnChange = false },
	} {
		g.Expect(update(eddie, weaken)).To(MatchError(ContainSubstring(refused)), name)
	}
	g.Expect(update(eddie, func(p *tugboatv1alpha1.Pipeline) {
		p.Spec.ApprovalSecretRef = &tugboatv1alpha1.LocalSecretReference{Name: "eddies-credentials"}
	})).To(MatchError(ContainSubstring("user eddie may not change spec.approvalSecretRef, the CI approval credentials")))

	// What does not weaken a gate stays his to change.
	g.Expect(update(eddie, func(p *tugboatv1alpha1.Pipeline) {
		p.Spec.Environments[1].Targets = append(p.Spec.Environments[1].Targets, tugboatv1alpha1.Target{Spoke: "prod-2", Namespace: "apps"})
	})).To(Succeed())
	g.Expect(update(eddie, func(p *tugboatv1alpha1.Pipeline) { production(p).Approvals = ptr.To[int32](3) })).To(Succeed(), "a stronger gate")

	// lena, who may approve into production, may lower it again.
	g.Eventually(func() error {
		return update(lena, func(p *tugboatv1alpha1.Pipeline) { production(p).Approvals = ptr.To[int32](1) })
	}).WithTimeout(30 * time.Second).Should(Succeed())
	got := &tugboatv1alpha1.Pipeline{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
	g.Expect(got.Spec.Environments[1].Gates.Approvals).To(Equal(ptr.To[int32](1)))
	g.Expect(got.Spec.Environments[1].Targets).To(HaveLen(2))
}
