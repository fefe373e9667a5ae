package rollout

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Wave names.
const (
	// CanaryWave names the canary.
	CanaryWave = "canary"
	// FinalWave names the wave of every target left after the spec waves.
	FinalWave = "final"
	// AllWave names the one wave of a rollout without canary and waves (or
	// of an environment without a rollout).
	AllWave = "all"
)

// ErrNoTargets: the environment resolved to no target.
var ErrNoTargets = errors.New("the environment has no target")

// Key identifies a target: a release on a spoke.
type Key struct {
	Spoke     string
	Namespace string
	Release   string
}

func (k Key) String() string { return k.Spoke + "/" + k.Namespace + "/" + k.Release }

func compareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Spoke, b.Spoke), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Release, b.Release))
}

// Rev identifies a Helm revision: its number within an installation (a
// release's life on the spoke; see RevisionSummary.installation).
type Rev struct {
	Installation int32
	Number       int32
}

func (r Rev) life() int32 { return max(r.Installation, 1) }

// Same reports whether r and o are the same revision.
func (r Rev) Same(o Rev) bool { return r.Number == o.Number && r.life() == o.life() }

// Newer reports whether r came after o: a later installation, or a higher
// number in the same one. Every revision is newer than the zero Rev (no
// release).
func (r Rev) Newer(o Rev) bool {
	if r.life() != o.life() {
		return r.life() > o.life()
	}
	return r.Number > o.Number
}

// Report is what a target's ReleaseHistory says now.
type Report struct {
	// Rev is the release's current revision.
	Rev Rev
	// Version is its chart version.
	Version string
	// Status is its Helm status.
	Status tugboatv1alpha1.ReleaseStatus
	// Health is its health.
	Health tugboatv1alpha1.Health
	// Reason explains Health when it is not Current.
	Reason string
	// HealthySince is when Rev was first seen deployed and Current, and has
	// been since; zero when unknown (the soak then starts now).
	HealthySince time.Time
}

// Action is what this Promotion did to a target.
type Action struct {
	// Wave is the index of the wave the target was acted in.
	Wave int
	// At is when it was acted on: its progress deadline counts from here.
	At time.Time
	// Baseline is the revision the target ran when acted on (zero when it
	// had none).
	Baseline Rev
	// Produced is the revision the action produced, when the strategy
	// knows it: the agent's upgrade (helm), the revision helm-controller
	// made for the HelmRelease generation the strategy wrote (Flux). When
	// the target already ran the version and the action changed nothing,
	// the controller sets it to Baseline.
	Produced *Rev
	// Awaited is true while the strategy will still say which revision its
	// action produced (an agent action not reported yet): until then no
	// revision counts as the action's, however new, since one a person or
	// another tool made meanwhile would pass for it.
	Awaited bool
	// Failed is true when the action failed or was refused; Message says why.
	Failed  bool
	Message string
}

// Target is one resolved target of the environment.
type Target struct {
	Key
	// Labels are the Spoke's labels, for a canary spokeSelector.
	Labels map[string]string
	// Report is nil until the target's release is reported.
	Report *Report
	// Action is nil while this Promotion has not acted on the target.
	Action *Action
}

// Input is everything the planner reads.
type Input struct {
	// Rollout is the environment's rollout as resolved when the Promotion
	// started; nil for one wave with every target.
	Rollout *tugboatv1alpha1.Rollout
	// Version is the promoted chart version.
	Version string
	// Targets are the environment's targets now, in any order.
	Targets []Target
	// CompletedWaves is how many waves the controller already recorded as
	// done (status.rollout.currentWave).
	CompletedWaves int
	// AcceptedFailures is how many failing targets a person accepted by
	// resuming the rollout (status.rollout.acceptedFailures): see Budget.
	AcceptedFailures int
	// Now is the time of the plan.
	Now time.Time
}

// State is where a target stands in the rollout.
type State string

// Target states.
const (
	// Pending: not acted on yet.
	Pending State = "Pending"
	// InProgress: acted on; neither qualified nor failed.
	InProgress State = "InProgress"
	// Succeeded: qualified.
	Succeeded State = "Succeeded"
	// Failed: counts against the failure budget.
	Failed State = "Failed"
)

// TargetPlan is where one target stands.
type TargetPlan struct {
	Key
	// Wave is the index of the target's wave.
	Wave int
	// State is where it stands.
	State State
	// Failure says why it failed (State Failed).
	Failure tugboatv1alpha1.TargetFailure
	// Message says what it waits for, or why it failed.
	Message string
	// Rev is the revision it reports (zero when none).
	Rev Rev
}

