package rollout_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/rollout"
)

const version = "1.4.0"

var t0 = time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)

// fleet returns one target (release web in namespace apps) per spoke name.
func fleet(spokes ...string) []rollout.Target {
	out := make([]rollout.Target, len(spokes))
	for i, s := range spokes {
		out[i] = rollout.Target{Key: rollout.Key{Spoke: s, Namespace: "apps", Release: "web"}}
	}
	return out
}

// numbered returns n targets on spokes s01, s02, ...
func numbered(n int) []rollout.Target {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("s%02d", i+1)
	}
	return fleet(names...)
}

// labeled sets the Spoke's labels of the targets on the named spokes.
func labeled(ts []rollout.Target, lbls map[string]string, spokes ...string) []rollout.Target {
	for i := range ts {
		for _, s := range spokes {
			if ts[i].Spoke == s {
				ts[i].Labels = lbls
			}
		}
	}
	return ts
}

// acted records that the Promotion acted on spoke's target in wave at t0,
// its upgrade from revision 6 producing revision 7, and sets what the
// target reports.
func acted(ts []rollout.Target, spoke string, wave int, report *rollout.Report) []rollout.Target {
	for i := range ts {
		if ts[i].Spoke == spoke {
			ts[i].Action = &rollout.Action{Wave: wave, At: t0, Baseline: rev(6), Produced: ptr.To(rev(7))}
			ts[i].Report = report
			return ts
		}
	}
	panic("no target on " + spoke)
}

// awaited marks the action on spoke's target as not reported by its agent
// yet: it produced no known revision.
func awaited(ts []rollout.Target, spoke string) []rollout.Target {
	for i := range ts {
		if ts[i].Spoke == spoke {
			ts[i].Action.Produced, ts[i].Action.Awaited = nil, true
		}
	}
	return ts
}

// unknownProduced marks the action on spoke's target as one whose strategy
// cannot say which revision it produced.
func unknownProduced(ts []rollout.Target, spoke string) []rollout.Target {
	for i := range ts {
		if ts[i].Spoke == spoke {
			ts[i].Action.Produced = nil
		}
	}
	return ts
}

func rev(n int32) rollout.Rev { return rollout.Rev{Installation: 1, Number: n} }

// healthy is revision n of the promoted version, deployed and Current since
// t0+1m.
func healthy(n int32) *rollout.Report {
	return &rollout.Report{Rev: rev(n), Version: version, Status: tugboatv1alpha1.ReleaseStatusDeployed,
		Health: tugboatv1alpha1.HealthCurrent, HealthySince: t0.Add(time.Minute)}
}

// report is revision n of version v with Helm status st and health h.
func report(n int32, v string, st tugboatv1alpha1.ReleaseStatus, h tugboatv1alpha1.Health) *rollout.Report {
	return &rollout.Report{Rev: rev(n), Version: v, Status: st, Health: h}
}

// summary is a plan in a form a table can state.
type summary struct {
	// Waves are "name=[spoke ...]".
	Waves []string
	// States are "spoke:State" for targets that are not Pending.
	States  []string
	Current int
	Done    bool
	ActNow  []string
	Allowed int
	Used    int
	Spent   bool
	// Failed are "spoke:Failure".
	Failed []string
}

func summarize(p *rollout.Plan) summary {
	s := summary{Current: p.Current, Done: p.Done(), Allowed: p.Budget.Allowed, Used: p.Budget.Used, Spent: p.Budget.Spent()}
	for _, w := range p.Waves {
		var spokes []string
		for _, t := range w.Targets {
			spokes = append(spokes, t.Spoke)
			if t.State != rollout.Pending {
				s.States = append(s.States, t.Spoke+":"+string(t.State))
			}
		}
		s.Waves = append(s.Waves, w.Name+"=["+strings.Join(spokes, " ")+"]")
	}
	for _, k := range p.ActNow {
		s.ActNow = append(s.ActNow, k.Spoke)
	}
	for _, f := range p.Failed {
		s.Failed = append(s.Failed, f.Spoke+":"+string(f.Failure))
	}
	return s
}

