package wire

import (
	"net/url"
	"time"
)

// ProtocolVersion is the version of the agent↔hub protocol this build
// speaks, reported in every state snapshot (protocolVersion). The hub
// accepts older agents and marks their Spoke (AgentOutdated) so an operator
// knows to upgrade them; an agent that reports none predates the field.
const ProtocolVersion = 1

// MaxProtocolVersion bounds the protocolVersion a snapshot may claim.
const MaxProtocolVersion = 1000

// Limits of protocol v1. Decoders and Validate enforce them; the agent splits
// its batches to stay within them.
const (
	// DefaultEventBatchLimit is the default body limit of an event batch, in bytes.
	DefaultEventBatchLimit int64 = 2 << 20
	// DefaultStateSnapshotLimit is the default body limit of a state snapshot, in bytes.
	DefaultStateSnapshotLimit int64 = 8 << 20

	// MaxEventsPerBatch is the most events one batch may carry.
	MaxEventsPerBatch = 500
	// MaxReleasesPerSnapshot is the most releases one snapshot may carry.
	MaxReleasesPerSnapshot = 5000

	// MaxMessageLength is the longest event message, in characters.
	MaxMessageLength = 1024
	// MaxHealthReasonLength is the longest health reason, in characters.
	MaxHealthReasonLength = 512
	// MaxReasonLength is the longest event reason, in characters.
	MaxReasonLength = 128
	// MaxVersionLength is the longest version string (agent, Kubernetes,
	// chart), in characters.
	MaxVersionLength = 64
	// MaxChartNameLength is the longest chart name, in characters.
	MaxChartNameLength = 128
	// MaxAppVersionLength is the longest appVersion, in characters.
	MaxAppVersionLength = 128
	// MaxRevision is the largest Helm revision accepted.
	MaxRevision = 1<<31 - 1
)

// Health is a release's health, computed with kstatus semantics.
type Health string

const (
	// HealthInProgress: workloads are still rolling out.
	HealthInProgress Health = "InProgress"
	// HealthCurrent: every workload reached its desired state.
	HealthCurrent Health = "Current"
	// HealthFailed: a workload failed.
	HealthFailed Health = "Failed"
	// HealthUnknown: the agent cannot tell (yet).
	HealthUnknown Health = "Unknown"
)

var healths = []string{string(HealthInProgress), string(HealthCurrent), string(HealthFailed), string(HealthUnknown)}

// ReleaseStatus is a Helm release status, as Helm stores it.
type ReleaseStatus string

// The statuses Helm v3 records.
const (
	StatusUnknown         ReleaseStatus = "unknown"
	StatusDeployed        ReleaseStatus = "deployed"
	StatusUninstalled     ReleaseStatus = "uninstalled"
	StatusSuperseded      ReleaseStatus = "superseded"
	StatusFailed          ReleaseStatus = "failed"
	StatusUninstalling    ReleaseStatus = "uninstalling"
	StatusPendingInstall  ReleaseStatus = "pending-install"
	StatusPendingUpgrade  ReleaseStatus = "pending-upgrade"
	StatusPendingRollback ReleaseStatus = "pending-rollback"
)

var releaseStatuses = []string{
	string(StatusUnknown), string(StatusDeployed), string(StatusUninstalled),
	string(StatusSuperseded), string(StatusFailed), string(StatusUninstalling),
	string(StatusPendingInstall), string(StatusPendingUpgrade), string(StatusPendingRollback),
}

// EventKind says what an event is about.
type EventKind string

