package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Requester says who asked for a Promotion.
// +kubebuilder:validation:Enum=auto;user;ci
type Requester string

const (
	// RequestedByAuto: the Pipeline controller, because gates passed.
	RequestedByAuto Requester = "auto"
	// RequestedByUser: a person, with `tugboat promote`.
	RequestedByUser Requester = "user"
	// RequestedByCI: an external CI system, through the hub's API.
	RequestedByCI Requester = "ci"
)

// PromotionSpec says what to promote and where. It is immutable: a
// Promotion is a record of one decision. How is not the requester's to say:
// the hub runs the strategy the Pipeline defines for the destination
// environment, and records it in status.strategy.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.from) || self.from != self.to",message="from and to must differ",fieldPath=".to"
type PromotionSpec struct {
	// pipeline is the name of the Pipeline, in the Promotion's namespace, this
	// Promotion belongs to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Pipeline string `json:"pipeline"`

	// from is the environment the version was proven in; absent for a
	// promotion into the first environment.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	From string `json:"from,omitempty"`

	// to is the environment the version is promoted into.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	To string `json:"to"`

	// version is the chart version to promote.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9A-Za-z][0-9A-Za-z.+_-]*$`
	Version string `json:"version"`

	// requestedBy is auto, user or ci.
	// +required
	RequestedBy Requester `json:"requestedBy"`

	// requester identifies the person or system, when known (e.g. a user name
	// or a CI job URL).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Requester string `json:"requester,omitempty"`
}

// PromotionPhase is where a Promotion stands.
// +kubebuilder:validation:Enum=Pending;WaitingApproval;Running;Verifying;Paused;RollingBack;Succeeded;Failed;Aborted
type PromotionPhase string

const (
	// PromotionPending: created, not started.
	PromotionPending PromotionPhase = "Pending"
	// PromotionWaitingApproval: waiting for a person to approve or reject.
	PromotionWaitingApproval PromotionPhase = "WaitingApproval"
	// PromotionRunning: the strategy is acting.
	PromotionRunning PromotionPhase = "Running"
	// PromotionVerifying: the strategy acted; waiting for the targets to report
	// the version, healthy.
	PromotionVerifying PromotionPhase = "Verifying"
	// PromotionPaused: a rollout stopped because its failure budget was
	// spent (onFailure Pause, reason RolloutPaused) or a person paused it
	// (reason PausedByUser); nothing is acted on until a person resumes
	// or aborts it. Not terminal: it still holds the environment.
	PromotionPaused PromotionPhase = "Paused"
	// PromotionRollingBack: a rollout stopped because its failure budget
	// was spent (onFailure Rollback); every target it changed is being
	// returned to the revision it ran before, then the Promotion fails
	// (reason RolloutFailed). Not terminal: it still holds the environment.
	PromotionRollingBack PromotionPhase = "RollingBack"
	// PromotionSucceeded: every target runs the version, healthy. Terminal.
	PromotionSucceeded PromotionPhase = "Succeeded"
	// PromotionFailed: the strategy failed, the targets failed, the timeout
	// passed or a person rejected it. Terminal.
	PromotionFailed PromotionPhase = "Failed"
	// PromotionAborted: stopped before completion (superseded or held). Terminal.
	PromotionAborted PromotionPhase = "Aborted"
)

// Started reports whether the phase is one of a Promotion that acts, or
// acted, on its targets and has not finished: Running, Verifying, Paused
// or RollingBack. One such Promotion at a time holds an environment.
func (p PromotionPhase) Started() bool {
	return p == PromotionRunning || p == PromotionVerifying || p == PromotionPaused || p == PromotionRollingBack
}

// Terminal reports whether the phase is final.
func (p PromotionPhase) Terminal() bool {
	return p == PromotionSucceeded || p == PromotionFailed || p == PromotionAborted
}