// Wave is one wave of the plan.
type Wave struct {
	// Name is canary, wave-<n>, final or all.
	Name string
	// Targets are the wave's targets, in rollout order.
	Targets []TargetPlan
	// SoakTime and ProgressDeadline are the wave's (0: no deadline).
	SoakTime         time.Duration
	ProgressDeadline time.Duration
	// Counts by state.
	Pending, InProgress, Succeeded, Failed int
	// Qualified is true when every target qualified or failed, and the
	// budget was not spent; always true for a wave the controller recorded
	// as done.
	Qualified bool
}

// Budget is the failure budget.
type Budget struct {
	// Allowed is how many targets may fail.
	Allowed int
	// Used is how many fail now.
	Used int
	// CanaryFailed is true when a canary target fails.
	CanaryFailed bool
	// Accepted is how many failing targets a person accepted by resuming
	// the rollout: a resume does not refill the budget, it accepts the
	// failures it saw.
	Accepted int
}

// Left is how many more targets may fail before the budget is spent (0
// once spent).
func (b Budget) Left() int { return max(max(b.Allowed, b.Accepted)-b.Used, 0) }

// Spent reports whether the rollout must stop: more targets fail than
// allowed or accepted, whichever is more, or a canary target fails beyond
// the failures accepted.
func (b Budget) Spent() bool {
	return b.CanaryFailed && b.Used > b.Accepted || b.Used > max(b.Allowed, b.Accepted)
}

// Plan is the planner's answer.
type Plan struct {
	// Waves in order.
	Waves []Wave
	// Current is the index of the wave being rolled out: the first wave, at
	// or after Input.CompletedWaves, that has not qualified; len(Waves)
	// once every wave qualified.
	Current int
	// ActNow are the current wave's targets not acted on yet, in rollout
	// order; none when the budget is spent.
	ActNow []Key
	// Budget is the failure budget.
	Budget Budget
	// Failed are the failing targets of every wave, in wave then rollout
	// order (the controller keeps the first MaxFailedTargets in status).
	Failed []TargetPlan
	// NextCheck is the earliest time at which the plan changes without a
	// new report (a soak ends, a deadline passes); zero when none.
	NextCheck time.Time
}

// Done reports whether every wave qualified.
func (p *Plan) Done() bool { return p.Current >= len(p.Waves) }

// waveSpec is one wave as the rollout describes it.
type waveSpec struct {
	name     string
	canary   *tugboatv1alpha1.CanaryWave
	size     *intstr.IntOrString // nil: every target left
	soak     time.Duration
	deadline time.Duration
}

func duration(ds ...*metav1.Duration) time.Duration {
	for _, d := range ds {
		if d != nil {
			return d.Duration
		}
	}
	return 0
}

// specs lists r's waves; one wave without a deadline when r is nil.
func specs(r *tugboatv1alpha1.Rollout) ([]waveSpec, error) {
	if r == nil {
		return []waveSpec{{name: AllWave}}, nil
	}
	deflt, err := time.ParseDuration(tugboatv1alpha1.DefaultProgressDeadline)
	if err != nil {
		return nil, err
	}
	deadline := func(d *metav1.Duration) time.Duration {
		if dl := duration(d, r.ProgressDeadline); dl > 0 {
			return dl
		}
		return deflt
	}
	var out []waveSpec
	if c := r.Canary; c != nil {
		if c.SpokeSelector != nil {
			if _, err := metav1.LabelSelectorAsSelector(c.SpokeSelector); err != nil {
				return nil, fmt.Errorf("canary spokeSelector: %w", err)
			}
		}
		out = append(out, waveSpec{name: CanaryWave, canary: c, soak: duration(c.SoakTime, r.SoakTime), deadline: deadline(c.ProgressDeadline)})
	}
	for i := range r.Waves {
		w := &r.Waves[i]
		out = append(out, waveSpec{name: fmt.Sprintf("wave-%d", i+1), size: &w.Size, soak: duration(w.SoakTime, r.SoakTime), deadline: deadline(w.ProgressDeadline)})
	}
	name := FinalWave
	if len(out) == 0 {
		name = AllWave
	}
	return append(out, waveSpec{name: name, soak: duration(r.SoakTime), deadline: deadline(nil)}), nil
}

