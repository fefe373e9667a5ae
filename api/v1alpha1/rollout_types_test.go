package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	tugboatv1 "tugboat.dev/tugboat/api/v1alpha1"
)

// TestRolloutStatus_sizeDoesNotGrowWithTargets fills a Promotion's
// status.rollout to every schema limit (longest strings, most waves, most
// failing targets): what it holds is bounded whatever the number of
// targets. Per-target state is in PromotionTargets, one small object per
// target (at every limit too, below).
func TestRolloutStatus_sizeDoesNotGrowWithTargets(t *testing.T) {
	g := NewWithT(t)
	long := func(prefix string, n int) string { return (prefix + strings.Repeat("x", n))[:n] }
	now := metav1.NewTime(time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC))
	d := &metav1.Duration{Duration: 90 * time.Minute}

	resolved := &tugboatv1.Rollout{
		Canary:           &tugboatv1.CanaryWave{SoakTime: d, ProgressDeadline: d},
		SoakTime:         d,
		ProgressDeadline: d,
		MaxFailures:      ptr.To(intstr.FromString("100%")),
		OnFailure:        tugboatv1.RolloutRollback,
	}
	for i := range tugboatv1.MaxCanarySpokes {
		resolved.Canary.Spokes = append(resolved.Canary.Spokes, long(fmt.Sprintf("canary-%d-", i), 63))
	}
	for range tugboatv1.MaxWaves {
		resolved.Waves = append(resolved.Waves, tugboatv1.Wave{Size: intstr.FromString("100%"), SoakTime: d, ProgressDeadline: d})
	}
	status := tugboatv1.RolloutStatus{
		Phase: tugboatv1.RolloutRollingBack, Resolved: resolved, CurrentWave: 21,
		MaxFailures: 5000, Failed: 5000, Message: long("m", 1024),
	}
	for i := range tugboatv1.MaxWaves + 2 {
		status.Waves = append(status.Waves, tugboatv1.WaveStatus{
			Name: long(fmt.Sprintf("wave-%d", i), 16), Targets: 5000, Pending: 5000, InProgress: 5000, Succeeded: 5000, Failed: 5000,
			StartedAt: &now, CompletedAt: &now,
		})
	}
	for i := range tugboatv1.MaxFailedTargets {
		status.FailedTargets = append(status.FailedTargets, tugboatv1.FailedTarget{
			Spoke: long(fmt.Sprintf("spoke-%d-", i), 63), Namespace: long("n", 63), Release: long("r", 53), Wave: long("w", 16),
			Reason: tugboatv1.TargetProgressDeadlineExceeded, Revision: 1 << 30, Message: long("m", 512), Since: &now,
		})
	}
	data, err := json.Marshal(status)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("status.rollout at every limit: %d bytes", len(data))
	g.Expect(len(data)).To(BeNumerically("<", 40*1024))

	// Per-target state lives in one PromotionTarget per target: one at
	// every limit stays a few KiB, whatever the number of targets.
	pt := tugboatv1.PromotionTarget{
		TypeMeta: metav1.TypeMeta{APIVersion: tugboatv1.GroupVersion.String(), Kind: "PromotionTarget"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: long("n", 63), Name: tugboatv1.PromotionTargetName(long("p", 253), long("s", 63), long("n", 63), long("r", 53)),
			Labels: map[string]string{tugboatv1.LabelPromotion: tugboatv1.PromotionLabelValue(long("p", 253)), tugboatv1.LabelSpoke: long("s", 63)},
		},
		Spec: tugboatv1.PromotionTargetSpec{Promotion: long("p", 253), Spoke: long("s", 63), Namespace: long("n", 63), Release: long("r", 53)},
	}
	action := func() *tugboatv1.TargetAction {
		return &tugboatv1.TargetAction{ID: long("a", 64), Phase: tugboatv1.ActionDelivered, Message: long("m", 1024), Deliveries: 1 << 30, Revision: 1 << 30, LastUpdateTime: &now}
	}
	pt.Status = tugboatv1.PromotionTargetStatus{
		Version: long("v", 64), Revision: 1 << 30, Health: tugboatv1.HealthInProgress, Done: true, Message: long("m", 1024), LastTransitionTime: &now,
		Action: action(), HelmTest: action(),
		Rollout: &tugboatv1.TargetRollout{Wave: 21, ActedAt: now, BaselineRevision: 1 << 30, BaselineInstallation: 1 << 30, Unchanged: true,
			BaselineVersion: long("v", 64), Rollback: action()},
	}
	entry, err := json.Marshal(pt)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("a PromotionTarget at every limit: %d bytes", len(entry))
	g.Expect(len(entry)).To(BeNumerically("<", 8*1024))
	g.Expect(len(pt.Name)).To(BeNumerically("<=", 253))
}

// TestPromotionTargetName_isDeterministicAndBounded: the same target of
// the same Promotion always gets the same name, another target another
// one, and the name stays a DNS subdomain of at most 253 characters
// whatever the Promotion's name.
func TestPromotionTargetName_isDeterministicAndBounded(t *testing.T) {
	g := NewWithT(t)
	a := tugboatv1.PromotionTargetName("web-production-1.4.0", "prod-1", "apps", "web")
	g.Expect(a).To(Equal(tugboatv1.PromotionTargetName("web-production-1.4.0", "prod-1", "apps", "web")))
	g.Expect(a).To(HavePrefix("web-production-1.4.0-"))
	g.Expect(a).NotTo(Equal(tugboatv1.PromotionTargetName("web-production-1.4.0", "prod-2", "apps", "web")))
	g.Expect(a).NotTo(Equal(tugboatv1.PromotionTargetName("web-production-1.4.0", "prod-1", "apps2", "web")))
	for _, name := range []string{strings.Repeat("a", 253), strings.Repeat("a.", 120) + "b", strings.Repeat("a-", 126) + "b"} {
		n := tugboatv1.PromotionTargetName(name, "prod-1", "apps", "web")
		g.Expect(len(n)).To(BeNumerically("<=", 253), n)
		g.Expect(validation.IsDNS1123Subdomain(n)).To(BeEmpty(), n)
		v := tugboatv1.PromotionLabelValue(name)
		g.Expect(validation.IsValidLabelValue(v)).To(BeEmpty(), v)
	}
	g.Expect(tugboatv1.PromotionLabelValue("web-production-1.4.0")).To(Equal("web-production-1.4.0"))
}