// StrategyResult is what the strategy reported.
type StrategyResult struct {
	// url links to what the strategy produced, e.g. the pull request.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url,omitempty"`

	// reference identifies it otherwise, e.g. the branch and commit pushed or
	// the action id.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reference string `json:"reference,omitempty"`

	// message is the strategy's human-readable summary.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// TargetRollout records when and in which wave a rollout acted on a
// target, and what the target ran then: a wave qualifies only on the
// revision the action produced, never on an older report.
type TargetRollout struct {
	// wave is the index, in status.rollout.waves, of the wave the target
	// was acted in; it stays there whatever joins or leaves.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=21
	Wave int32 `json:"wave"`

	// actedAt is when the strategy acted on the target; the wave's
	// progress deadline counts from here.
	// +required
	ActedAt metav1.Time `json:"actedAt"`

	// baselineRevision is the Helm revision the target ran when acted on;
	// 0 when it ran none.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BaselineRevision int32 `json:"baselineRevision,omitempty"`

	// baselineInstallation is the installation of baselineRevision
	// (ReleaseHistory revisions[].installation).
	// +optional
	// +kubebuilder:validation:Minimum=0
	BaselineInstallation int32 `json:"baselineInstallation,omitempty"`

	// unchanged is true when the target already ran the promoted version,
	// deployed, when acted on: its baseline revision is then the one that
	// qualifies (a strategy that cannot say which revision it produced
	// makes no new one there).
	// +optional
	Unchanged bool `json:"unchanged,omitempty"`

	// baselineVersion is the chart version the target ran at
	// baselineRevision: what a rollback returns it to.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	BaselineVersion string `json:"baselineVersion,omitempty"`

	// rollback is the agent action (helm strategy) that returns the
	// target to baselineRevision after the rollout's failure budget was
	// spent with onFailure Rollback.
	// +optional
	Rollback *TargetAction `json:"rollback,omitempty"`
}

// ActionPhase is where an agent action stands.
// +kubebuilder:validation:Enum=Pending;Delivered;Succeeded;Failed;Refused
type ActionPhase string

// Action phases.
const (
	// ActionPending: queued, not yet fetched by the spoke's agent.
	ActionPending ActionPhase = "Pending"
	// ActionDelivered: the agent fetched it and has not reported yet.
	ActionDelivered ActionPhase = "Delivered"
	// ActionSucceeded: the agent upgraded the release.
	ActionSucceeded ActionPhase = "Succeeded"
	// ActionFailed: the agent's upgrade failed.
	ActionFailed ActionPhase = "Failed"
	// ActionRefused: the action is outside the limits the spoke sets.
	ActionRefused ActionPhase = "Refused"
)

// TargetAction is an action a spoke's agent carries out for the helm
// strategy.
type TargetAction struct {
	// id is the action's deterministic id.
	// +required
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`

	// phase is where the action stands.
	// +required
	Phase ActionPhase `json:"phase"`

	// message is the agent's report (why it refused or failed).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// deliveries counts how often the agent fetched the action.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Deliveries int32 `json:"deliveries,omitempty"`

	// revision is the Helm revision the agent's upgrade made.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Revision int32 `json:"revision,omitempty"`

	// lastUpdateTime is when the phase last changed.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
}

// PromotionStatus is the Promotion's progress.
type PromotionStatus struct {
	// observedGeneration is the metadata.generation the controller last
	// reconciled to a steady state.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// phase is where the Promotion stands.
	// +optional
	Phase PromotionPhase `json:"phase,omitempty"`

	// attempts is how many times the strategy was run.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Attempts int32 `json:"attempts,omitempty"`

	// strategy is the strategy the hub runs for this Promotion: the
	// destination environment's, else the Pipeline's. The hub resolves it
	// from the Pipeline the first time it reconciles the Promotion and keeps
	// it, so later edits of the Pipeline do not change a running Promotion.
	// Whoever creates a Promotion cannot choose it: a strategy names where the
	// hub sends credentials and requests, which only those who may edit the
	// Pipeline decide (docs/security.md).
	// +optional
	Strategy *PromotionStrategy `json:"strategy,omitempty"`

	// strategyResult is what the strategy last reported.
	// +optional
	StrategyResult *StrategyResult `json:"strategyResult,omitempty"`

	// There is no list of targets here: each target the Promotion acts on
	// has its own PromotionTarget (owned by the Promotion, labeled
	// tugboat.dev/promotion), so a Promotion into 5,000 targets stays
	// small and an agent's report rewrites one small object. status.rollout
	// holds the per-wave counts and the failing targets, bounded.

	// notifications records each notifier's notice per event.
	// +optional
	// +listType=map
	// +listMapKey=notifier
	// +listMapKey=event
	// +kubebuilder:validation:MaxItems=100
	Notifications []NotificationDelivery `json:"notifications,omitempty"`

	// approvals are the authenticated decisions, in the order they were made.
	// People append to it (tugboat approve, kubectl, Slack, CI); the
	// ValidatingAdmissionPolicy tugboat-approvals makes sure an entry names
	// the user the API server authenticated.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Approvals []ApprovalVote `json:"approvals,omitempty"`

	// unverifiedVotes is how many of the first approvals the hub found
	// written while the API server did not enforce the
	// ValidatingAdmissionPolicy tugboat-approvals: nothing checked who
	// wrote their Kubernetes votes, so those never count, even once the
	// policy is back. Only the hub writes it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	UnverifiedVotes int32 `json:"unverifiedVotes,omitempty"`

	// approval is the outcome of the approval gate, once decided.
	// +optional
	Approval *Approval `json:"approval,omitempty"`

	// abortRequest asks the hub to stop the Promotion (tugboat abort). A
	// person writes it, under the user name the API server authenticated:
	// the ValidatingAdmissionPolicy tugboat-approvals refuses one that names
	// anyone else, one from a user without the RBAC verb "abort" on the
	// environment, a change to one already recorded, and one on a finished
	// Promotion. The hub then moves the Promotion to Aborted.
	// +optional
	AbortRequest *AbortRequest `json:"abortRequest,omitempty"`

	// rolloutRequest asks the hub to pause or resume the Promotion's
	// rollout (tugboat rollout pause|resume). A person writes it, under the
	// user name the API server authenticated: the ValidatingAdmissionPolicy
	// tugboat-approvals refuses one that names anyone else, one from a user
	// without the RBAC verb "pause" or "resume" on the environment, one
	// whose sequence is not the next, and one on a Promotion without a
	// rollout in progress (Running, Verifying or Paused).
	// +optional
	RolloutRequest *RolloutRequest `json:"rolloutRequest,omitempty"`

	// startedAt is when the Promotion left Pending.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// completedAt is when the Promotion reached a terminal phase.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`

	// rollout is where the rollout into the destination's targets stands:
	// per-wave counts and the failing targets, bounded. Written by the
	// Promotion controller; see RolloutStatus.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// preview summarizes what the Promotion would change (issue 26): the
	// PromotionPreview of the same name holds the diffs. Written by the
	// Promotion controller, for a helm Promotion into an environment that
	// requires approval, before it waits for approval.
	// +optional
	Preview *PreviewSummary `json:"preview,omitempty"`

	// steps is where each lifecycle step of the destination environment
	// stands (pre steps first, in order, then post steps), as resolved
	// when the Promotion started. Written by the Promotion controller.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=20
	Steps []StepStatus `json:"steps,omitempty"`
}

// Promotion is one attempt to move one chart version into one environment of a
// Pipeline. The Pipeline controller creates one per pipeline, environment and
// version, owned by the Pipeline, and keeps the last spec.historyLimit.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=promo,categories=tugboat
// +kubebuilder:printcolumn:name="Pipeline",type=string,JSONPath=`.spec.pipeline`
// +kubebuilder:printcolumn:name="From",type=string,JSONPath=`.spec.from`
// +kubebuilder:printcolumn:name="To",type=string,JSONPath=`.spec.to`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Promotion struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says what to promote, and where.
	// +required
	Spec PromotionSpec `json:"spec"`

	// status is the Promotion's progress.
	// +optional
	Status PromotionStatus `json:"status,omitempty"`
}

// StrategyType is the type of the strategy the hub resolved for the
// Promotion (status.strategy), or "" before it did.
func (pr *Promotion) StrategyType() StrategyType {
	if pr.Status.Strategy == nil {
		return ""
	}
	return pr.Status.Strategy.Type
}

// PromotionList is a list of Promotions.
//
// +kubebuilder:object:root=true
type PromotionList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Promotions.
	Items []Promotion `json:"items"`
}
