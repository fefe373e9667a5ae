package promotion

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/rollout"
)

// TestRollout_5000TargetsKeepEveryObjectSmall plans a rollout into 5,000
// targets half-way through (a canary of 50, then waves of 10%: five waves
// acted on, 100 targets failing, the rest not acted on yet) with the
// controller's own code (plannerTarget, the planner, recordPlan), fills
// the rest of the Promotion's status to its limits (votes, notices,
// steps, conditions), and marshals what the hub stores: the Promotion,
// whose size does not grow with the targets, and one PromotionTarget per
// target acted on.
func TestRollout_5000TargetsKeepEveryObjectSmall(t *testing.T) {
	const targets = 5000
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	d := &metav1.Duration{Duration: 10 * time.Minute}
	ro := &tugboatv1alpha1.Rollout{
		Canary:      &tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](50), SoakTime: d},
		MaxFailures: ptr.To(intstr.FromString("5%")), OnFailure: tugboatv1alpha1.RolloutPause, ProgressDeadline: d,
	}
	for range 10 {
		ro.Waves = append(ro.Waves, tugboatv1alpha1.Wave{Size: intstr.FromString("10%"), SoakTime: d})
	}
	pr := &tugboatv1alpha1.Promotion{
		TypeMeta: metav1.TypeMeta{APIVersion: tugboatv1alpha1.GroupVersion.String(), Kind: "Promotion"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "web-production-1.4.0", UID: "5f0c6e2a-3b1d-4c4e-9a57-0e1f2d3c4b5a",
			Labels: map[string]string{"tugboat.dev/pipeline": "web"}},
		Spec: tugboatv1alpha1.PromotionSpec{Pipeline: "web", From: "staging", To: "production", Version: "1.4.0", RequestedBy: tugboatv1alpha1.RequestedByAuto},
		Status: tugboatv1alpha1.PromotionStatus{
			Phase:    tugboatv1alpha1.PromotionRunning,
			Strategy: &tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm},
			Rollout:  &tugboatv1alpha1.RolloutStatus{Phase: tugboatv1alpha1.RolloutProgressing, Resolved: ro, CurrentWave: 5},
		},
	}
	long := func(prefix string, n int) string { return (prefix + strings.Repeat("x", n))[:n] }
	at := metav1.NewTime(now)
	for i := range 20 {
		pr.Status.Approvals = append(pr.Status.Approvals, tugboatv1alpha1.ApprovalVote{
			User: long(fmt.Sprintf("user-%d-", i), 256), Decision: tugboatv1alpha1.DecisionApprove, Time: at, Message: long("m", 1024)})
	}
	for i := range 100 {
		pr.Status.Notifications = append(pr.Status.Notifications, tugboatv1alpha1.NotificationDelivery{
			Notifier: fmt.Sprintf("notifier-%d", i), Event: tugboatv1alpha1.EventPromotionRunning,
			DeliveryState: tugboatv1alpha1.DeliveryState{Phase: tugboatv1alpha1.NotificationDelivered, Attempts: 1, LastAttemptAt: &at, DeliveredAt: &at}})
	}

	// 2,050 targets acted on (the canary and four waves of 500), 100 of
	// them failing; the others not acted on yet.
	base := now.Add(-time.Hour)
	var obs []observation
	for i := range targets {
		spoke := fmt.Sprintf("prod-%04d", i)
		ts := &target{Spoke: spoke, Namespace: "apps", Release: "web"}
		cur := &tugboatv1alpha1.RevisionSummary{Revision: 3, Installation: 1, ChartVersion: "1.3.0",
			Status: tugboatv1alpha1.ReleaseStatusDeployed, Health: tugboatv1alpha1.HealthCurrent}
		if wave := waveOf(i); wave < 5 {
			ts.Rollout = &tugboatv1alpha1.TargetRollout{Wave: int32(wave), ActedAt: metav1.NewTime(base.Add(time.Duration(wave) * 10 * time.Minute)),
				BaselineRevision: 3, BaselineInstallation: 1, BaselineVersion: "1.3.0"}
			ts.Action = &tugboatv1alpha1.TargetAction{ID: fmt.Sprintf("%064x", i), Phase: tugboatv1alpha1.ActionSucceeded, Revision: 4, Deliveries: 1,
				Message: "upgraded release apps/web to web 1.4.0 (revision 4)", LastUpdateTime: &ts.Rollout.ActedAt}
			cur = &tugboatv1alpha1.RevisionSummary{Revision: 4, Installation: 1, ChartVersion: "1.4.0",
				Status: tugboatv1alpha1.ReleaseStatusDeployed, Health: tugboatv1alpha1.HealthCurrent}
			if i%20 == 7 {
				cur.Health, cur.HealthReason = tugboatv1alpha1.HealthFailed, "Deployment web: ProgressDeadlineExceeded: "+long("r", 400)
			}
			ts.Version, ts.Revision, ts.Health = cur.ChartVersion, cur.Revision, cur.Health
			ts.Done = cur.Health == tugboatv1alpha1.HealthCurrent
			since := metav1.NewTime(ts.Rollout.ActedAt.Add(time.Minute))
			ts.LastTransitionTime = &since
		}
		obs = append(obs, observation{status: ts, current: cur})
	}
	in := rollout.Input{Rollout: ro, Version: "1.4.0", CompletedWaves: 5, Now: now}
	for _, o := range obs {
		in.Targets = append(in.Targets, plannerTarget(o, nil, now))
	}
	plan, err := rollout.New(in)
	if err != nil {
		t.Fatal(err)
	}
	recordPlan(pr, plan, obs, now)
	r := &Reconciler{Now: func() time.Time { return now }}
	r.setPhase(pr, tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.ProgressingReason, "rolling 1.4.0 out into production: "+pr.Status.Rollout.Message)

	promotion, err := json.Marshal(pr)
	if err != nil {
		t.Fatal(err)
	}
	largest, total, n := 0, 0, 0
	for _, o := range obs {
		if !kept(pr, o.status) {
			continue
		}
		pt := tugboatv1alpha1.PromotionTarget{
			TypeMeta: metav1.TypeMeta{APIVersion: tugboatv1alpha1.GroupVersion.String(), Kind: "PromotionTarget"},
			ObjectMeta: metav1.ObjectMeta{Namespace: pr.Namespace, Name: tugboatv1alpha1.PromotionTargetName(pr.Name, o.status.Spoke, o.status.Namespace, o.status.Release),
				Labels:          map[string]string{tugboatv1alpha1.LabelPromotion: pr.Name, tugboatv1alpha1.LabelSpoke: o.status.Spoke},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(pr, tugboatv1alpha1.GroupVersion.WithKind("Promotion"))}},
			Spec:   tugboatv1alpha1.PromotionTargetSpec{Promotion: pr.Name, Spoke: o.status.Spoke, Namespace: o.status.Namespace, Release: o.status.Release},
			Status: o.status.PromotionTargetStatus,
		}
		b, err := json.Marshal(pt)
		if err != nil {
			t.Fatal(err)
		}
		largest, total = max(largest, len(b)), total+len(b)
		n++
	}
	t.Logf("5,000 targets, %d acted on (%d failing): the Promotion is %d bytes (status.rollout: %d waves, %d failing targets listed); "+
		"the largest PromotionTarget %d bytes, all %d of them %d bytes",
		n, plan.Budget.Used, len(promotion), len(pr.Status.Rollout.Waves), len(pr.Status.Rollout.FailedTargets), largest, n, total)
	if n != 2050 {
		t.Errorf("%d PromotionTargets, want one per target acted on (2050)", n)
	}
	if len(promotion) > 96*1024 {
		t.Errorf("the Promotion is %d bytes: it must not grow with its targets", len(promotion))
	}
	if largest > 2*1024 {
		t.Errorf("the largest PromotionTarget is %d bytes", largest)
	}
}

// waveOf is the wave of target i in TestRollout_5000TargetsKeepEveryObjectSmall's
// plan: a canary of 50, then waves of 500.
func waveOf(i int) int {
	if i < 50 {
		return 0
	}
	return 1 + (i-50)/500
}
