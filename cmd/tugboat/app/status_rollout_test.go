//go:build !agentonly

package app_test

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Issue 24, item 4: a Promotion rolling out in waves shows its progress in
// the Pipeline list, its waves in the Pipeline's detail, and (-o wide) the
// targets that failed.
func TestStatus_showsARolloutsWavesAndFailedTargets(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	p := newPipeline(t, ns, "web")
	budget := intstr.FromInt32(2)
	pr := newPromotion(t, p, "production", "1.4.0", tugboatv1alpha1.PromotionStatus{
		Phase: tugboatv1alpha1.PromotionRunning,
		Rollout: &tugboatv1alpha1.RolloutStatus{
			Phase:       tugboatv1alpha1.RolloutProgressing,
			Resolved:    &tugboatv1alpha1.Rollout{MaxFailures: &budget},
			CurrentWave: 1,
			Waves: []tugboatv1alpha1.WaveStatus{
				{Name: "canary", Targets: 1, Succeeded: 1, StartedAt: &t0, CompletedAt: &t1},
				{Name: "wave-1", Targets: 4, Succeeded: 2, InProgress: 1, Failed: 1, StartedAt: &t1},
				{Name: "final", Targets: 5, Pending: 5},
			},
			MaxFailures: 2,
			Failed:      1,
			FailedTargets: []tugboatv1alpha1.FailedTarget{{
				Spoke: "prod-7", Namespace: "apps", Release: "web", Wave: "wave-1",
				Reason: tugboatv1alpha1.TargetHealthFailed, Revision: 12, Message: "Deployment web: 0/3 replicas available", Since: &t1,
			}},
			Message: "wave wave-1: 2 of 4 targets qualified",
		},
	})
	writeStatus(t, p, tugboatv1alpha1.PipelineStatus{Environments: []tugboatv1alpha1.EnvironmentStatus{
		{Name: "production", ActivePromotion: pr.Name},
	}})
	const progress = "wave 2/3 (wave-1), 3/10 succeeded, 1 failed of 2 allowed"

	out, _, err := tugboat("status", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring(pr.Name+" ("+progress+")"), out)

	out, _, err = tugboat("status", "web", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("Rollout of 1.4.0 into production (promotion "+pr.Name+"): "+progress), out)
	g.Expect(lineWith(out, "canary")).To(Equal([]string{"canary", "1", "1", "0", "0", "0", "2026-05-01T10:00:00Z", "2026-05-01T11:30:00Z"}), out)
	g.Expect(lineWith(out, ">", "wave-1")).To(Equal([]string{">", "wave-1", "4", "2", "1", "0", "1", "2026-05-01T11:30:00Z", "-"}), out)
	g.Expect(out).To(ContainSubstring("1 failed target(s): -o wide lists them."))
	g.Expect(out).NotTo(ContainSubstring("prod-7"))

	out, _, err = tugboat("status", "web", "-n", ns, "-o", "wide")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lineWith(out, "prod-7")).To(HaveExactElements("prod-7", "apps", "web", "wave-1", "HealthFailed", "12", "2026-05-01T11:30:00Z",
		"Deployment", "web:", "0/3", "replicas", "available"), out)

	out, _, err = tugboat("status", "web", "-n", ns, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var v struct {
		Environments []struct {
			Name    string `json:"name"`
			Rollout *struct {
				Promotion   string `json:"promotion"`
				CurrentWave int32  `json:"currentWave"`
				Failed      int32  `json:"failed"`
			} `json:"rollout"`
		} `json:"environments"`
	}
	g.Expect(json.Unmarshal([]byte(out), &v)).To(Succeed(), out)
	g.Expect(v.Environments[2].Rollout).NotTo(BeNil())
	g.Expect(v.Environments[2].Rollout.Promotion).To(Equal(pr.Name))
	g.Expect(v.Environments[2].Rollout.CurrentWave).To(Equal(int32(1)))
	g.Expect(v.Environments[0].Rollout).To(BeNil())
}
