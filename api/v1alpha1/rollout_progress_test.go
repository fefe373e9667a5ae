package v1alpha1

import "testing"

func TestRolloutStatus_Progress(t *testing.T) {
	waves := []WaveStatus{{Name: "canary", Targets: 1, Succeeded: 1}, {Name: "wave-1", Targets: 4, Succeeded: 2, Failed: 1}, {Name: "final", Targets: 5}}
	for _, tc := range []struct {
		name string
		r    RolloutStatus
		want string
	}{
		{"in a wave", RolloutStatus{Phase: RolloutProgressing, CurrentWave: 1, Waves: waves, MaxFailures: 2, Failed: 1},
			"wave 2/3 (wave-1), 3/10 succeeded, 1 failed of 2 allowed"},
		{"paused", RolloutStatus{Phase: RolloutPaused, CurrentWave: 0, Waves: waves, Failed: 1},
			"Paused: wave 1/3 (canary), 3/10 succeeded, 1 failed of 0 allowed"},
		{"paused by a person", RolloutStatus{Phase: RolloutPaused, PausedBy: "alice", CurrentWave: 1, Waves: waves, MaxFailures: 2, Failed: 1},
			"Paused by alice: wave 2/3 (wave-1), 3/10 succeeded, 1 failed of 2 allowed"},
		{"done", RolloutStatus{Phase: RolloutCompleted, CurrentWave: 3, Waves: waves},
			"Completed: waves 3/3 done, 3/10 succeeded, 0 failed of 0 allowed"},
		{"no waves yet", RolloutStatus{}, "0/0 succeeded, 0 failed of 0 allowed"},
		{"a current wave out of range", RolloutStatus{CurrentWave: -1, Waves: waves}, "waves 3/3 done, 3/10 succeeded, 0 failed of 0 allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Progress(); got != tc.want {
				t.Errorf("Progress() = %q, want %q", got, tc.want)
			}
		})
	}
}