const (
	// EventReleaseStarted: a Helm release Secret was written (seen by the
	// agent's admission webhook, before Helm applies anything).
	EventReleaseStarted EventKind = "ReleaseStarted"
	// EventReleaseStatus: a revision's Helm status changed (e.g. to deployed,
	// failed).
	EventReleaseStatus EventKind = "ReleaseStatus"
	// EventHealthChanged: the release's health changed.
	EventHealthChanged EventKind = "HealthChanged"
	// EventObjectCreated: an object the release owns was created.
	EventObjectCreated EventKind = "ObjectCreated"
	// EventObjectUpdated: an object the release owns was modified.
	EventObjectUpdated EventKind = "ObjectUpdated"
	// EventObjectDeleted: an object the release owns was deleted.
	EventObjectDeleted EventKind = "ObjectDeleted"
	// EventKubernetes: a core/v1 Event about an object the release owns,
	// forwarded (e.g. FailedScheduling, BackOff).
	EventKubernetes EventKind = "KubernetesEvent"
)

var eventKinds = []string{
	string(EventReleaseStarted), string(EventReleaseStatus), string(EventHealthChanged),
	string(EventObjectCreated), string(EventObjectUpdated), string(EventObjectDeleted),
	string(EventKubernetes),
}

// EventType is the Kubernetes event type.
type EventType string

const (
	// EventTypeNormal is an event about expected progress.
	EventTypeNormal EventType = "Normal"
	// EventTypeWarning is an event about something that may need attention.
	EventTypeWarning EventType = "Warning"
)

var eventTypes = []string{string(EventTypeNormal), string(EventTypeWarning)}

// ObjectRef names a Kubernetes object on the spoke.
type ObjectRef struct {
	// Kind of the object, e.g. Deployment. Required.
	Kind string `json:"kind"`
	// Namespace of the object; empty for cluster-scoped objects.
	Namespace string `json:"namespace,omitempty"`
	// Name of the object. Required.
	Name string `json:"name"`
	// UID of the object, when known.
	UID string `json:"uid,omitempty"`
}

// Event is one thing that happened to a release or an object it owns.
type Event struct {
	// ID is NewEventID of the event's identity fields. The hub recomputes it
	// and rejects a mismatch, and de-duplicates on it.
	ID string `json:"id"`
	// Spoke is the reporting spoke; it must equal the batch's.
	Spoke string `json:"spoke"`
	// Namespace is the release's namespace.
	Namespace string `json:"namespace"`
	// Release is the Helm release name.
	Release string `json:"release"`
	// Revision is the Helm revision the event belongs to (1 or more).
	Revision int `json:"revision"`
	// Kind says what the event is about.
	Kind EventKind `json:"kind"`
	// Type is Normal or Warning.
	Type EventType `json:"type"`
	// Reason is a short CamelCase reason, e.g. Created, RolloutComplete.
	Reason string `json:"reason"`
	// Object is the object the event is about; nil for events about the
	// release itself.
	Object *ObjectRef `json:"object,omitempty"`
	// State is the release as the agent saw it when the event happened, on
	// events about the release itself (ReleaseStarted, ReleaseStatus,
	// HealthChanged). It lets the hub update a ReleaseHistory from the event
	// alone, without waiting for the next snapshot. Its namespace and release
	// must equal the event's.
	State *ReleaseState `json:"state,omitempty"`
	// Message is a human-readable description (at most MaxMessageLength
	// characters).
	Message string `json:"message,omitempty"`
	// Time is when it happened.
	Time time.Time `json:"time"`
	// Sequence tells apart events that share every other identity field (for
	// example an object's resourceVersion, or a counter). 0 or more.
	Sequence int64 `json:"sequence"`
	// ReleaseUID is the UID of the Helm storage object (the Secret or
	// ConfigMap sh.helm.release.v1.<release>.v<revision>) of the revision
	// the event belongs to, when the sender knows it. It is part of the
	// event's identity: an uninstall followed by a reinstall makes a new
	// revision 1 in a new storage object, whose events must not be taken
	// for redeliveries of the old revision 1's.
	ReleaseUID string `json:"releaseUID,omitempty"`
}

