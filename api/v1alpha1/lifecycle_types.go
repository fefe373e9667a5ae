package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kinds of this file register custom lifecycles (issue 25): a Lifecycle
// names a kind of external step and the event key its controller watches;
// a LifecycleEvent is one such step of one Promotion, which that controller
// (or a person) finishes. The step types themselves are in step_types.go.

// LifecycleSpec registers a lifecycle: a kind of step that a controller of
// its own handles.
type LifecycleSpec struct {
	// eventKey is what the lifecycle's controller watches for: every
	// LifecycleEvent of this lifecycle carries it in spec.eventKey and in
	// the label tugboat.dev/event-key, so a controller can select its
	// events (e.g. db-migrate).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9A-Z]([-_.a-z0-9A-Z]*[a-z0-9A-Z])?$`
	EventKey string `json:"eventKey"`

	// timeout is how long an event of this lifecycle may stay unfinished
	// when the step sets no timeout. Defaults to 10m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('24h')",message="timeout must be positive and at most 24h"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// description says what the lifecycle does, for people.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`
}

// LifecycleStatus says whether a controller handles the lifecycle.
type LifecycleStatus struct {
	// observedGeneration is the metadata.generation the hub last
	// reconciled.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is True while a controller claimed the lifecycle
	// recently (lastClaimedAt within the hub's claim window).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// claimedBy is the user the API server authenticated for the last
	// claim (the policy tugboat-lifecycles makes sure of it). A controller
	// claims the lifecycle by writing claimedBy and lastClaimedAt through
	// lifecycles/status, at least every few minutes.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	ClaimedBy string `json:"claimedBy,omitempty"`

	// lastClaimedAt is when the controller last claimed the lifecycle.
	// +optional
	LastClaimedAt *metav1.Time `json:"lastClaimedAt,omitempty"`
}

// Lifecycle registers a lifecycle that a controller other than tugboat
// handles: the hub publishes a LifecycleEvent with its event key for each
// external step that names it, and waits for that controller to finish it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lc,categories=tugboat
// +kubebuilder:printcolumn:name="Event Key",type=string,JSONPath=`.spec.eventKey`
// +kubebuilder:printcolumn:name="Claimed By",type=string,JSONPath=`.status.claimedBy`
// +kubebuilder:printcolumn:name="Last Claimed",type=date,JSONPath=`.status.lastClaimedAt`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Lifecycle struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the event key, the default timeout and what it does.
	// +required
	Spec LifecycleSpec `json:"spec"`

	// status says whether a controller handles it.
	// +optional
	Status LifecycleStatus `json:"status,omitempty"`
}

// LifecycleList is a list of Lifecycles.
//
// +kubebuilder:object:root=true
type LifecycleList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Lifecycles.
	Items []Lifecycle `json:"items"`
}

// EventTarget is one destination target of the Promotion an event is
// about.
type EventTarget struct {
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
}

// LifecycleEventSpec is what the event asks of the lifecycle's controller.
// The hub writes it once: it is immutable.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type LifecycleEventSpec struct {
	// lifecycle is the name of the Lifecycle, in the event's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Lifecycle string `json:"lifecycle"`

	// eventKey is the Lifecycle's event key when the event was published.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	EventKey string `json:"eventKey"`

	// promotion is the name of the Promotion, which owns the event.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Promotion string `json:"promotion"`

	// pipeline is the name of the Promotion's Pipeline.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Pipeline string `json:"pipeline"`

	// environment is the environment promoted into.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Environment string `json:"environment"`

	// version is the chart version promoted.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version"`

	// step is the name of the step in the environment's steps.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Step string `json:"step"`

	// stage is Pre or Post.
	// +required
	Stage StepStage `json:"stage"`

	// attempt is the step's attempt this event is, from 1.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=11
	Attempt int32 `json:"attempt"`

	// targets are the Promotion's destination targets, at most 100;
	// targetCount counts them all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Targets []EventTarget `json:"targets,omitempty"`

	// targetCount is how many destination targets the Promotion has.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TargetCount int32 `json:"targetCount,omitempty"`

	// deadline is when the hub marks the event TimedOut if no one
	// finished it.
	// +required
	Deadline metav1.Time `json:"deadline"`
}

// LifecycleEventPhase is where an event stands.
// +kubebuilder:validation:Enum=Pending;Done;Error;TimedOut
type LifecycleEventPhase string

const (
	// EventPending: published, not finished (also when status.phase is
	// empty).
	EventPending LifecycleEventPhase = "Pending"
	// EventDone: the lifecycle's controller finished it successfully.
	EventDone LifecycleEventPhase = "Done"
	// EventError: the lifecycle's controller finished it with an error.
	EventError LifecycleEventPhase = "Error"
	// EventTimedOut: no one finished it before spec.deadline; the hub
	// marked it.
	EventTimedOut LifecycleEventPhase = "TimedOut"
)

// Finished reports whether the event has ended.
func (p LifecycleEventPhase) Finished() bool {
	return p == EventDone || p == EventError || p == EventTimedOut
}

// LifecycleEventStatus is how the event ended. The lifecycle's controller
// writes Done or Error through lifecycleevents/status; the admission
// policy tugboat-lifecycles makes sure finishedBy is the user the API
// server authenticated, and refuses any change to a finished event.
// +kubebuilder:validation:XValidation:rule="!(has(self.phase) && self.phase in ['Done', 'Error']) || (has(self.finishedBy) && has(self.finishedAt))",message="a Done or Error event needs finishedBy and finishedAt"
type LifecycleEventStatus struct {
	// phase is Pending, Done, Error or TimedOut.
	// +optional
	Phase LifecycleEventPhase `json:"phase,omitempty"`

	// message says what happened (why it errored).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// finishedBy is the user who finished the event, as the API server
	// authenticated them (request.userInfo.username).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FinishedBy string `json:"finishedBy,omitempty"`

	// finishedAt is when the event was finished.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// LifecycleEvent is one attempt of an external lifecycle step of a
// Promotion, published by the hub for the Lifecycle's controller to finish
// (Done or Error). Owned by the Promotion: it is deleted with it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lce,categories=tugboat
// +kubebuilder:printcolumn:name="Lifecycle",type=string,JSONPath=`.spec.lifecycle`
// +kubebuilder:printcolumn:name="Promotion",type=string,JSONPath=`.spec.promotion`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.spec.step`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Finished By",type=string,JSONPath=`.status.finishedBy`,priority=1
// +kubebuilder:printcolumn:name="Deadline",type=date,JSONPath=`.spec.deadline`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LifecycleEvent struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the event asks.
	// +required
	Spec LifecycleEventSpec `json:"spec"`

	// status is how it ended.
	// +optional
	Status LifecycleEventStatus `json:"status,omitempty"`
}

// Phase is the event's phase, Pending when none was written.
func (e *LifecycleEvent) Phase() LifecycleEventPhase {
	if e.Status.Phase == "" {
		return EventPending
	}
	return e.Status.Phase
}

// LifecycleEventList is a list of LifecycleEvents.
//
// +kubebuilder:object:root=true
type LifecycleEventList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the LifecycleEvents.
	Items []LifecycleEvent `json:"items"`
}
