package spoke_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// TestReconciler_onlyTheNewerOfTwoSameNamedSpokesIsStalled is issue 23
// Medium 8: a Spoke created with a name an older Spoke in another namespace
// already has (a squatter) is Stalled (DuplicateName) with a message that
// names no other namespace; the older one is not, and its agent bootstrap
// goes on. Once the older one is gone, the newer one owns the name.
func TestReconciler_onlyTheNewerOfTwoSameNamedSpokesIsStalled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ownerNS, squatterNS, name = "names-owner", "names-squatter", "shared-1"
	newSpoke := func(ns string) *tugboatv1alpha1.Spoke {
		return &tugboatv1alpha1.Spoke{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}},
		}
	}
	owner, squatter := newSpoke(ownerNS), newSpoke(squatterNS)
	squatter.Spec.KubeConfigSecretRef = &tugboatv1alpha1.SecretKeyReference{Name: "shared-1-kubeconfig"}
	squatter.Spec.AgentBootstrap = &tugboatv1alpha1.AgentBootstrap{HubURL: "https://hub.example.com"}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ownerNS}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: squatterNS}},
		owner,
	} {
		g.Expect(cluster.Client.Create(ctx, o)).To(Succeed())
	}
	get := func(sp *tugboatv1alpha1.Spoke) *tugboatv1alpha1.Spoke {
		got := &tugboatv1alpha1.Spoke{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(sp), got)).To(Succeed())
		return got
	}
	condition := func(sp *tugboatv1alpha1.Spoke, t tugboatv1alpha1.ConditionType) func() *metav1.Condition {
		return func() *metav1.Condition {
			return apimeta.FindStatusCondition(get(sp).Status.Conditions, t.String())
		}
	}
	g.Eventually(func() int64 { return get(owner).Status.ObservedGeneration }).WithTimeout(10 * time.Second).Should(BeEquivalentTo(1))
	// creationTimestamp has a resolution of one second: let the squatter be
	// created in a later one, so that the older Spoke is the first.
	created := get(owner).CreationTimestamp.Time
	g.Eventually(func() bool { return time.Now().Truncate(time.Second).After(created) }).WithTimeout(3 * time.Second).WithPolling(50 * time.Millisecond).Should(BeTrue())
	g.Expect(cluster.Client.Create(ctx, squatter)).To(Succeed())

	g.Eventually(condition(squatter, tugboatv1alpha1.StalledCondition)).WithTimeout(10 * time.Second).Should(And(
		HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "DuplicateName")))
	stalled := condition(squatter, tugboatv1alpha1.StalledCondition)()
	g.Expect(stalled.Message).To(ContainSubstring(`spoke name "shared-1" is already used by an older Spoke in another namespace`))
	g.Expect(stalled.Message).NotTo(ContainSubstring(ownerNS), "another tenant's namespace is not revealed")
	g.Expect(condition(squatter, tugboatv1alpha1.ReadyCondition)().Message).NotTo(ContainSubstring(ownerNS))

	// The older Spoke is not stalled by the squatter, and bootstraps its
	// agent: asked to now, it tries (the kubeconfig Secret is missing, so
	// the install fails and says so in AgentInstalled).
	g.Consistently(condition(owner, tugboatv1alpha1.StalledCondition)).WithTimeout(time.Second).Should(BeNil())
	obj := get(owner)
	obj.Spec.KubeConfigSecretRef = &tugboatv1alpha1.SecretKeyReference{Name: "shared-1-kubeconfig"}
	obj.Spec.AgentBootstrap = &tugboatv1alpha1.AgentBootstrap{HubURL: "https://hub.example.com"}
	g.Expect(cluster.Client.Update(ctx, obj)).To(Succeed())
	g.Eventually(condition(owner, tugboatv1alpha1.AgentInstalledCondition)).WithTimeout(10 * time.Second).Should(And(
		HaveField("Status", metav1.ConditionFalse), HaveField("Message", ContainSubstring("shared-1-kubeconfig"))))
	g.Expect(condition(owner, tugboatv1alpha1.StalledCondition)()).To(BeNil())
	g.Expect(condition(squatter, tugboatv1alpha1.AgentInstalledCondition)()).To(BeNil(), "the squatter's agent is not installed")

	// The older Spoke deleted, the name is the newer one's.
	g.Expect(cluster.Client.Delete(ctx, owner)).To(Succeed())
	g.Eventually(condition(squatter, tugboatv1alpha1.StalledCondition)).WithTimeout(10 * time.Second).Should(BeNil())
}
