package v1alpha1

import fluxmeta "github.com/fluxcd/pkg/apis/meta"

// ConditionType names a condition in status.conditions. tugboat follows the
// kstatus / Flux conventions: every kind reports Ready, and Reconciling or
// Stalled while they are true. The types and reasons Flux defines are
// Flux's own (github.com/fluxcd/pkg/apis/meta).
//
// metav1.Condition stores the type as a plain string: convert with
// string(ReadyCondition) or ConditionType.String.
type ConditionType string

// String returns the condition type as the plain string metav1.Condition holds.
func (t ConditionType) String() string { return string(t) }

const (
	// ReadyCondition is True when the object reached the state its spec asks for,
	// False when it cannot, and Unknown while that is not yet known.
	ReadyCondition = ConditionType(fluxmeta.ReadyCondition)

	// ReconcilingCondition is True while the controller is working towards the
	// spec (an "abnormal-true" condition: absent when there is nothing to do).
	ReconcilingCondition = ConditionType(fluxmeta.ReconcilingCondition)

	// StalledCondition is True when the controller cannot make progress without a
	// change to the spec or to a referenced object (a terminal configuration
	// error). Absent otherwise.
	StalledCondition = ConditionType(fluxmeta.StalledCondition)

	// NotifiedCondition, on a Pipeline, is True while its notifiers deliver,
	// and False with the failing notifier and its error once a notice could
	// not be delivered. It never blocks a promotion.
	NotifiedCondition ConditionType = "Notified"

	// AgentOutdatedCondition, on a Spoke, is True while its agent speaks an
	// older agent↔hub protocol than the hub (reason OlderProtocol): it still
	// works, and should be upgraded. Absent otherwise.
	AgentOutdatedCondition ConditionType = "AgentOutdated"

	// AgentInstalledCondition, on a Spoke with spec.agentBootstrap, is True
	// once the hub installed its agent at the hub's version, and False with
	// the reason while it waits or after it failed.
	AgentInstalledCondition ConditionType = "AgentInstalled"
)

// Agent bootstrap reasons (AgentInstalled).
const (
	// AgentInstalledReason: the agent's chart is installed at the hub's version.
	AgentInstalledReason ConditionReason = "Installed"
	// WaitingForControlPlaneReason: the Cluster's control plane is not
	// initialized yet.
	WaitingForControlPlaneReason ConditionReason = "WaitingForControlPlane"
	// InstallFailedReason: the install failed; the message says why (retried).
	InstallFailedReason ConditionReason = "InstallFailed"
	// ValuesNotAllowedReason: spec.agentBootstrap.values sets chart values
	// outside the hub's --bootstrap-allowed-values (terminal, with
	// Stalled=True; nothing is installed).
	ValuesNotAllowedReason ConditionReason = "ValuesNotAllowed"
	// KeySecretNotGeneratedReason: the Spoke's key Secret is not one the hub
	// generated for this Spoke (labeled tugboat.dev/spoke with its name and
	// controlled by it), so the hub does not copy it to the spoke (terminal,
	// with Stalled=True; nothing is installed).
	KeySecretNotGeneratedReason ConditionReason = "KeySecretNotGenerated"
)

// Notification reasons.
const (
	// NotificationsDeliveredReason: every notice was delivered.
	NotificationsDeliveredReason ConditionReason = "NotificationsDelivered"
	// NotificationFailedReason: a notice could not be delivered (retried,
	// or given up).
	NotificationFailedReason ConditionReason = "NotificationFailed"
)

// ConditionReason is the machine-readable, CamelCase reason of a condition.
// Convert with string(reason) or ConditionReason.String for metav1.Condition.
type ConditionReason string

// String returns the reason as the plain string metav1.Condition holds.
func (r ConditionReason) String() string { return string(r) }

// Reasons shared by every kind.
const (
	// SucceededReason: the last reconciliation reached the desired state.
	SucceededReason = ConditionReason(fluxmeta.SucceededReason)

	// ProgressingReason: the controller is working towards the desired state.
	ProgressingReason = ConditionReason(fluxmeta.ProgressingReason)

	// ReconciliationFailedReason: a transient error stopped the last
	// reconciliation; it is retried with back-off.
	ReconciliationFailedReason = ConditionReason(fluxmeta.ReconciliationFailedReason)

	// InvalidSpecReason: the spec cannot be acted on as written (terminal; set
	// together with Stalled=True).
	InvalidSpecReason ConditionReason = "InvalidSpec"

	// SecretNotFoundReason: a referenced Secret, or a key in it, does not exist.
	SecretNotFoundReason ConditionReason = "SecretNotFound"

	// SuspendedReason: spec.suspend is true; the controller does nothing.
	SuspendedReason = ConditionReason(fluxmeta.SuspendedReason)
)

