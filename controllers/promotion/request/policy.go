package request

import (
	"context"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PolicyName names the ValidatingAdmissionPolicy of the hub chart that
// makes Kubernetes votes authentic (a vote names the user who wrote it,
// who has the RBAC verb approve), and its binding
// (config/charts/tugboat-hub/templates/approvals.yaml).
const PolicyName = "tugboat-approvals"

// The hub reads the policy and its bindings to know whether the API server
// enforces it.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;list;watch

// PolicyEnforced reports whether the API server c reads enforces the
// ValidatingAdmissionPolicy tugboat-approvals: the policy exists with
// failurePolicy Fail, and a ValidatingAdmissionPolicyBinding binds it
// with the validation action Deny. When it does not, why says what is
// missing, for a Promotion's status. The error is the API's, when it
// could not tell.
//
// It cannot tell that the policy's rules are the chart's: a cluster
// administrator who may edit them is trusted like one who may remove them.
func PolicyEnforced(ctx context.Context, c client.Reader) (ok bool, why string, err error) {
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := c.Get(ctx, types.NamespacedName{Name: PolicyName}, vap); err != nil {
		if apierrors.IsNotFound(err) {
			return false, "the ValidatingAdmissionPolicy " + PolicyName + " is not installed (hub chart value approvals.policy)", nil
		}
		return false, "", fmt.Errorf("reading the ValidatingAdmissionPolicy %s: %w", PolicyName, err)
	}
	if fp := vap.Spec.FailurePolicy; fp != nil && *fp != admissionregistrationv1.Fail {
		return false, fmt.Sprintf("the ValidatingAdmissionPolicy %s has failurePolicy %s, not Fail", PolicyName, *fp), nil
	}
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := c.List(ctx, &bindings); err != nil {
		return false, "", fmt.Errorf("listing ValidatingAdmissionPolicyBindings: %w", err)
	}
	for _, b := range bindings.Items {
		if b.Spec.PolicyName == PolicyName && slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) {
			return true, "", nil
		}
	}
	return false, "no ValidatingAdmissionPolicyBinding binds the policy " + PolicyName + " with validationActions [Deny]", nil
}