// Allowed resolves maxFailures over n targets: a count as is, a percentage
// rounded down (a budget never tolerates more than it says). nil is 0.
func Allowed(maxFailures *intstr.IntOrString, n int) (int, error) {
	if maxFailures == nil {
		return 0, nil
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(maxFailures, n, false)
	if err != nil {
		return 0, fmt.Errorf("maxFailures: %w", err)
	}
	return max(v, 0), nil
}

// Size resolves a wave's size over n targets: a count as is, a percentage
// rounded up (as a Deployment's maxSurge), so that a wave of a few percent
// of a small environment still takes one target.
func Size(size intstr.IntOrString, n int) (int, error) {
	v, err := intstr.GetScaledValueFromIntOrPercent(&size, n, true)
	if err != nil {
		return 0, fmt.Errorf("wave size: %w", err)
	}
	return max(v, 0), nil
}

// New plans the rollout of in.Version into in.Targets.
func New(in Input) (*Plan, error) {
	if len(in.Targets) == 0 {
		return nil, ErrNoTargets
	}
	waves, err := specs(in.Rollout)
	if err != nil {
		return nil, err
	}
	targets := slices.Clone(in.Targets)
	slices.SortFunc(targets, func(a, b Target) int { return compareKeys(a.Key, b.Key) })
	for i := 1; i < len(targets); i++ {
		if targets[i].Key == targets[i-1].Key {
			return nil, fmt.Errorf("target %s is listed twice", targets[i].Key)
		}
	}
	n := len(targets)
	budget := Budget{Accepted: max(in.AcceptedFailures, 0)}
	if in.Rollout != nil {
		if budget.Allowed, err = Allowed(in.Rollout.MaxFailures, n); err != nil {
			return nil, err
		}
	}

	// Members: the targets acted in a wave stay there; the others are
	// dealt, in order, to the waves not done yet.
	members := make([][]*Target, len(waves))
	var free []*Target
	for i := range targets {
		t := &targets[i]
		if t.Action == nil {
			free = append(free, t)
			continue
		}
		w := min(max(t.Action.Wave, 0), len(waves)-1)
		members[w] = append(members[w], t)
	}
	for w := range waves {
		if w < in.CompletedWaves {
			continue
		}
		var take func(t *Target) bool
		switch spec := waves[w]; {
		case spec.canary != nil && spec.canary.Count != nil:
			room := int(*spec.canary.Count) - len(members[w])
			take = func(*Target) bool { room--; return room >= 0 }
		case spec.canary != nil && len(spec.canary.Spokes) > 0:
			take = func(t *Target) bool { return slices.Contains(spec.canary.Spokes, t.Spoke) }
		case spec.canary != nil:
			sel, _ := metav1.LabelSelectorAsSelector(spec.canary.SpokeSelector) // checked in specs
			take = func(t *Target) bool { return sel.Matches(labels.Set(t.Labels)) }
		case spec.size != nil:
			size, err := Size(*spec.size, n)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", spec.name, err)
			}
			room := size - len(members[w])
			take = func(*Target) bool { room--; return room >= 0 }
		default:
			take = func(*Target) bool { return true }
		}
		rest := free[:0:0]
		for _, t := range free {
			if take(t) {
				members[w] = append(members[w], t)
			} else {
				rest = append(rest, t)
			}
		}
		free = rest
	}

	plan := &Plan{Waves: make([]Wave, len(waves))}
	next := func(at time.Time) {
		if at.After(in.Now) && (plan.NextCheck.IsZero() || at.Before(plan.NextCheck)) {
			plan.NextCheck = at
		}
	}
	for w, spec := range waves {
		wave := &plan.Waves[w]
		wave.Name, wave.SoakTime, wave.ProgressDeadline = spec.name, spec.soak, spec.deadline
		slices.SortFunc(members[w], func(a, b *Target) int { return compareKeys(a.Key, b.Key) })
		done := w < in.CompletedWaves
		for _, t := range members[w] {
			tp := judge(t, in, spec, done, next)
			tp.Wave = w
			wave.Targets = append(wave.Targets, tp)
			switch tp.State {
			case Pending:
				wave.Pending++
			case InProgress:
				wave.InProgress++
			case Succeeded:
				wave.Succeeded++
			case Failed:
				wave.Failed++
				budget.Used++
				budget.CanaryFailed = budget.CanaryFailed || spec.canary != nil
				plan.Failed = append(plan.Failed, tp)
			}
		}
	}
	plan.Budget = budget

	plan.Current = min(in.CompletedWaves, len(waves))
	for w := range plan.Waves {
		wave := &plan.Waves[w]
		switch {
		case w < in.CompletedWaves:
			wave.Qualified = true
		case budget.Spent():
		case wave.Pending == 0 && wave.InProgress == 0:
			if w == 0 && waves[w].canary != nil && len(wave.Targets) == 0 {
				return nil, errors.New("the canary selects no target of the environment")
			}
			wave.Qualified = w == plan.Current
		}
		if wave.Qualified && w == plan.Current {
			plan.Current++
		}
	}
	if !budget.Spent() && !plan.Done() {
		for _, tp := range plan.Waves[plan.Current].Targets {
			if tp.State == Pending {
				plan.ActNow = append(plan.ActNow, tp.Key)
			}
		}
	}
	return plan, nil
}

