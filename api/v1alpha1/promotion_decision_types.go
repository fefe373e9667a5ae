package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Promotion's notices and decisions: delivery records (written by the
// hub's notifier), and the votes, abort and rollout requests people write
// through the admission policy tugboat-approvals.

// NotificationPhase is whether a notification has been delivered.
// +kubebuilder:validation:Enum=Pending;Delivered;Failed
type NotificationPhase string

const (
	// NotificationPending: not delivered yet; retried.
	NotificationPending NotificationPhase = "Pending"
	// NotificationDelivered: delivered (at least once).
	NotificationDelivered NotificationPhase = "Delivered"
	// NotificationFailed: given up after too many attempts.
	NotificationFailed NotificationPhase = "Failed"
)

// NotificationDelivery records one notice of one notifier, so a restart
// neither loses nor repeats it.
type NotificationDelivery struct {
	// notifier is the name of the notifier in the Pipeline's spec.notify.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Notifier string `json:"notifier"`

	// event is what the notice is about. A summary notice is recorded under
	// the event that completed the promotion.
	// +required
	Event NotifyEvent `json:"event"`

	// occurrence is, for an event that recurs (PromotionWaveCompleted,
	// PromotionPaused, PromotionResumed), which occurrence the record is
	// about, from 1: the wave's number, or the rollout's n-th pause or
	// resume. The hub tells each occurrence once, in order, and reuses the
	// record for the next one. 0 for the other events.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Occurrence int32 `json:"occurrence,omitempty"`

	// DeliveryState is where the delivery stands, inlined.
	DeliveryState `json:",inline"`

	// reference identifies what was posted where the notifier needs it again,
	// e.g. the Slack channel and message timestamp a thread hangs off.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reference string `json:"reference,omitempty"`
}

// DeliveryState is where the delivery of one notice stands.
type DeliveryState struct {
	// phase is Pending, Delivered or Failed.
	// +required
	Phase NotificationPhase `json:"phase"`

	// attempts is how many deliveries were attempted.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Attempts int32 `json:"attempts,omitempty"`

	// lastAttemptAt is when delivery was last attempted.
	// +optional
	LastAttemptAt *metav1.Time `json:"lastAttemptAt,omitempty"`

	// deliveredAt is when the notice was delivered.
	// +optional
	DeliveredAt *metav1.Time `json:"deliveredAt,omitempty"`

	// error is the last delivery error, if any (never a URL or a token).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Error string `json:"error,omitempty"`
}

// ApprovalSource says what authenticated a decision.
// +kubebuilder:validation:Enum=Kubernetes;Slack;CI
type ApprovalSource string

// Approval sources.
const (
	// ApprovalSourceKubernetes: the API server authenticated the user
	// (request.userInfo), enforced by the ValidatingAdmissionPolicy
	// tugboat-approvals.
	ApprovalSourceKubernetes ApprovalSource = "Kubernetes"
	// ApprovalSourceSlack: a Slack interaction whose signature the hub
	// verified.
	ApprovalSourceSlack ApprovalSource = "Slack"
	// ApprovalSourceCI: a CI approval credential the hub verified.
	ApprovalSourceCI ApprovalSource = "CI"
)

// Decision is approve or reject.
// +kubebuilder:validation:Enum=Approve;Reject
type Decision string

// Decisions.
const (
	DecisionApprove Decision = "Approve"
	DecisionReject  Decision = "Reject"
)

// ApprovalVote is one authenticated decision on a Promotion.
type ApprovalVote struct {
	// decision is Approve or Reject.
	// +required
	Decision Decision `json:"decision"`

	// user is the authenticated identity: the Kubernetes user name, the Slack
	// user ID or the CI approval credential's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	User string `json:"user"`

	// displayName is a readable name where the source gives one (the Slack
	// user name).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	DisplayName string `json:"displayName,omitempty"`

	// source is what authenticated the user.
	// +required
	Source ApprovalSource `json:"source"`

	// time is when the decision was made.
	// +required
	Time metav1.Time `json:"time"`

	// message is the person's comment, if any.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// Approval records the outcome of the approval gate, written by the hub once
// enough approvals (or one rejection) are recorded in status.approvals.
// +kubebuilder:validation:XValidation:rule="has(self.approvedBy) != has(self.rejectedBy)",message="exactly one of approvedBy and rejectedBy must be set"
type Approval struct {
	// approvedBy lists who approved the Promotion, comma-separated.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	ApprovedBy string `json:"approvedBy,omitempty"`

	// rejectedBy is who rejected the Promotion.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	RejectedBy string `json:"rejectedBy,omitempty"`

	// time is when the decision was made.
	// +required
	Time metav1.Time `json:"time"`

	// message is the deciding person's comment, if any.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// AbortRequest is an authenticated request to stop a Promotion.
type AbortRequest struct {
	// user is the Kubernetes user name the API server authenticated for
	// the request (request.userInfo.username).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	User string `json:"user"`

	// time is when the abort was requested.
	// +required
	Time metav1.Time `json:"time"`

	// message says why, if the person said.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// RolloutAction is what a person asks of a rollout in progress.
// +kubebuilder:validation:Enum=Pause;Resume
type RolloutAction string

// Rollout actions.
const (
	// RolloutActionPause stops the rollout at the next wave boundary: no
	// target not acted on yet is acted on; those acted on are still
	// verified.
	RolloutActionPause RolloutAction = "Pause"
	// RolloutActionResume lets a paused rollout go on, whether a person or
	// the failure budget paused it.
	RolloutActionResume RolloutAction = "Resume"
)

// RolloutRequest is an authenticated request to pause or resume a
// Promotion's rollout (tugboat rollout pause|resume). Each new request
// replaces the one before and takes the next sequence number; the hub
// records the last one it honored in status.rollout.observedRequest, so
// that pause, resume and pause again each act once, across restarts.
type RolloutRequest struct {
	// action is Pause or Resume.
	// +required
	Action RolloutAction `json:"action"`

	// sequence numbers the Promotion's rollout requests from 1: a new
	// request takes the number of the one it replaces plus one.
	// +required
	// +kubebuilder:validation:Minimum=1
	Sequence int64 `json:"sequence"`

	// user is the Kubernetes user name the API server authenticated for
	// the request (request.userInfo.username).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	User string `json:"user"`

	// time is when the request was made.
	// +required
	Time metav1.Time `json:"time"`

	// message says why, if the person said.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}
