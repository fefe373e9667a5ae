package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelSpokeClass is the label a SpokeClass puts on the Spokes it creates:
// the SpokeClass's name.
const LabelSpokeClass = "tugboat.dev/spoke-class"

// SpokeClassSpec selects Cluster API Clusters that become Spokes.
type SpokeClassSpec struct {
	// clusterSelector selects Cluster API Clusters (cluster.x-k8s.io) in the
	// SpokeClass's namespace, by label. Each selected Cluster becomes a Spoke
	// of the Cluster's name, owned by the Cluster, carrying the Cluster's
	// labels (so that Pipelines can select it with spokeSelector). An empty
	// selector selects every Cluster of the namespace.
	// +required
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions[].operator must be In, NotIn, Exists or DoesNotExist"
	ClusterSelector metav1.LabelSelector `json:"clusterSelector"`

	// spokeLabels are added to the labels of every Spoke of the class (a
	// Cluster's own label of the same key wins).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	SpokeLabels map[string]string `json:"spokeLabels,omitempty"`

	// agent, when set, has the hub install the tugboat agent into each
	// selected Cluster once its control plane is initialized (the Spokes'
	// spec.agentBootstrap), through the Cluster's <name>-kubeconfig Secret.
	// Unset (the default): the Spokes are created and the hub never writes to
	// the workload clusters; install their agents yourself.
	// +optional
	Agent *AgentBootstrap `json:"agent,omitempty"`
}

// SpokeClassStatus is what the SpokeClass selected.
type SpokeClassStatus struct {
	// observedGeneration is the metadata.generation last reconciled.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is True when every selected Cluster has its Spoke,
	// False with the Clusters that could not get one (a Spoke of the same
	// name that the class does not own), and Unknown while Cluster API is not
	// installed on the hub.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// spokes are the names of the Spokes of the class, sorted.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	Spokes []string `json:"spokes,omitempty"`
}

// SpokeClass turns Cluster API Clusters selected by label into Spokes, and
// optionally installs their agents.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=spc,categories=tugboat
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Hub URL",type=string,JSONPath=`.spec.agent.hubURL`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SpokeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec selects the Clusters.
	// +required
	Spec SpokeClassSpec `json:"spec"`

	// status is what the hub selected.
	// +optional
	Status SpokeClassStatus `json:"status,omitempty"`
}

// SpokeClassList is a list of SpokeClasses.
//
// +kubebuilder:object:root=true
type SpokeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SpokeClass `json:"items"`
}
