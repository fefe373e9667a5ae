package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The types of this file describe fleet rollouts (waves): how a Promotion
// reaches an environment's targets (Rollout, on an Environment) and where a
// rollout stands (RolloutStatus, in a Promotion's status). The wave planner
// (controllers/promotion/rollout) reads them; docs/design/promotion-lifecycle.md
// is the design.

// Limits of rollouts. The CRD schema repeats them as markers.
const (
	// MaxWaves is the most waves a rollout can list after its canary.
	MaxWaves = 20

	// MaxCanarySpokes is the most spokes a canary can name.
	MaxCanarySpokes = 50

	// MaxFailedTargets is the most failing targets a Promotion's
	// status.rollout.failedTargets lists; status.rollout.failed counts them
	// all.
	MaxFailedTargets = 20

	// DefaultProgressDeadline is how long a wave's targets have to report the
	// promoted version healthy when neither the wave nor the rollout says.
	DefaultProgressDeadline = "10m"
)

// RolloutFailureAction is what tugboat does when a rollout fails: its
// failure budget is spent (or, with lifecycle steps, a post step fails).
// +kubebuilder:validation:Enum=Pause;Rollback
type RolloutFailureAction string

const (
	// RolloutPause stops the rollout: no further target is acted on, and
	// the Promotion waits for a person (`tugboat rollout resume|abort`).
	RolloutPause RolloutFailureAction = "Pause"
	// RolloutRollback stops the rollout and returns every target the
	// Promotion changed to the revision it ran before; the environment is
	// then held with reason RolloutFailed.
	RolloutRollback RolloutFailureAction = "Rollback"
)

// Rollout says how a Promotion reaches an environment's targets: in waves,
// canary first, under one failure budget. The waves are, in order: the
// canary (if set), then each entry of waves, then one last wave with every
// target left. Within and across waves, targets are taken in a stable order:
// by spoke name, then namespace, then release. A wave starts once the one
// before it qualified: each of its targets reports the promoted version
// deployed and Current, as the revision this Promotion's action produced,
// for the wave's soak time (targets that failed within the budget excepted).
// Without a rollout, an environment is promoted as one wave with every
// target, and the Pipeline's timeout bounds it.
type Rollout struct {
	// canary is the first wave: a few targets chosen by spoke name, by label
	// or by count. The canary tolerates no failure: one failed canary target
	// spends the failure budget, whatever maxFailures says (as OCM's
	// mandatory decision groups).
	// +optional
	Canary *CanaryWave `json:"canary,omitempty"`

	// waves follow the canary, in order; each takes a count or a percentage
	// of the environment's targets from those left. The targets left after
	// the last one form a final wave. Without waves, every target after the
	// canary is one wave.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Waves []Wave `json:"waves,omitempty"`

	// soakTime is how long each wave's targets must stay healthy, on the
	// revision the Promotion produced, before the next wave starts; a wave
	// may set its own. Defaults to 0 (the next wave starts as soon as the
	// wave is healthy).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="soakTime must not be negative"
	SoakTime *metav1.Duration `json:"soakTime,omitempty"`

	// progressDeadline is how long a target has, from its action, to report
	// the promoted version deployed and Current; a target that has not by
	// then counts as failed. A wave may set its own. Defaults to 10m. With a
	// rollout, the Pipeline's timeout no longer bounds the whole Promotion
	// (soaks may take hours): the progress deadlines bound each wave.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="progressDeadline must be positive"
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`

	// maxFailures is the failure budget of the whole rollout: how many
	// targets may fail (Helm status failed, health Failed, or not healthy
	// within the progress deadline) before the rollout stops, as a count
	// (e.g. 2) or a percentage of the environment's targets (e.g. "5%",
	// rounded down: a budget never tolerates more than it says). The budget
	// is spent when more targets failed than it allows. Defaults to 0: the
	// first failure stops the rollout.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="maxFailures must be a count of at least 0 or a percentage from 0% to 100%"
	MaxFailures *intstr.IntOrString `json:"maxFailures,omitempty"`

	// onFailure is what happens when the failure budget is spent: Pause
	// (stop, and wait for a person to resume or abort) or Rollback (stop,
	// and return every target this Promotion changed to the revision it ran
	// before). Defaults to Pause.
	// +optional
	// +kubebuilder:default=Pause
	OnFailure RolloutFailureAction `json:"onFailure,omitempty"`
}

// CanaryWave chooses the first wave's targets: by spoke name, by label, or
// the first count targets in the rollout's order.
// +kubebuilder:validation:XValidation:rule="(has(self.spokes) ? 1 : 0) + (has(self.spokeSelector) ? 1 : 0) + (has(self.count) ? 1 : 0) == 1",message="a canary names exactly one of spokes, spokeSelector and count"
// +kubebuilder:validation:XValidation:rule="!has(self.spokeSelector) || (has(self.spokeSelector.matchLabels) && size(self.spokeSelector.matchLabels) > 0) || (has(self.spokeSelector.matchExpressions) && size(self.spokeSelector.matchExpressions) > 0)",message="canary spokeSelector must not be empty: it would select every target",fieldPath=".spokeSelector"
type CanaryWave struct {
	// spokes names the canary's Spokes: every target of the environment on
	// one of them is in the canary.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Spokes []string `json:"spokes,omitempty"`

	// spokeSelector selects the canary's Spokes by label (e.g. matchLabels:
	// {ring: canary}); an empty selector is refused.
	// +optional
	SpokeSelector *metav1.LabelSelector `json:"spokeSelector,omitempty"`

	// count makes the canary the first count targets in the rollout's
	// order (by spoke name).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5000
	Count *int32 `json:"count,omitempty"`

	// soakTime overrides the rollout's soakTime for the canary.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="soakTime must not be negative"
	SoakTime *metav1.Duration `json:"soakTime,omitempty"`

	// progressDeadline overrides the rollout's progressDeadline for the
	// canary.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="progressDeadline must be positive"
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`
}