func canaryBy(c tugboatv1alpha1.CanaryWave, waves ...string) *tugboatv1alpha1.Rollout {
	r := &tugboatv1alpha1.Rollout{Canary: &c}
	for _, w := range waves {
		r.Waves = append(r.Waves, tugboatv1alpha1.Wave{Size: intstr.Parse(w)})
	}
	return r
}

func TestPlanner_plansWaves(t *testing.T) {
	soak := &metav1.Duration{Duration: 10 * time.Minute}
	cases := []struct {
		name string
		in   rollout.Input
		want summary
	}{
		{
			name: "without a rollout, one wave with every target, as before",
			in:   rollout.Input{Targets: fleet("b", "a", "c")},
			want: summary{Waves: []string{"all=[a b c]"}, ActNow: []string{"a", "b", "c"}},
		},
		{
			name: "a rollout without canary and waves is one wave too, under its budget",
			in:   rollout.Input{Rollout: &tugboatv1alpha1.Rollout{MaxFailures: ptr.To(intstr.FromInt32(1))}, Targets: fleet("b", "a")},
			want: summary{Waves: []string{"all=[a b]"}, ActNow: []string{"a", "b"}, Allowed: 1},
		},
		{
			name: "canary by spoke name, then the rest in order",
			in:   rollout.Input{Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Spokes: []string{"c", "nowhere"}}), Targets: fleet("d", "c", "b", "a")},
			want: summary{Waves: []string{"canary=[c]", "final=[a b d]"}, ActNow: []string{"c"}},
		},
		{
			name: "canary by label",
			in: rollout.Input{
				Rollout: canaryBy(tugboatv1alpha1.CanaryWave{SpokeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}}),
				Targets: labeled(fleet("a", "b", "c", "d"), map[string]string{"ring": "canary"}, "b", "d"),
			},
			want: summary{Waves: []string{"canary=[b d]", "final=[a c]"}, ActNow: []string{"b", "d"}},
		},
		{
			name: "canary by count takes the first targets by spoke name",
			in:   rollout.Input{Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](2)}), Targets: fleet("d", "c", "b", "a")},
			want: summary{Waves: []string{"canary=[a b]", "final=[c d]"}, ActNow: []string{"a", "b"}},
		},
		{
			// 25% of 10 is 2.5: rounded up to 3 (as a Deployment's maxSurge).
			name: "percentages round up",
			in:   rollout.Input{Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}, "25%", "25%"), Targets: numbered(10)},
			want: summary{
				Waves:  []string{"canary=[s01]", "wave-1=[s02 s03 s04]", "wave-2=[s05 s06 s07]", "final=[s08 s09 s10]"},
				ActNow: []string{"s01"},
			},
		},
		{
			// 1% of 3 is 0.03: still one target, never an empty wave while
			// targets are left; a wave with none left is empty.
			name: "a small percentage of a small environment takes one target",
			in:   rollout.Input{Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}, "1%", "1%", "1%"), Targets: numbered(3)},
			want: summary{Waves: []string{"canary=[s01]", "wave-1=[s02]", "wave-2=[s03]", "wave-3=[]", "final=[]"}, ActNow: []string{"s01"}},
		},
		{
			name: "waves by count; the final wave takes what is left",
			in:   rollout.Input{Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}, "2", "100"), Targets: numbered(5)},
			want: summary{Waves: []string{"canary=[s01]", "wave-1=[s02 s03]", "wave-2=[s04 s05]", "final=[]"}, ActNow: []string{"s01"}},
		},
		{
			name: "the canary qualified: the next wave is current in the same plan",
			in: rollout.Input{
				Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}, "2"),
				Targets: acted(numbered(4), "s01", 0, healthy(7)),
				Now:     t0.Add(2 * time.Minute),
			},
			want: summary{
				Waves:   []string{"canary=[s01]", "wave-1=[s02 s03]", "final=[s04]"},
				States:  []string{"s01:Succeeded"},
				Current: 1, ActNow: []string{"s02", "s03"},
			},
		},
		{
			name: "a wave waits for its soak",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}, SoakTime: soak},
				Targets: acted(numbered(3), "s01", 0, healthy(7)),
				Now:     t0.Add(5 * time.Minute),
			},
			want: summary{Waves: []string{"canary=[s01]", "final=[s02 s03]"}, States: []string{"s01:InProgress"}},
		},
		{
			name: "the wave soaked",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}, SoakTime: soak},
				Targets: acted(numbered(3), "s01", 0, healthy(7)),
				Now:     t0.Add(11 * time.Minute),
			},
			want: summary{Waves: []string{"canary=[s01]", "final=[s02 s03]"}, States: []string{"s01:Succeeded"}, Current: 1, ActNow: []string{"s02", "s03"}},
		},
		{
			// The action produced revision 7; revision 6 also ran 1.4.0
			// (an earlier attempt), deployed and Current.
			name: "a stale report of an older revision never qualifies",
			in: rollout.Input{
				Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}),
				Targets: acted(numbered(2), "s01", 0, &rollout.Report{
					Rev: rev(6), Version: version, Status: tugboatv1alpha1.ReleaseStatusDeployed, Health: tugboatv1alpha1.HealthCurrent, HealthySince: t0.Add(-time.Hour),
				}),
				Now: t0.Add(time.Minute),
			},
			want: summary{Waves: []string{"canary=[s01]", "final=[s02]"}, States: []string{"s01:InProgress"}},
		},
		{
			// The agent's outcome (which names the revision its upgrade
			// made) is not in yet; revision 7 of the promoted version,
			// healthy, may be someone else's upgrade.
			name: "a newer revision does not qualify while the agent's outcome is awaited",
			in: rollout.Input{
				Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}),
				Targets: awaited(acted(numbered(2), "s01", 0, healthy(7)), "s01"),
				Now:     t0.Add(2 * time.Minute),
			},
			want: summary{Waves: []string{"canary=[s01]", "final=[s02]"}, States: []string{"s01:InProgress"}},
		},
		{
			name: "a newer failed revision fails nothing while the agent's outcome is awaited",
			in: rollout.Input{
				Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}),
				Targets: awaited(acted(numbered(2), "s01", 0, report(7, version, tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthFailed)), "s01"),
				Now:     t0.Add(time.Minute),
			},
			want: summary{Waves: []string{"canary=[s01]", "final=[s02]"}, States: []string{"s01:InProgress"}},
		},
		{
			// A strategy that cannot say which revision it made (Flux,
			// pull request): a newer revision is the action's.
			name: "without an awaited outcome a newer revision of the version qualifies",
			in: rollout.Input{
				Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}),
				Targets: unknownProduced(acted(numbered(2), "s01", 0, healthy(7)), "s01"),
				Now:     t0.Add(2 * time.Minute),
			},
			want: summary{Waves: []string{"canary=[s01]", "final=[s02]"}, States: []string{"s01:Succeeded"}, Current: 1, ActNow: []string{"s02"}},
		},
		{
			name: "a stale report of an older, failed revision fails nothing",
			in: rollout.Input{
				Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}),
				Targets: acted(numbered(2), "s01", 0, report(6, "1.3.9", tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthFailed)),
				Now:     t0.Add(time.Minute),
			},
			want: summary{Waves: []string{"canary=[s01]", "final=[s02]"}, States: []string{"s01:InProgress"}},
		},
		{
			name: "the produced revision failing on the canary spends the budget, whatever maxFailures says",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}, MaxFailures: ptr.To(intstr.FromString("50%"))},
				Targets: acted(numbered(4), "s01", 0, report(7, version, tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthUnknown)),
				Now:     t0.Add(time.Minute),
			},
			want: summary{
				Waves: []string{"canary=[s01]", "final=[s02 s03 s04]"}, States: []string{"s01:Failed"},
				Allowed: 2, Used: 1, Spent: true, Failed: []string{"s01:ReleaseFailed"},
			},
		},
		{
			name: "a resume accepts the canary's failure: the next wave is acted on",
			in: rollout.Input{
				Rollout:          &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}},
				Targets:          acted(numbered(3), "s01", 0, report(7, version, tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthUnknown)),
				AcceptedFailures: 1,
				Now:              t0.Add(time.Minute),
			},
			want: summary{
				Waves: []string{"canary=[s01]", "final=[s02 s03]"}, States: []string{"s01:Failed"},
				Current: 1, ActNow: []string{"s02", "s03"}, Used: 1, Failed: []string{"s01:ReleaseFailed"},
			},
		},
		{
			name: "a resume does not refill the budget: one failure more than accepted spends it",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}, MaxFailures: ptr.To(intstr.FromInt32(1))},
				Targets: acted(acted(numbered(3), "s01", 0, report(7, version, tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthUnknown)),
					"s02", 1, report(7, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed)),
				AcceptedFailures: 1,
				CompletedWaves:   1,
				Now:              t0.Add(time.Minute),
			},
			want: summary{
				Waves: []string{"canary=[s01]", "final=[s02 s03]"}, States: []string{"s01:Failed", "s02:Failed"},
				Current: 1, Allowed: 1, Used: 2, Spent: true, Failed: []string{"s01:ReleaseFailed", "s02:HealthFailed"},
			},
		},
		{
			name: "failures accepted within the budget change nothing",
			in: rollout.Input{
				Rollout:          &tugboatv1alpha1.Rollout{Waves: []tugboatv1alpha1.Wave{{Size: intstr.FromInt32(2)}}, MaxFailures: ptr.To(intstr.FromInt32(1))},
				Targets:          acted(acted(numbered(4), "s01", 0, healthy(7)), "s02", 0, report(7, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed)),
				AcceptedFailures: 1,
				Now:              t0.Add(2 * time.Minute),
			},
			want: summary{
				Waves: []string{"wave-1=[s01 s02]", "final=[s03 s04]"}, States: []string{"s01:Succeeded", "s02:Failed"},
				Current: 1, ActNow: []string{"s03", "s04"}, Allowed: 1, Used: 1, Failed: []string{"s02:HealthFailed"},
			},
		},
		{
			name: "a failed target within the budget: its wave qualifies without it",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Waves: []tugboatv1alpha1.Wave{{Size: intstr.FromInt32(2)}}, MaxFailures: ptr.To(intstr.FromInt32(1))},
				Targets: acted(acted(numbered(4), "s01", 0, healthy(7)), "s02", 0, report(7, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed)),
				Now:     t0.Add(2 * time.Minute),
			},
			want: summary{
				Waves: []string{"wave-1=[s01 s02]", "final=[s03 s04]"}, States: []string{"s01:Succeeded", "s02:Failed"},
				Current: 1, ActNow: []string{"s03", "s04"}, Allowed: 1, Used: 1, Failed: []string{"s02:HealthFailed"},
			},
		},
		{
			name: "one failure more than the count budget spends it: nothing more is acted on",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Waves: []tugboatv1alpha1.Wave{{Size: intstr.FromInt32(2)}}, MaxFailures: ptr.To(intstr.FromInt32(1))},
				Targets: acted(acted(numbered(4), "s01", 0, report(7, version, tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthUnknown)),
					"s02", 0, report(7, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed)),
				Now: t0.Add(2 * time.Minute),
			},
			want: summary{
				Waves: []string{"wave-1=[s01 s02]", "final=[s03 s04]"}, States: []string{"s01:Failed", "s02:Failed"},
				Allowed: 1, Used: 2, Spent: true, Failed: []string{"s01:ReleaseFailed", "s02:HealthFailed"},
			},
		},
		{
			// 10% of 25 is 2.5: rounded down to 2; a third failure spends it.
			name: "a percentage budget rounds down",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Waves: []tugboatv1alpha1.Wave{{Size: intstr.FromInt32(3)}}, MaxFailures: ptr.To(intstr.FromString("10%"))},
				Targets: func() []rollout.Target {
					ts := numbered(25)
					for _, s := range []string{"s01", "s02", "s03"} {
						ts = acted(ts, s, 0, report(7, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed))
					}
					return ts
				}(),
				Now: t0.Add(time.Minute),
			},
			want: summary{
				Waves:   []string{"wave-1=[s01 s02 s03]", "final=[s04 s05 s06 s07 s08 s09 s10 s11 s12 s13 s14 s15 s16 s17 s18 s19 s20 s21 s22 s23 s24 s25]"},
				States:  []string{"s01:Failed", "s02:Failed", "s03:Failed"},
				Allowed: 2, Used: 3, Spent: true, Failed: []string{"s01:HealthFailed", "s02:HealthFailed", "s03:HealthFailed"},
			},
		},
		{
			name: "a percentage budget not yet spent",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Waves: []tugboatv1alpha1.Wave{{Size: intstr.FromInt32(3)}}, MaxFailures: ptr.To(intstr.FromString("10%"))},
				Targets: acted(acted(acted(numbered(25), "s01", 0, healthy(7)),
					"s02", 0, report(7, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed)),
					"s03", 0, report(7, version, tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthUnknown)),
				Now: t0.Add(2 * time.Minute),
			},
			want: summary{
				Waves:   []string{"wave-1=[s01 s02 s03]", "final=[s04 s05 s06 s07 s08 s09 s10 s11 s12 s13 s14 s15 s16 s17 s18 s19 s20 s21 s22 s23 s24 s25]"},
				States:  []string{"s01:Succeeded", "s02:Failed", "s03:Failed"},
				Current: 1, Allowed: 2, Used: 2, Failed: []string{"s02:HealthFailed", "s03:ReleaseFailed"},
				ActNow: []string{"s04", "s05", "s06", "s07", "s08", "s09", "s10", "s11", "s12", "s13", "s14", "s15", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "s24", "s25"},
			},
		},
		{
			name: "a target still in progress at its progress deadline fails",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}, ProgressDeadline: &metav1.Duration{Duration: 10 * time.Minute}},
				Targets: acted(numbered(2), "s01", 0, report(7, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthInProgress)),
				Now:     t0.Add(10 * time.Minute),
			},
			want: summary{
				Waves: []string{"canary=[s01]", "final=[s02]"}, States: []string{"s01:Failed"},
				Used: 1, Spent: true, Failed: []string{"s01:ProgressDeadlineExceeded"},
			},
		},
		{
			name: "a target that never reported the produced revision fails at its deadline",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}},
				Targets: acted(numbered(2), "s01", 0, healthy(6)),
				Now:     t0.Add(10 * time.Minute), // the default deadline
			},
			want: summary{
				Waves: []string{"canary=[s01]", "final=[s02]"}, States: []string{"s01:Failed"},
				Used: 1, Spent: true, Failed: []string{"s01:ProgressDeadlineExceeded"},
			},
		},
		{
			name: "a failed action fails the target",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}},
				Targets: func() []rollout.Target {
					ts := acted(numbered(2), "s01", 0, healthy(6))
					ts[0].Action.Failed, ts[0].Action.Produced, ts[0].Action.Message = true, nil, "refused: namespace apps is not allowed"
					return ts
				}(),
				Now: t0.Add(time.Minute),
			},
			want: summary{
				Waves: []string{"canary=[s01]", "final=[s02]"}, States: []string{"s01:Failed"},
				Used: 1, Spent: true, Failed: []string{"s01:ActionFailed"},
			},
		},
		{
			// The canary (b, by label) is done; a spoke labeled canary
			// joins: it is not acted on in a done wave but in the current
			// one, as is a spoke that sorts first.
			name: "targets that join mid-rollout land in the current wave",
			in: rollout.Input{
				Rollout: canaryBy(tugboatv1alpha1.CanaryWave{SpokeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}}),
				Targets: acted(acted(labeled(fleet("a", "b", "c", "d", "0-new", "e-new"), map[string]string{"ring": "canary"}, "b", "e-new"),
					"b", 0, healthy(7)), "c", 1, report(7, version, tugboatv1alpha1.ReleaseStatusPendingUpgrade, tugboatv1alpha1.HealthUnknown)),
				CompletedWaves: 1,
				Now:            t0.Add(time.Minute),
			},
			want: summary{
				Waves: []string{"canary=[b]", "final=[0-new a c d e-new]"}, States: []string{"b:Succeeded", "c:InProgress"},
				Current: 1, ActNow: []string{"0-new", "a", "d", "e-new"},
			},
		},
		{
			// The wave of 2 already holds two acted targets: a joiner
			// waits for the next wave.
			name: "a target that joins a full wave waits for the next",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Waves: []tugboatv1alpha1.Wave{{Size: intstr.FromInt32(2)}}},
				Targets: acted(acted(fleet("b", "c", "a-new", "d"), "b", 0, healthy(7)), "c", 0, report(7, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthInProgress)),
				Now:     t0.Add(time.Minute),
			},
			want: summary{Waves: []string{"wave-1=[b c]", "final=[a-new d]"}, States: []string{"b:Succeeded", "c:InProgress"}},
		},
		{
			name: "a failed target spends a budget of 0",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Waves: []tugboatv1alpha1.Wave{{Size: intstr.FromInt32(2)}}},
				Targets: acted(acted(numbered(4), "s01", 0, healthy(7)), "s02", 0, report(7, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed)),
				Now:     t0.Add(2 * time.Minute),
			},
			want: summary{
				Waves: []string{"wave-1=[s01 s02]", "final=[s03 s04]"}, States: []string{"s01:Succeeded", "s02:Failed"},
				Used: 1, Spent: true, Failed: []string{"s02:HealthFailed"},
			},
		},
		{
			// The same, after s02 left the environment: its failure no
			// longer counts, and its place in the wave goes to the next
			// target.
			name: "a target that leaves mid-rollout no longer counts",
			in: rollout.Input{
				Rollout: &tugboatv1alpha1.Rollout{Waves: []tugboatv1alpha1.Wave{{Size: intstr.FromInt32(2)}}},
				Targets: func() []rollout.Target {
					ts := acted(acted(numbered(4), "s01", 0, healthy(7)), "s02", 0, report(7, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed))
					return append(ts[:1], ts[2:]...)
				}(),
				Now: t0.Add(2 * time.Minute),
			},
			want: summary{Waves: []string{"wave-1=[s01 s03]", "final=[s04]"}, States: []string{"s01:Succeeded"}, ActNow: []string{"s03"}},
		},
		{
			// A done wave is never judged on its deadline again: a target
			// that flaps to InProgress does not fail; one whose revision
			// turns Failed does.
			name: "in a done wave only a failed revision counts",
			in: rollout.Input{
				Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](2)}),
				Targets: acted(acted(numbered(3), "s01", 0, report(7, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthInProgress)),
					"s02", 0, report(7, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed)),
				CompletedWaves: 1,
				Now:            t0.Add(time.Hour),
			},
			want: summary{
				Waves: []string{"canary=[s01 s02]", "final=[s03]"}, States: []string{"s01:InProgress", "s02:Failed"},
				Current: 1, Used: 1, Spent: true, Failed: []string{"s02:HealthFailed"},
			},
		},
		{
			// Without a produced revision (e.g. a pull request merged by
			// someone), a revision newer than the baseline is the
			// action's; the baseline itself is stale.
			name: "without a produced revision, a newer one than the baseline qualifies",
			in: rollout.Input{
				Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Spokes: []string{"s01", "s02"}}),
				Targets: func() []rollout.Target {
					ts := acted(acted(numbered(3), "s01", 0, healthy(7)), "s02", 0, healthy(6))
					ts[0].Action.Produced, ts[1].Action.Produced = nil, nil
					return ts
				}(),
				Now: t0.Add(2 * time.Minute),
			},
			want: summary{Waves: []string{"canary=[s01 s02]", "final=[s03]"}, States: []string{"s01:Succeeded", "s02:InProgress"}},
		},
		{
			name: "every wave qualified: done",
			in: rollout.Input{
				Rollout:        canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}),
				Targets:        acted(acted(numbered(2), "s01", 0, healthy(7)), "s02", 1, healthy(7)),
				CompletedWaves: 1,
				Now:            t0.Add(2 * time.Minute),
			},
			want: summary{Waves: []string{"canary=[s01]", "final=[s02]"}, States: []string{"s01:Succeeded", "s02:Succeeded"}, Current: 2, Done: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			in := tc.in
			in.Version = version
			if in.Now.IsZero() {
				in.Now = t0
			}
			plan, err := rollout.New(in)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(summarize(plan)).To(Equal(tc.want))
		})
	}
}