// Spoke reasons.
const (
	// AgentConnectedReason: the spoke's agent sent a signed state snapshot within
	// the heartbeat timeout.
	AgentConnectedReason ConditionReason = "AgentConnected"

	// AgentNotSeenReason: no heartbeat arrived within the heartbeat timeout, or
	// none ever did. Ready is Unknown, not False: the spoke may be fine, the hub
	// just does not know.
	AgentNotSeenReason ConditionReason = "AgentNotSeen"

	// OlderProtocolReason: the agent reported an older protocolVersion than
	// the hub's (AgentOutdated).
	OlderProtocolReason ConditionReason = "OlderProtocol"

	// NoEventSinceSetupReason: the spoke is agentless (fed by Flux
	// notification-controller: its key Secret holds a Flux key) and the hub
	// has received no Flux event from it since it was set up.
	NoEventSinceSetupReason ConditionReason = "NoEventSinceSetup"

	// FluxEventReceivedReason: the agentless spoke's notification-controller
	// has posted a signed event the hub accepted (status.lastFluxEvent).
	FluxEventReceivedReason ConditionReason = "FluxEventReceived"
)

// Pipeline reasons.
const (
	// PromotionInProgressReason: a Promotion of this Pipeline is running.
	PromotionInProgressReason ConditionReason = "PromotionInProgress"

	// WaitingForSoakReason: an environment runs a new version, healthy, but for
	// less than its soak time.
	WaitingForSoakReason ConditionReason = "WaitingForSoak"

	// HeldAfterRollbackReason: a human rolled an environment back; automatic
	// promotion into it is held until someone resumes it.
	HeldAfterRollbackReason ConditionReason = "HeldAfterRollback"

	// HeldAfterRolloutFailedReason: a rollout into an environment spent its
	// failure budget (or one of its post steps failed) and was rolled back
	// automatically (onFailure Rollback); automatic promotion into it is held until someone resumes
	// it.
	HeldAfterRolloutFailedReason ConditionReason = "HeldAfterRolloutFailed"

	// StoppedByStepReason: a version whose promotion into an environment
	// failed a post step (its Helm tests, a metric, a check of your own)
	// runs there but is not promoted out of it; a newer version, or a
	// person's `tugboat promote`, moves on.
	StoppedByStepReason ConditionReason = "StoppedByStep"

	// TargetNotFoundReason: a target's Spoke or ReleaseHistory does not exist (yet).
	TargetNotFoundReason ConditionReason = "TargetNotFound"
)

// Promotion reasons.
const (
	// WaitingForApprovalReason: the destination environment requires approval
	// and nobody has approved or rejected the Promotion yet.
	WaitingForApprovalReason ConditionReason = "WaitingForApproval"

	// ApprovalPolicyNotEnforcedReason: the Promotion waits for approval and
	// the API server does not enforce the ValidatingAdmissionPolicy
	// tugboat-approvals, so Kubernetes votes do not count; the message says
	// what is missing.
	ApprovalPolicyNotEnforcedReason ConditionReason = "ApprovalPolicyNotEnforced"

	// VerifyingReason: the strategy acted; the controller waits for every target
	// of the destination environment to report the version, healthy.
	VerifyingReason ConditionReason = "Verifying"

	// StrategyFailedReason: the promotion strategy returned an error.
	StrategyFailedReason ConditionReason = "StrategyFailed"

	// TimedOutReason: the Promotion did not complete within the Pipeline's timeout.
	TimedOutReason ConditionReason = "TimedOut"

	// RejectedReason: a person rejected the Promotion.
	RejectedReason ConditionReason = "Rejected"

	// RolloutPausedReason: a rollout's failure budget was spent and the
	// rollout stopped (onFailure Pause); it waits for a person to resume
	// or abort it.
	RolloutPausedReason ConditionReason = "RolloutPaused"

	// PausedByUserReason: a person paused the rollout (tugboat rollout
	// pause, status.rolloutRequest); nothing more is acted on until they,
	// or another person with the verb resume, resume it.
	PausedByUserReason ConditionReason = "PausedByUser"

	// RollingBackReason: a rollout's failure budget was spent with
	// onFailure Rollback; the targets it changed are being returned to the
	// revisions they ran before.
	RollingBackReason ConditionReason = "RollingBack"

	// RolloutFailedReason: a rollout's failure budget was spent, or one of
	// its post steps failed, with onFailure Rollback; the targets it changed
	// were rolled back (or the rollback ended, as its message says) and the
	// Promotion failed.
	RolloutFailedReason ConditionReason = "RolloutFailed"

	// AbortedReason: the Promotion was aborted (by a person with tugboat abort,
	// superseded by a newer version, or its Pipeline or destination
	// environment went away or was held).
	AbortedReason ConditionReason = "Aborted"
)