// Decisive reports whether e is a health or status change that can start or
// end a promotion: a release state turning Current or Failed, or a failed
// Helm status. The agent sends such an event at once, and the hub writes it
// without waiting for its write interval.
func (e *Event) Decisive() bool {
	if e.State == nil || (e.Kind != EventHealthChanged && e.Kind != EventReleaseStatus) {
		return false
	}
	return e.State.Health == HealthCurrent || e.State.Health == HealthFailed || e.State.Status == StatusFailed
}

// ComputeID returns the event's id: NewEventID of its identity fields, or
// NewOccurrenceEventID when it carries a ReleaseUID.
func (e *Event) ComputeID() string {
	uid := ""
	if e.Object != nil {
		uid = e.Object.UID
	}
	if e.ReleaseUID != "" {
		return NewOccurrenceEventID(e.Spoke, e.Namespace, e.Release, e.ReleaseUID, e.Revision, string(e.Kind), uid, e.Sequence)
	}
	return NewEventID(e.Spoke, e.Namespace, e.Release, e.Revision, string(e.Kind), uid, e.Sequence)
}

// EventBatch is the body of POST /v1/spokes/{spoke}/events.
type EventBatch struct {
	// Spoke is the sending spoke; it must equal the {spoke} in the path (the
	// receiver checks that).
	Spoke string `json:"spoke"`
	// AgentVersion is the agent's version.
	AgentVersion string `json:"agentVersion"`
	// SentAt is when the agent sent the batch (for diagnostics; the signed
	// timestamp header is what counts for freshness).
	SentAt time.Time `json:"sentAt"`
	// Events are the events, 1 to MaxEventsPerBatch, oldest first.
	Events []Event `json:"events"`
}

// HelmReleaseRef names the Flux HelmRelease that manages a release.
type HelmReleaseRef struct {
	// Namespace of the HelmRelease.
	Namespace string `json:"namespace"`
	// Name of the HelmRelease.
	Name string `json:"name"`
}

// ReleaseState is the current revision of one Helm release.
type ReleaseState struct {
	// Namespace is the release's namespace.
	Namespace string `json:"namespace"`
	// Release is the Helm release name.
	Release string `json:"release"`
	// Chart is the chart's name.
	Chart string `json:"chart"`
	// ChartVersion is the chart's version.
	ChartVersion string `json:"chartVersion"`
	// AppVersion is the chart's appVersion, if any.
	AppVersion string `json:"appVersion,omitempty"`
	// Revision is the current Helm revision (1 or more).
	Revision int `json:"revision"`
	// Status is the current revision's Helm status.
	Status ReleaseStatus `json:"status"`
	// Health is the release's health.
	Health Health `json:"health"`
	// HealthReason explains Health when it is not Current.
	HealthReason string `json:"healthReason,omitempty"`
	// ValuesDigest is "sha256:<64 hex>" of the user-supplied values.
	ValuesDigest string `json:"valuesDigest,omitempty"`
	// ManifestDigest is "sha256:<64 hex>" of the rendered manifest.
	ManifestDigest string `json:"manifestDigest,omitempty"`
	// FirstDeployed is when the release was first installed.
	FirstDeployed time.Time `json:"firstDeployed,omitzero"`
	// LastDeployed is when the current revision was deployed.
	LastDeployed time.Time `json:"lastDeployed,omitzero"`
	// HelmRelease is the Flux HelmRelease managing the release, if any.
	HelmRelease *HelmReleaseRef `json:"helmRelease,omitempty"`
	// HelmReleaseStatus is what that HelmRelease's conditions say, when
	// HelmRelease is set and the agent sees the HelmRelease. Health already
	// folds it in; the hub records it so that a promotion can tell a
	// release helm-controller gave up on (Stalled) from one still rolling
	// out. A hub older than the agent refuses a state carrying it (unknown
	// field): upgrade the hub first.
	HelmReleaseStatus *HelmReleaseStatus `json:"helmReleaseStatus,omitempty"`
	// ReleaseUID is the UID of the revision's Helm storage object, when the
	// sender knows it (as Event.ReleaseUID): the hub tells a reinstall's
	// revision 1 from the first install's by it, in snapshots too.
	ReleaseUID string `json:"releaseUID,omitempty"`
}