func TestPlanner_nextCheckIsTheEarliestSoakOrDeadline(t *testing.T) {
	g := NewWithT(t)
	r := &tugboatv1alpha1.Rollout{
		Waves:            []tugboatv1alpha1.Wave{{Size: intstr.FromInt32(2), SoakTime: &metav1.Duration{Duration: 30 * time.Minute}}},
		ProgressDeadline: &metav1.Duration{Duration: 20 * time.Minute},
	}
	// s01 soaks since t0+1m (until t0+31m); s02 is in progress until its
	// deadline at t0+20m.
	ts := acted(acted(numbered(3), "s01", 0, healthy(7)), "s02", 0, report(7, version, tugboatv1alpha1.ReleaseStatusPendingUpgrade, tugboatv1alpha1.HealthUnknown))
	plan, err := rollout.New(rollout.Input{Rollout: r, Version: version, Targets: ts, Now: t0.Add(5 * time.Minute)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plan.NextCheck).To(Equal(t0.Add(20 * time.Minute)))
	g.Expect(plan.Current).To(Equal(0))
	g.Expect(plan.ActNow).To(BeEmpty())
	g.Expect(plan.Waves[0].SoakTime).To(Equal(30 * time.Minute))
	g.Expect(plan.Waves[0].ProgressDeadline).To(Equal(20 * time.Minute))
	g.Expect(plan.Waves[0].Targets[0].Message).To(ContainSubstring("soaking until"))

	// Past the deadline, s02 failed and the budget (0) is spent; s01's
	// soak end is the next check.
	plan, err = rollout.New(rollout.Input{Rollout: r, Version: version, Targets: ts, Now: t0.Add(21 * time.Minute)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plan.Budget.Spent()).To(BeTrue())
	g.Expect(plan.Budget.Left()).To(Equal(0))
	g.Expect(plan.NextCheck).To(Equal(t0.Add(31 * time.Minute)))
}

func TestPlanner_alreadyAtTheVersion(t *testing.T) {
	// The target ran 1.4.0 (revision 6) when acted on and the action
	// changed nothing: the controller says so with Produced = Baseline.
	g := NewWithT(t)
	ts := acted(numbered(1), "s01", 0, healthy(6))
	ts[0].Action.Produced = ptr.To(rev(6))
	plan, err := rollout.New(rollout.Input{Version: version, Targets: ts, Now: t0.Add(2 * time.Minute)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plan.Done()).To(BeTrue())
}

func TestPlanner_refusesWhatItCannotPlan(t *testing.T) {
	cases := []struct {
		name string
		in   rollout.Input
		want string
	}{
		{"no target", rollout.Input{}, "no target"},
		{"a target listed twice", rollout.Input{Targets: fleet("a", "b", "a")}, "listed twice"},
		{
			"a canary that selects no target",
			rollout.Input{Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Spokes: []string{"elsewhere"}}), Targets: fleet("a", "b")},
			"the canary selects no target",
		},
		{
			"an invalid canary selector",
			rollout.Input{Rollout: canaryBy(tugboatv1alpha1.CanaryWave{SpokeSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "ring", Operator: "Near"}},
			}}), Targets: fleet("a")},
			"canary spokeSelector",
		},
		{
			"a wave size that is no percentage",
			rollout.Input{Rollout: canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](1)}, "ten"), Targets: fleet("a", "b")},
			"wave-1",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.in.Version, tc.in.Now = version, t0
			_, err := rollout.New(tc.in)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

