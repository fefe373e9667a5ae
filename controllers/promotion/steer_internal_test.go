package promotion

import (
	"testing"
	"time"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/rollout"
)

// A pause that comes once every wave qualified (only post steps are left)
// is honored and does nothing: the Promotion keeps running its post steps,
// whose deadlines a pause would only run out (review of issue 24); one
// that comes while a wave is left pauses.
func TestSteer_aPauseAfterTheLastWaveHoldsNothing(t *testing.T) {
	now := time.Now()
	promotion := func() *tugboatv1alpha1.Promotion {
		return &tugboatv1alpha1.Promotion{
			Status: tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionVerifying,
				Rollout:        &tugboatv1alpha1.RolloutStatus{Phase: tugboatv1alpha1.RolloutProgressing},
				RolloutRequest: &tugboatv1alpha1.RolloutRequest{Action: tugboatv1alpha1.RolloutActionPause, Sequence: 1, User: "alice"}},
		}
	}
	done := &rollout.Plan{Waves: []rollout.Wave{{Name: "canary"}}, Current: 1}
	pr := promotion()
	if steer(pr, done, nil, now) {
		t.Fatal("replan after a late pause")
	}
	if pr.Status.Phase != tugboatv1alpha1.PromotionVerifying || pr.Status.Rollout.Phase != tugboatv1alpha1.RolloutProgressing || pr.Status.Rollout.PausedBy != "" {
		t.Errorf("a pause after the last wave paused: phase %s, rollout %s, pausedBy %q", pr.Status.Phase, pr.Status.Rollout.Phase, pr.Status.Rollout.PausedBy)
	}
	if pr.Status.Rollout.ObservedRequest != 1 {
		t.Errorf("the request is honored (observed), got %d", pr.Status.Rollout.ObservedRequest)
	}
	if want := "pause by alice not applied"; len(pr.Status.Rollout.Message) < len(want) || pr.Status.Rollout.Message[:len(want)] != want {
		t.Errorf("message %q does not say so", pr.Status.Rollout.Message)
	}

	left := &rollout.Plan{Waves: []rollout.Wave{{Name: "canary"}, {Name: "wave-1"}}, Current: 1}
	pr = promotion()
	steer(pr, left, nil, now)
	if pr.Status.Phase != tugboatv1alpha1.PromotionPaused || pr.Status.Rollout.PausedBy != "alice" {
		t.Errorf("a pause with a wave left: phase %s, pausedBy %q", pr.Status.Phase, pr.Status.Rollout.PausedBy)
	}
}
