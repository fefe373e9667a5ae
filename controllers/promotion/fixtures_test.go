package promotion_test

import (
	"context"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// stagingProduction creates a namespace of its own (prefix-<random>) and in
// it Pipeline web: staging (spoke staging-1) then production (prod-1), with
// the notification strategy; gates, if given, change production's gates
// before it is created.
func stagingProduction(g Gomega, prefix string, gates func(*tugboatv1alpha1.Gates)) (*corev1.Namespace, *tugboatv1alpha1.Pipeline) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	g.Expect(cluster.Client.Create(ctx, ns)).To(Succeed())
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "web"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
			Environments: []tugboatv1alpha1.Environment{
				{Name: "staging", Targets: []tugboatv1alpha1.Target{{Spoke: "staging-1", Namespace: "apps"}}},
				{Name: "production", Targets: []tugboatv1alpha1.Target{{Spoke: "prod-1", Namespace: "apps"}}},
			},
		},
	}
	if gates != nil {
		gates(&p.Spec.Environments[1].Gates)
	}
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
	return ns, p
}