// Wave is one wave after the canary.
type Wave struct {
	// size is how many targets the wave takes, from those no earlier wave
	// took: a count (e.g. 5) or a percentage of the environment's targets
	// (e.g. "25%"), rounded up, as a Deployment's maxSurge is, so a wave is
	// never empty while targets are left.
	// +required
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^(100|[1-9][0-9]?)%$')",message="size must be a count of at least 1 or a percentage from 1% to 100%"
	Size intstr.IntOrString `json:"size"`

	// soakTime overrides the rollout's soakTime for this wave.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="soakTime must not be negative"
	SoakTime *metav1.Duration `json:"soakTime,omitempty"`

	// progressDeadline overrides the rollout's progressDeadline for this
	// wave.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="progressDeadline must be positive"
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`
}

// RolloutPhase is where a Promotion's rollout stands.
// +kubebuilder:validation:Enum=Progressing;Paused;RollingBack;RolledBack;Completed
type RolloutPhase string

const (
	// RolloutProgressing: a wave is being acted on, verified or soaked.
	RolloutProgressing RolloutPhase = "Progressing"
	// RolloutPaused: the failure budget was spent with onFailure Pause, or a
	// person paused the rollout; nothing is acted on until a resume.
	RolloutPaused RolloutPhase = "Paused"
	// RolloutRollingBack: the budget was spent with onFailure Rollback; the
	// targets the Promotion changed are being returned to their revisions.
	RolloutRollingBack RolloutPhase = "RollingBack"
	// RolloutRolledBack: every changed target was returned. Terminal.
	RolloutRolledBack RolloutPhase = "RolledBack"
	// RolloutCompleted: every wave qualified. Terminal.
	RolloutCompleted RolloutPhase = "Completed"
)

// TargetFailure says why a target counts against the failure budget.
// +kubebuilder:validation:Enum=ReleaseFailed;HealthFailed;ProgressDeadlineExceeded;ActionFailed
type TargetFailure string

const (
	// TargetReleaseFailed: Helm recorded the revision as failed.
	TargetReleaseFailed TargetFailure = "ReleaseFailed"
	// TargetHealthFailed: the revision's workloads are Failed (kstatus).
	TargetHealthFailed TargetFailure = "HealthFailed"
	// TargetProgressDeadlineExceeded: the target did not report the promoted
	// version deployed and Current within the wave's progress deadline.
	TargetProgressDeadlineExceeded TargetFailure = "ProgressDeadlineExceeded"
	// TargetActionFailed: the strategy's action for the target failed or was
	// refused (e.g. the agent's upgrade failed).
	TargetActionFailed TargetFailure = "ActionFailed"
)

// RolloutStatus is where a Promotion's rollout stands: counts per wave and
// the failing targets, bounded, so that it stays small at 5,000 targets.
// The targets' ReleaseHistories remain the per-target truth. The Promotion
// controller writes it.
type RolloutStatus struct {
	// phase is Progressing, Paused, RollingBack, RolledBack or Completed.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`

	// resolved is the destination environment's rollout as it was when the
	// Promotion started, copied so that later edits of the Pipeline do not
	// reshape a running rollout. Absent for an environment without one (a
	// single wave with every target).
	// +optional
	Resolved *Rollout `json:"resolved,omitempty"`

	// currentWave is the index in waves of the wave being rolled out, or
	// the number of waves once every wave qualified. Waves before it are
	// done: the controller never goes back to them.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CurrentWave int32 `json:"currentWave,omitempty"`

	// waves holds one entry per wave, in order: the canary (if any), each
	// spec wave, and the final wave.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=22
	Waves []WaveStatus `json:"waves,omitempty"`

	// maxFailures is the failure budget as a count of targets, resolved
	// from the rollout's maxFailures and the number of targets.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxFailures int32 `json:"maxFailures,omitempty"`

	// failed counts the targets that fail now, across every wave; the
	// budget is spent when failed exceeds maxFailures (or a canary target
	// failed).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Failed int32 `json:"failed,omitempty"`

	// failedTargets lists failing targets, at most 20, in the rollout's
	// order; failed counts them all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	FailedTargets []FailedTarget `json:"failedTargets,omitempty"`

	// message says what the rollout waits for, or why it stopped.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// observedRequest is the sequence of the last status.rolloutRequest
	// the hub honored; a request with a higher one is new.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedRequest int64 `json:"observedRequest,omitempty"`

	// pausedBy is the user whose request paused the rollout (phase Paused,
	// reason PausedByUser); empty when the failure budget paused it.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	PausedBy string `json:"pausedBy,omitempty"`

	// acceptedFailures is how many failing targets the last resume
	// accepted: a resume does not refill the failure budget, it accepts the
	// failures it was resumed with. The rollout stops again as soon as more
	// targets fail than maxFailures or acceptedFailures allows, whichever
	// is more (a canary target failing again counts as one more).
	// +optional
	// +kubebuilder:validation:Minimum=0
	AcceptedFailures int32 `json:"acceptedFailures,omitempty"`

	// pauses counts the times the rollout was paused, by people or by its
	// failure budget; resumes the times a person resumed it. The notices
	// PromotionPaused and PromotionResumed are told once per count.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Pauses int32 `json:"pauses,omitempty"`

	// resumes counts the times a person resumed the rollout.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Resumes int32 `json:"resumes,omitempty"`

	// rollbackStartedAt is when the rollout stopped to roll back (phase
	// RollingBack); the rollback has the rollout's progressDeadline from
	// then.
	// +optional
	RollbackStartedAt *metav1.Time `json:"rollbackStartedAt,omitempty"`
}