// judge says where target t stands, in a wave described by spec that the
// controller recorded as done (done) or not; next is told when the answer
// will change by itself (a soak ends, a deadline passes).
func judge(t *Target, in Input, spec waveSpec, done bool, next func(time.Time)) TargetPlan {
	tp := TargetPlan{Key: t.Key, State: InProgress}
	if t.Report != nil {
		tp.Rev = t.Report.Rev
	}
	a := t.Action
	if a == nil {
		tp.State, tp.Message = Pending, "not acted on yet"
		return tp
	}
	if a.Failed {
		tp.State, tp.Failure, tp.Message = Failed, tugboatv1alpha1.TargetActionFailed, a.Message
		return tp
	}
	r := t.Report
	ours := r != nil && (a.Produced != nil && r.Rev.Same(*a.Produced) || a.Produced == nil && !a.Awaited && r.Rev.Newer(a.Baseline))
	switch {
	case ours && r.Status == tugboatv1alpha1.ReleaseStatusFailed:
		tp.State, tp.Failure, tp.Message = Failed, tugboatv1alpha1.TargetReleaseFailed, fmt.Sprintf("revision %d failed", r.Rev.Number)
		return tp
	case ours && r.Health == tugboatv1alpha1.HealthFailed:
		tp.State, tp.Failure, tp.Message = Failed, tugboatv1alpha1.TargetHealthFailed, cmp.Or(r.Reason, fmt.Sprintf("revision %d is Failed", r.Rev.Number))
		return tp
	case ours && r.Version == in.Version && r.Status == tugboatv1alpha1.ReleaseStatusDeployed && r.Health == tugboatv1alpha1.HealthCurrent:
		if done {
			tp.State = Succeeded
			return tp
		}
		since := r.HealthySince
		if since.IsZero() {
			since = in.Now
		}
		if soaked := since.Add(spec.soak); in.Now.Before(soaked) {
			next(soaked)
			tp.Message = fmt.Sprintf("soaking until %s", soaked.UTC().Format(time.RFC3339))
			return tp
		}
		tp.State = Succeeded
		return tp
	}
	switch {
	case r == nil:
		tp.Message = "no report yet"
	case a.Produced == nil && a.Awaited:
		tp.Message = fmt.Sprintf("waiting for the agent to report the revision its action produced; reports revision %d (%s)", r.Rev.Number, r.Version)
	case !ours:
		tp.Message = fmt.Sprintf("waiting for the revision the promotion produced; reports revision %d (%s)", r.Rev.Number, r.Version)
	case r.Version != in.Version:
		tp.Message = fmt.Sprintf("revision %d runs %s, not %s", r.Rev.Number, r.Version, in.Version)
	default:
		tp.Message = fmt.Sprintf("revision %d is %s, %s", r.Rev.Number, r.Status, r.Health)
	}
	if done || spec.deadline <= 0 {
		return tp
	}
	deadline := a.At.Add(spec.deadline)
	if !in.Now.Before(deadline) {
		tp.State, tp.Failure = Failed, tugboatv1alpha1.TargetProgressDeadlineExceeded
		tp.Message = fmt.Sprintf("not deployed and Current within %s: %s", spec.deadline, tp.Message)
		return tp
	}
	next(deadline)
	return tp
}

// WaveStatuses returns the plan's per-wave counts as status.rollout.waves
// holds them (without times: the controller keeps startedAt and
// completedAt from the status it read).
func (p *Plan) WaveStatuses() []tugboatv1alpha1.WaveStatus {
	out := make([]tugboatv1alpha1.WaveStatus, len(p.Waves))
	for i, w := range p.Waves {
		out[i] = tugboatv1alpha1.WaveStatus{
			Name: w.Name, Targets: count32(len(w.Targets)),
			Pending: count32(w.Pending), InProgress: count32(w.InProgress), Succeeded: count32(w.Succeeded), Failed: count32(w.Failed),
		}
	}
	return out
}

// count32 converts a count for the API, which stores int32.
func count32(n int) int32 { return int32(min(max(n, 0), math.MaxInt32)) }

// FailedTargets returns the first MaxFailedTargets failing targets as
// status.rollout.failedTargets holds them, messages cut to the schema's
// limit (without since: the controller keeps it from the status it read).
func (p *Plan) FailedTargets() []tugboatv1alpha1.FailedTarget {
	var out []tugboatv1alpha1.FailedTarget
	for _, f := range p.Failed[:min(len(p.Failed), tugboatv1alpha1.MaxFailedTargets)] {
		msg := f.Message
		if r := []rune(msg); len(r) > 512 {
			msg = string(r[:511]) + "…"
		}
		out = append(out, tugboatv1alpha1.FailedTarget{
			Spoke: f.Spoke, Namespace: f.Namespace, Release: f.Release, Wave: p.Waves[f.Wave].Name,
			Reason: f.Failure, Revision: f.Rev.Number, Message: msg,
		})
	}
	return out
}
