package config_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestHubBase_shipsTheApprovalPolicyForItsOwnServiceAccount checks that the
// hub base installs the policy tugboat-approvals with its binding, that the
// policy exempts exactly the ServiceAccount the hub's Deployment runs as
// (in the namespace the base sets), and the example ClusterRole
// tugboat-approver. The policy's rules themselves are tested on a real API
// server (controllers/promotion/request).
func TestHubBase_shipsTheApprovalPolicyForItsOwnServiceAccount(t *testing.T) {
	g := NewWithT(t)
	objs := build(t, "hub")

	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	g.Expect(objs).To(HaveKey("ValidatingAdmissionPolicy//tugboat-approvals"))
	decode(t, objs["ValidatingAdmissionPolicy//tugboat-approvals"], &vap)
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	g.Expect(objs).To(HaveKey("ValidatingAdmissionPolicyBinding//tugboat-approvals"))
	decode(t, objs["ValidatingAdmissionPolicyBinding//tugboat-approvals"], &binding)
	g.Expect(binding.Spec.PolicyName).To(Equal(vap.Name))
	g.Expect(binding.Spec.ValidationActions).To(ConsistOf(admissionregistrationv1.Deny))
	g.Expect(*vap.Spec.FailurePolicy).To(Equal(admissionregistrationv1.Fail))

	var sa corev1.ServiceAccount
	g.Expect(objs).To(HaveKey("ServiceAccount/tugboat-system/tugboat-hub"))
	decode(t, objs["ServiceAccount/tugboat-system/tugboat-hub"], &sa)
	hubUser := "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
	g.Expect(vap.Spec.MatchConditions).To(HaveLen(1))
	g.Expect(vap.Spec.MatchConditions[0].Expression).To(Equal("request.userInfo.username != '" + hubUser + "'"))
	g.Expect(string(objs["Deployment/tugboat-system/tugboat-hub"])).To(ContainSubstring("serviceAccountName: " + sa.Name))

	resources := []string{}
	for _, r := range vap.Spec.MatchConstraints.ResourceRules {
		g.Expect(r.APIGroups).To(Equal([]string{"tugboat.dev"}))
		resources = append(resources, string(r.Operations[0])+" "+strings.Join(r.Resources, ","))
	}
	g.Expect(resources).To(ConsistOf("UPDATE promotions/status", "CREATE promotions"))

	var role rbacv1.ClusterRole
	g.Expect(objs).To(HaveKey("ClusterRole//tugboat-approver"))
	decode(t, objs["ClusterRole//tugboat-approver"], &role)
	g.Expect(role.Rules).To(ContainElement(rbacv1.PolicyRule{APIGroups: []string{"tugboat.dev"}, Resources: []string{"environments"}, Verbs: []string{"approve"}}))
	g.Expect(role.Rules).To(ContainElement(rbacv1.PolicyRule{APIGroups: []string{"tugboat.dev"}, Resources: []string{"promotions/status"}, Verbs: []string{"get", "patch", "update"}}))
}
