package v1alpha1

import "fmt"

// Counts returns how many targets the rollout holds and how many of them
// qualified.
func (r *RolloutStatus) Counts() (targets, succeeded int32) {
	for _, w := range r.Waves {
		targets += w.Targets
		succeeded += w.Succeeded
	}
	return targets, succeeded
}

// Progress is the rollout in one line, as the CLI and the dashboard show
// it: "wave 2/3 (wave-1), 3/10 succeeded, 1 failed of 2 allowed", led by
// the phase when the rollout is not progressing ("Paused: ...", or "Paused
// by alice: ..." when a person paused it).
func (r *RolloutStatus) Progress() string {
	targets, succeeded := r.Counts()
	s := ""
	switch n, cur := len(r.Waves), int(r.CurrentWave); {
	case n == 0:
	case cur >= n || cur < 0:
		s = fmt.Sprintf("waves %d/%d done, ", n, n)
	default:
		s = fmt.Sprintf("wave %d/%d (%s), ", cur+1, n, r.Waves[cur].Name)
	}
	s += fmt.Sprintf("%d/%d succeeded, %d failed of %d allowed", succeeded, targets, r.Failed, r.MaxFailures)
	switch {
	case r.Phase == RolloutPaused && r.PausedBy != "":
		s = "Paused by " + r.PausedBy + ": " + s
	case r.Phase != "" && r.Phase != RolloutProgressing:
		s = string(r.Phase) + ": " + s
	}
	return s
}