// WaveStatus counts one wave's targets by state.
type WaveStatus struct {
	// name is "canary", "wave-<n>" (n from 1, for spec.waves[n-1]) or
	// "final" (every target left); "all" when it is the only wave (no
	// rollout, or one without canary and waves).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16
	Name string `json:"name"`

	// targets is how many targets the wave holds.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Targets int32 `json:"targets,omitempty"`

	// pending counts targets not acted on yet.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Pending int32 `json:"pending,omitempty"`

	// inProgress counts targets acted on that neither qualified nor failed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	InProgress int32 `json:"inProgress,omitempty"`

	// succeeded counts targets that qualified: the promoted version,
	// deployed and Current, as the revision the action produced, for the
	// wave's soak time.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Succeeded int32 `json:"succeeded,omitempty"`

	// failed counts targets that count against the failure budget.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Failed int32 `json:"failed,omitempty"`

	// startedAt is when the wave's first target was acted on.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// completedAt is when the wave qualified.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// FailedTarget is one target that counts against the failure budget.
type FailedTarget struct {
	// spoke is the target's Spoke.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Spoke string `json:"spoke"`

	// namespace is the release's namespace on the spoke.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// release is the release's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=53
	Release string `json:"release"`

	// wave is the name of the target's wave.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16
	Wave string `json:"wave"`

	// reason is ReleaseFailed, HealthFailed, ProgressDeadlineExceeded or
	// ActionFailed.
	// +required
	Reason TargetFailure `json:"reason"`

	// revision is the Helm revision the target reported when it failed; 0
	// when it reported none.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Revision int32 `json:"revision,omitempty"`

	// message says what was seen (e.g. the health reason).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`

	// since is when the target was first seen failing.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}
