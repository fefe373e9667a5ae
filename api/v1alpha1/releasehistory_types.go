package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReleaseHistorySpec identifies one Helm release on one spoke. It is immutable.
type ReleaseHistorySpec struct {
	// spoke is the name of the Spoke, in this object's namespace, the release
	// runs on.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spoke is immutable"
	Spoke string `json:"spoke"`

	// namespace is the release's namespace on the spoke.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="namespace is immutable"
	Namespace string `json:"namespace"`

	// release is the Helm release name (at most 53 characters, as Helm allows).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=53
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="release is immutable"
	Release string `json:"release"`

	// helmRelease names the Flux HelmRelease on the spoke that manages the
	// release, when one does.
	// +optional
	HelmRelease *ObjectReference `json:"helmRelease,omitempty"`
}

// RevisionSummary describes one revision of a Helm release.
type RevisionSummary struct {
	// revision is Helm's revision number (1 for the install, +1 per upgrade or
	// rollback).
	// +required
	// +kubebuilder:validation:Minimum=1
	Revision int32 `json:"revision"`

	// installation counts the release's lives on the spoke: 1 for the first
	// install, +1 each time it is installed again after an uninstall. Helm
	// numbers revisions from 1 again after a reinstall, so a revision is
	// known by its installation and its number.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	Installation int32 `json:"installation,omitempty"`

	// chart is the chart's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Chart string `json:"chart"`

	// chartVersion is the chart's version (SemVer 2).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	ChartVersion string `json:"chartVersion"`

	// appVersion is the chart's appVersion, if it has one.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	AppVersion string `json:"appVersion,omitempty"`

	// valuesDigest is "sha256:<hex>" of the release's user-supplied values, in
	// canonical JSON. Two revisions with equal digests were given equal values.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	ValuesDigest string `json:"valuesDigest,omitempty"`

	// manifestDigest is "sha256:<hex>" of the rendered manifest.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	ManifestDigest string `json:"manifestDigest,omitempty"`

	// status is the Helm status of the revision.
	// +required
	Status ReleaseStatus `json:"status"`

	// health is the health of the release's workloads while this revision was
	// (or is) the deployed one.
	// +optional
	// +kubebuilder:default=Unknown
	Health Health `json:"health,omitempty"`

	// healthReason explains health when it is not Current (e.g. which
	// Deployment is not available, and why).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	HealthReason string `json:"healthReason,omitempty"`

	// firstDeployed is when the release was first installed.
	// +optional
	FirstDeployed *metav1.Time `json:"firstDeployed,omitempty"`

	// lastDeployed is when this revision was deployed.
	// +optional
	LastDeployed *metav1.Time `json:"lastDeployed,omitempty"`
}

// Revision is a revision with the events recorded while it was current.
type Revision struct {
	// RevisionSummary holds the revision's fields, inlined.
	RevisionSummary `json:",inline"`

	// releaseUID is the UID of the revision's Helm storage object (its
	// Secret or ConfigMap) on the spoke, when the agent reported it: it tells
	// a reinstall's revision 1 from the first install's.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ReleaseUID string `json:"releaseUID,omitempty"`

	// events recorded for this revision, oldest first, at most 40: older ones
	// are dropped first, and repeats of an event are compacted into one entry
	// with a count.
	// The list is atomic: only the hub's recorder writes it, whole, and a
	// map list would name every field of every event in the object's
	// managedFields on every write.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=40
	Events []ReleaseEvent `json:"events,omitempty"`
}

// EventType is the Kubernetes event type: Normal or Warning.
// +kubebuilder:validation:Enum=Normal;Warning
type EventType string

const (
	// EventTypeNormal is an event about expected progress.
	EventTypeNormal EventType = "Normal"
	// EventTypeWarning is an event about something that may need attention.
	EventTypeWarning EventType = "Warning"
)

