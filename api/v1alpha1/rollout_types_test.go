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
	"k8s.io/utils/ptr"

	tugboatv1 "tugboat.dev/tugboat/api/v1alpha1"
)

// TestRolloutStatus_sizeDoesNotGrowWithTargets fills a Promotion's
// status.rollout to every schema limit (longest strings, most waves, most
// failing targets): what it holds is bounded whatever the number of
// targets, unlike status.targets, which holds one entry per target.
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

	// For comparison: one status.targets entry at its limits, times 5,000
	// targets, would not fit in an object (etcd's limit is 1.5 MiB).
	entry, err := json.Marshal(tugboatv1.PromotionTargetStatus{
		Spoke: long("s", 63), Namespace: long("n", 63), Release: long("r", 53), Version: long("v", 64), Revision: 1 << 30,
		Health: tugboatv1.HealthInProgress, Done: true, Message: long("m", 1024), LastTransitionTime: &now,
		Action: &tugboatv1.TargetAction{ID: long("a", 64), Phase: tugboatv1.ActionDelivered, Message: long("m", 1024), Deliveries: 9, Revision: 9, LastUpdateTime: &now},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("status.targets at 5,000 targets: %d bytes at the limits", 5000*len(entry))
	g.Expect(5000 * len(entry)).To(BeNumerically(">", 3*1024*1024/2))
}