// ConditionStatus is the status of a Kubernetes condition.
type ConditionStatus string

// The statuses of a condition.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

var conditionStatuses = []string{string(ConditionTrue), string(ConditionFalse), string(ConditionUnknown)}

// HelmReleaseStatus is the state of a Flux HelmRelease as helm-controller
// reports it in its conditions and status.
type HelmReleaseStatus struct {
	// Ready is the status of the HelmRelease's Ready condition (Unknown
	// when it has none).
	Ready ConditionStatus `json:"ready"`
	// Reason is the Ready condition's reason (the Stalled condition's when
	// stalled), e.g. UpgradeSucceeded, UpgradeFailed, RetriesExceeded.
	Reason string `json:"reason,omitempty"`
	// Message is that condition's message, helm-controller's own words (at
	// most MaxMessageLength characters).
	Message string `json:"message,omitempty"`
	// Stalled is true when the Stalled condition is True: helm-controller
	// gave up (e.g. RetriesExceeded) until the HelmRelease changes.
	Stalled bool `json:"stalled,omitempty"`
	// Reconciling is true when the Reconciling condition is True, or when
	// helm-controller has not yet observed the HelmRelease's generation.
	Reconciling bool `json:"reconciling,omitempty"`
	// Suspended is the HelmRelease's spec.suspend: helm-controller leaves it
	// alone, so the release does not move until it is resumed.
	Suspended bool `json:"suspended,omitempty"`
	// ObservedGeneration is the HelmRelease generation helm-controller last
	// reconciled (status.observedGeneration).
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastAttemptedRevision is status.lastAttemptedRevision: the chart
	// version helm-controller last tried to install or upgrade to.
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`
}

// StateSnapshot is the body of POST /v1/spokes/{spoke}/state: every release
// the agent sees. It doubles as the heartbeat. The hub reconciles against it,
// so a release the hub missed events for is still recorded.
type StateSnapshot struct {
	// Spoke is the sending spoke; it must equal the {spoke} in the path.
	Spoke string `json:"spoke"`
	// AgentVersion is the agent's version.
	AgentVersion string `json:"agentVersion"`
	// ProtocolVersion is the wire protocol version the agent speaks
	// (ProtocolVersion of its build); 0 for an agent older than the field.
	ProtocolVersion int `json:"protocolVersion,omitempty"`
	// KubernetesVersion is the spoke API server's version, if known.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// TakenAt is when the agent took the snapshot; the hub ignores a snapshot
	// older than one it already applied.
	TakenAt time.Time `json:"takenAt"`
	// Releases are every release the agent sees, at most
	// MaxReleasesPerSnapshot, unique by namespace and release. Empty is valid.
	Releases []ReleaseState `json:"releases"`
}

// AcceptedResponse is the 202 body of both endpoints.
type AcceptedResponse struct {
	// Received is how many events (or releases) the body held.
	Received int `json:"received"`
	// Accepted is how many were new to the hub and recorded.
	Accepted int `json:"accepted"`
	// Duplicates is how many the hub had already recorded.
	Duplicates int `json:"duplicates"`
}

// ErrorResponse is the body of every 4xx and 5xx answer.
type ErrorResponse struct {
	// Error is a human-readable summary. For 401 it never says which check
	// failed.
	Error string `json:"error"`
	// Fields lists the problems with the request body (400 only).
	Fields []FieldError `json:"fields,omitempty"`
}

// EventsPath is the path an agent posts event batches to.
func EventsPath(spoke string) string { return "/v1/spokes/" + url.PathEscape(spoke) + "/events" }

// StatePath is the path an agent posts state snapshots to.
func StatePath(spoke string) string { return "/v1/spokes/" + url.PathEscape(spoke) + "/state" }