// ReleaseEvent is one thing that happened to a release or an object it owns.
type ReleaseEvent struct {
	// id is the event's deterministic id from the wire protocol. Repeats are
	// compacted under the id of their latest occurrence.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-f0-9]+$`
	ID string `json:"id"`

	// time is when the event (its latest repeat, if compacted) happened.
	// +required
	Time metav1.Time `json:"time"`

	// type is Normal or Warning.
	// +required
	Type EventType `json:"type"`

	// reason is a short CamelCase reason, e.g. Created, RolloutComplete.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason"`

	// object is the object the event is about, if any (absent for events about
	// the release itself).
	// +optional
	Object *EventObjectReference `json:"object,omitempty"`

	// message is a human-readable description, truncated to 512 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`

	// count is how many times the event happened: repeats with the same type,
	// reason, object and message are compacted into one entry. Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	Count int32 `json:"count,omitempty"`
}

// EventObjectReference names the object an event is about.
type EventObjectReference struct {
	// kind of the object, e.g. Deployment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// namespace of the object; empty for cluster-scoped objects.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ReleaseHistoryStatus is what the hub knows about the release.
type ReleaseHistoryStatus struct {
	// observedGeneration is the metadata.generation the hub last reconciled.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is True while the spoke reports the release.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// current is the release's latest revision (the one Helm reports as the
	// release), absent until the spoke first reports it.
	// +optional
	Current *RevisionSummary `json:"current,omitempty"`

	// revisions are the release's most recent revisions, newest first (by
	// installation, then revision): after an uninstall and a reinstall, the
	// new life's revisions come before the old life's. The hub
	// keeps 10 by default and the schema allows at most 20, which keeps the
	// object far below the 1.5 MiB limit.
	// The list is atomic, as events are: the recorder writes it whole.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Revisions []Revision `json:"revisions,omitempty"`

	// helmRelease is what the Flux HelmRelease managing the release (spec.helmRelease)
	// last said, as the spoke's agent saw it: its Ready condition, whether
	// helm-controller stalled (gave up until the HelmRelease changes), is
	// still reconciling, or is suspended. Absent when no agent reported it.
	// +optional
	HelmRelease *HelmReleaseStatus `json:"helmRelease,omitempty"`

	// lastEventTime is when the newest event recorded here happened.
	// +optional
	LastEventTime *metav1.Time `json:"lastEventTime,omitempty"`

	// reportedAt is when, by the spoke's clock, the newest report that
	// changed the release's state here was made: an event's time or a state
	// snapshot's takenAt. A state snapshot taken at or before it changes
	// nothing here, so an older snapshot (late, or replayed) cannot undo
	// newer news. The hub keeps it at most five minutes ahead of its own
	// clock.
	// +optional
	ReportedAt *metav1.MicroTime `json:"reportedAt,omitempty"`

	// notifications records the deployment notices the notifiers of the
	// Pipelines that target this release sent about its current revision, so
	// a hub restart neither loses nor repeats one. The hub's notifier writes
	// it; entries of older revisions are dropped.
	// +optional
	// +listType=map
	// +listMapKey=pipeline
	// +listMapKey=notifier
	// +listMapKey=event
	// +kubebuilder:validation:MaxItems=40
	Notifications []DeploymentNotification `json:"notifications,omitempty"`
}

// HelmReleaseStatus is the state of a Flux HelmRelease (helm.toolkit.fluxcd.io/v2)
// as helm-controller reports it.
type HelmReleaseStatus struct {
	// ready is the status of the HelmRelease's Ready condition (Unknown when
	// it has none).
	// +required
	// +kubebuilder:validation:Enum=True;False;Unknown
	Ready metav1.ConditionStatus `json:"ready"`

	// reason is the Ready condition's reason (the Stalled condition's when
	// stalled), e.g. UpgradeSucceeded, UpgradeFailed, RetriesExceeded.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty"`

	// message is that condition's message, in helm-controller's words.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// stalled is true when helm-controller gave up (Stalled=True, e.g.
	// RetriesExceeded) until the HelmRelease changes.
	// +optional
	Stalled bool `json:"stalled,omitempty"`

	// reconciling is true while helm-controller works on the HelmRelease
	// (Reconciling=True, or its generation not observed yet).
	// +optional
	Reconciling bool `json:"reconciling,omitempty"`

	// suspended is the HelmRelease's spec.suspend: helm-controller leaves it
	// alone, so the release does not move until it is resumed.
	// +optional
	Suspended bool `json:"suspended,omitempty"`

	// lastAttemptedRevision is the chart version helm-controller last tried
	// to install or upgrade to.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`
}

// DeploymentNotification is one deployment notice of one Pipeline's
// notifier about one revision.
type DeploymentNotification struct {
	// pipeline is the Pipeline whose notifier sent it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Pipeline string `json:"pipeline"`

	// notifier is the name of the notifier in the Pipeline's spec.notify.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Notifier string `json:"notifier"`

	// event is the deployment event (Deployment*).
	// +required
	Event NotifyEvent `json:"event"`

	// revision is the Helm revision the notice is about.
	// +required
	// +kubebuilder:validation:Minimum=0
	Revision int32 `json:"revision"`

	// installation is the installation (life) of the release the revision
	// belongs to (see RevisionSummary.installation): a reinstall's revision 1
	// is told about again.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Installation int32 `json:"installation,omitempty"`

	// DeliveryState is where the delivery stands, inlined.
	DeliveryState `json:",inline"`
}

// ReleaseHistory records one Helm release on one spoke: its current revision,
// its recent revisions and what happened during each. It lives in its Spoke's
// namespace and is named <spoke>.<namespace>.<release>. The hub writes it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rh,categories=tugboat
// +kubebuilder:printcolumn:name="Spoke",type=string,JSONPath=`.spec.spoke`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.namespace`
// +kubebuilder:printcolumn:name="Release",type=string,JSONPath=`.spec.release`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.current.revision`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.current.chartVersion`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.current.status`
// +kubebuilder:printcolumn:name="Health",type=string,JSONPath=`.status.current.health`
// +kubebuilder:printcolumn:name="HelmRelease",type=string,JSONPath=`.spec.helmRelease.name`,priority=1
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.status.helmRelease.suspended`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ReleaseHistory struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec identifies the release.
	// +required
	Spec ReleaseHistorySpec `json:"spec"`

	// status is what the hub knows about the release.
	// +optional
	Status ReleaseHistoryStatus `json:"status,omitempty"`
}

// ReleaseHistoryList is a list of ReleaseHistories.
//
// +kubebuilder:object:root=true
type ReleaseHistoryList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the ReleaseHistories.
	Items []ReleaseHistory `json:"items"`
}

// ReleaseHistoryName returns the name of the ReleaseHistory for a release:
// <spoke>.<namespace>.<release>. Spoke names and namespaces hold no dots, so
// the name parses back unambiguously.
func ReleaseHistoryName(spoke, namespace, release string) string {
	return spoke + "." + namespace + "." + release
}

// Life returns the revision's installation: 1 for a revision recorded
// before installations were counted.
func (r *RevisionSummary) Life() int32 {
	if r.Installation < 1 {
		return 1
	}
	return r.Installation
}

// Same reports whether r and o are the same revision: the same number in the
// same installation.
func (r *RevisionSummary) Same(o *RevisionSummary) bool {
	return r != nil && o != nil && r.Revision == o.Revision && r.Life() == o.Life()
}

// CurrentRevision returns the revision that is the release's current one,
// with its events, or nil when the history holds none.
func (s *ReleaseHistoryStatus) CurrentRevision() *Revision {
	if s.Current == nil {
		return nil
	}
	for i := range s.Revisions {
		if s.Revisions[i].Same(s.Current) {
			return &s.Revisions[i]
		}
	}
	return nil
}

// About reports whether the notice record is about revision r (a record
// written before installations were counted is about life 1).
func (n *DeploymentNotification) About(r *RevisionSummary) bool {
	life := max(n.Installation, 1)
	return r != nil && n.Revision == r.Revision && life == r.Life()
}
