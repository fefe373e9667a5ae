package dora_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/dora"
	. "tugboat.dev/tugboat/controllers/dora/doratest"
)

// randomHistory returns a random history of n revisions within the last 40
// days: versions go up, sometimes back (rollbacks) or stay (redeploys);
// health events come and go.
func randomHistory(r *rand.Rand, spoke string, n int) tugboatv1alpha1.ReleaseHistory {
	var revs []Rev
	minor := 0
	t := ago(40 * Day)
	for range n {
		switch r.IntN(4) {
		case 0:
			minor = max(minor-1, 0) // a rollback
		case 1: // a redeploy
		default:
			minor++
		}
		t = t.Add(time.Duration(r.IntN(int(4*Day/time.Minute))) * time.Minute)
		rev := Rev{Version: fmt.Sprintf("1.%d.0", minor), Deployed: t}
		for k := r.IntN(3); k > 0; k-- {
			e := t.Add(time.Duration(r.IntN(120)) * time.Minute)
			if r.IntN(3) == 0 {
				rev.Failed = append(rev.Failed, e)
			} else {
				rev.Complete = append(rev.Complete, e)
			}
		}
		if r.IntN(10) == 0 {
			rev.Status = tugboatv1alpha1.ReleaseStatusFailed
		}
		revs = append(revs, rev)
	}
	return History("fleet", spoke, revs...)
}

// randomInput returns a random Pipeline history: dev (one target) and
// production (two), up to 11 revisions each, a window of 1 to 40 days.
func randomInput(r *rand.Rand) dora.Input {
	p := Pipeline("fleet", "web", E("dev", "dev-1"), E("production", "prod-1", "prod-2"))
	return dora.Input{
		Pipeline: p, Now: now, Window: time.Duration(1+r.IntN(40)) * Day,
		Histories: []tugboatv1alpha1.ReleaseHistory{
			randomHistory(r, "dev-1", r.IntN(12)), randomHistory(r, "prod-1", r.IntN(12)), randomHistory(r, "prod-2", r.IntN(12)),
		},
	}
}

// consistent reports how the figures of in contradict one another, or "".
func consistent(in dora.Input, f dora.Figures) string {
	if days := float64(in.Window) / float64(Day); f.DeploymentFrequency*days < float64(f.Deployments)-1e-9 || f.DeploymentFrequency*days > float64(f.Deployments)+1e-9 {
		return fmt.Sprintf("frequency %v is not %d deployments over %v days", f.DeploymentFrequency, f.Deployments, days)
	}
	leads := f.LeadTimeUnknown
	if f.LeadTime != nil {
		leads += f.LeadTime.Count
	}
	if leads != f.Deployments {
		return fmt.Sprintf("%d lead times (known or not) for %d deployments", leads, f.Deployments)
	}
	if f.ChangeFailures > f.Changes {
		return fmt.Sprintf("%d failures of %d changes", f.ChangeFailures, f.Changes)
	}
	if (f.ChangeFailureRate == nil) != (f.Changes == 0) {
		return "a rate is known exactly when there are changes"
	}
	for name, s := range map[string]*dora.Summary{"lead time": f.LeadTime, "time to restore": f.TimeToRestore} {
		if s == nil {
			continue
		}
		if s.Count == 0 || s.Median < 0 || s.Median > s.P90 || s.P90 > in.Window+40*Day {
			return fmt.Sprintf("%s summary %+v is inconsistent", name, *s)
		}
	}
	return ""
}

// Whatever the history, the figures are consistent with one another.
func TestCompute_properties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		in := randomInput(r)
		f := dora.Compute(in)
		if msg := consistent(in, f); msg != "" {
			t.Fatalf("case %d: %s\nfigures: %+v", i, msg, f)
		}
	}
}

// FuzzCompute looks for histories whose figures contradict one another
// (go test -fuzz FuzzCompute ./controllers/dora/).
func FuzzCompute(f *testing.F) {
	for _, seed := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(seed, seed+1)
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		in := randomInput(rand.New(rand.NewPCG(a, b)))
		got := dora.Compute(in)
		if msg := consistent(in, got); msg != "" {
			t.Fatalf("%s\nfigures: %+v", msg, got)
		}
	})
}