func TestPlanner_isDeterministic(t *testing.T) {
	// The same targets in another order give the same plan.
	g := NewWithT(t)
	r := canaryBy(tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](3)}, "10%", "30%")
	a := numbered(40)
	b := make([]rollout.Target, len(a))
	for i := range a {
		b[len(a)-1-i] = a[i]
	}
	pa, err := rollout.New(rollout.Input{Rollout: r, Version: version, Targets: a, Now: t0})
	g.Expect(err).NotTo(HaveOccurred())
	pb, err := rollout.New(rollout.Input{Rollout: r, Version: version, Targets: b, Now: t0})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pb).To(Equal(pa))
	g.Expect(summarize(pa).Waves).To(HaveLen(4))
	g.Expect(pa.Waves[1].Targets).To(HaveLen(4))  // 10% of 40
	g.Expect(pa.Waves[2].Targets).To(HaveLen(12)) // 30% of 40
	g.Expect(pa.Waves[3].Targets).To(HaveLen(21))
}

func TestPlan_statusIsBoundedWhateverTheTargets(t *testing.T) {
	// 5,000 targets, a canary of 10 and 10% waves; 30 failed in wave-1
	// within a budget of 1%: the status lists 20 of them and counts all.
	g := NewWithT(t)
	r := &tugboatv1alpha1.Rollout{
		Canary:      &tugboatv1alpha1.CanaryWave{Count: ptr.To[int32](10)},
		MaxFailures: ptr.To(intstr.FromString("1%")),
	}
	for range 9 {
		r.Waves = append(r.Waves, tugboatv1alpha1.Wave{Size: intstr.FromString("10%")})
	}
	ts := numbered(5000)
	for i := range ts {
		ts[i].Spoke = fmt.Sprintf("s%04d", i+1)
	}
	for i := range 510 {
		wave, rep := 0, healthy(7)
		if i >= 10 {
			wave = 1
			if i < 40 {
				rep = report(7, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed)
				rep.Reason = strings.Repeat("x", 600)
			}
		}
		ts = acted(ts, ts[i].Spoke, wave, rep)
	}
	plan, err := rollout.New(rollout.Input{Rollout: r, Version: version, Targets: ts, CompletedWaves: 1, Now: t0.Add(2 * time.Minute)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plan.Budget.Allowed).To(Equal(50))
	g.Expect(plan.Budget.Used).To(Equal(30))
	g.Expect(plan.Current).To(Equal(2))

	waves := plan.WaveStatuses()
	g.Expect(waves).To(HaveLen(11))
	g.Expect(waves[0]).To(Equal(tugboatv1alpha1.WaveStatus{Name: "canary", Targets: 10, Succeeded: 10}))
	g.Expect(waves[1]).To(Equal(tugboatv1alpha1.WaveStatus{Name: "wave-1", Targets: 500, Succeeded: 470, Failed: 30}))
	g.Expect(waves[2]).To(Equal(tugboatv1alpha1.WaveStatus{Name: "wave-2", Targets: 500, Pending: 500}))
	g.Expect(waves[10]).To(Equal(tugboatv1alpha1.WaveStatus{Name: "final", Targets: 5000 - 10 - 9*500, Pending: 490}))
	g.Expect(plan.ActNow).To(HaveLen(500))

	failed := plan.FailedTargets()
	g.Expect(failed).To(HaveLen(tugboatv1alpha1.MaxFailedTargets))
	g.Expect(failed[0]).To(MatchFields(IgnoreExtras, Fields{
		"Spoke": Equal("s0011"), "Wave": Equal("wave-1"), "Reason": Equal(tugboatv1alpha1.TargetHealthFailed), "Revision": Equal(int32(7)),
	}))
	for _, f := range failed {
		g.Expect([]rune(f.Message)).To(HaveLen(512))
	}
}
