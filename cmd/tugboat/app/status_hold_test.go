//go:build !agentonly

package app_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// An uninstalled target reads (absent) and its environment's uninstall hold
// says what happened and how to lift it.
func TestStatus_showsAnUninstallHoldAndAbsentTarget(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	p := newPipeline(t, ns, "web")
	msg := "automatic promotion into and out of staging is held after an uninstall (staging-1/apps/web: uninstalled (was 1.4.0, revision 7)); resume with `tugboat resume web --env staging`"
	writeStatus(t, p, tugboatv1alpha1.PipelineStatus{
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "HeldAfterUninstall", Message: msg, LastTransitionTime: t1}},
		Environments: []tugboatv1alpha1.EnvironmentStatus{
			{Name: "dev", Versions: []string{"1.5.0"}, HealthySince: &t0, Targets: []tugboatv1alpha1.TargetStatus{{Spoke: "dev-1", Namespace: "apps", Release: "web", Revision: 3, Version: "1.5.0", Health: "Current"}}},
			{Name: "staging", Targets: []tugboatv1alpha1.TargetStatus{{Spoke: "staging-1", Namespace: "apps", Release: "web", Absent: true}}},
		},
		HeldEnvironments: []tugboatv1alpha1.HeldEnvironment{{Name: "staging", Reason: tugboatv1alpha1.HoldUninstall, Since: t1, Version: "1.4.0",
			Message: "staging-1/apps/web: uninstalled (was 1.4.0, revision 7)"}},
	})

	out, _, err := tugboat("status", "web", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lineWith(out, "staging", "staging-1")).To(Equal([]string{"staging", "staging-1", "apps", "web", "-", "(absent)", "-", "-"}), out)
	g.Expect(out).To(ContainSubstring("held since 2026-05-01T11:30:00Z: staging-1/apps/web: uninstalled (was 1.4.0, revision 7)"))
	g.Expect(lineWith(out, "Ready", "True", "HeldAfterUninstall")).NotTo(BeNil(), out)
	g.Expect(out).To(ContainSubstring("tugboat resume web --env staging"))
}
