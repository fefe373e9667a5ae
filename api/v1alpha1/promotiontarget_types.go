package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// PromotionTargetSpec names the target: which Promotion, and which
// release on which Spoke. It is set when the hub creates the object and
// never changes.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type PromotionTargetSpec struct {
	// promotion is the name of the Promotion, in the same namespace, this
	// target belongs to (also its controller owner).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Promotion string `json:"promotion"`

	// spoke is the target's Spoke, in the same namespace.
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

// PromotionTargetStatus is one destination target's progress: what the
// hub recorded when it acted on the target (rollout, the queued actions)
// and what the target and its agent reported since. Only the hub writes
// it: the Promotion controller on a transition, the agents' actions
// through the hub's receiver.
type PromotionTargetStatus struct {
	// version is the chart version the target last reported.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`

	// revision is the Helm revision the target last reported.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Revision int32 `json:"revision,omitempty"`

	// health is the target's health as last reported.
	// +optional
	Health Health `json:"health,omitempty"`

	// done is true once the target runs the version, healthy.
	// +optional
	Done bool `json:"done,omitempty"`

	// message explains what the target is waiting for, or why it failed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// lastTransitionTime is when version, health or done last changed.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`

	// action is the agent action of the helm strategy for this target.
	// +optional
	Action *TargetAction `json:"action,omitempty"`

	// rollout is what this Promotion's rollout did to the target (only
	// with a rollout, once the target's wave was acted on).
	// +optional
	Rollout *TargetRollout `json:"rollout,omitempty"`

	// helmTest is the agent action of the running (or last) attempt of a
	// helmTest step on this target: the release's Helm test hooks, run on
	// the revision action made. Its message names the failing test Pod
	// and holds an excerpt of its log.
	// +optional
	HelmTest *TargetAction `json:"helmTest,omitempty"`
}

// PromotionTarget is one target of one Promotion: the per-target truth of
// a Promotion (issue 24), kept out of the Promotion so that a Promotion
// into thousands of targets stays small and each agent's report rewrites
// one small object. The Promotion controller creates it when it acts on
// the target (with a rollout, when the target's wave starts; without, for
// every target as the Promotion starts), owned by the Promotion, named
// PromotionTargetName, labeled LabelPromotion and LabelSpoke.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pt,categories=tugboat
// +kubebuilder:printcolumn:name="Promotion",type=string,JSONPath=`.spec.promotion`
// +kubebuilder:printcolumn:name="Spoke",type=string,JSONPath=`.spec.spoke`
// +kubebuilder:printcolumn:name="Release",type=string,JSONPath=`.spec.release`
// +kubebuilder:printcolumn:name="Wave",type=integer,JSONPath=`.status.rollout.wave`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.status.action.phase`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Done",type=boolean,JSONPath=`.status.done`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PromotionTarget struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the target.
	// +required
	Spec PromotionTargetSpec `json:"spec"`

	// status is the target's progress.
	// +optional
	Status PromotionTargetStatus `json:"status,omitempty"`
}

// PromotionTargetList is a list of PromotionTargets.
//
// +kubebuilder:object:root=true
type PromotionTargetList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the PromotionTargets.
	Items []PromotionTarget `json:"items"`
}

// Key is the target as spoke/namespace/release.
func (pt *PromotionTarget) Key() string {
	return pt.Spec.Spoke + "/" + pt.Spec.Namespace + "/" + pt.Spec.Release
}

// Of reports whether pt is pr's target as the hub made it: it names pr,
// pr is its controller, and its name is the one the hub gives that target
// (PromotionTargetName). Readers skip any other object that carries pr's
// label, e.g. one left by an earlier Promotion of the same name until the
// garbage collector deletes it.
func (pt *PromotionTarget) Of(pr *Promotion) bool {
	return pt != nil && pr != nil && pt.Spec.Promotion == pr.Name && metav1.IsControlledBy(pt, pr) &&
		pt.Name == PromotionTargetName(pr.Name, pt.Spec.Spoke, pt.Spec.Namespace, pt.Spec.Release)
}

// PromotionTargetName is the name of the PromotionTarget of promotion's
// target (spoke, namespace, release): the Promotion's name, cut so that
// the whole stays a DNS subdomain of at most 253 characters, and a hash
// of the target. The same target always gets the same name, so a hub
// that restarts, or a second replica, never creates two.
func PromotionTargetName(promotion, spoke, namespace, release string) string {
	sum := sha256.Sum256([]byte(spoke + "/" + namespace + "/" + release))
	h := hex.EncodeToString(sum[:8])
	prefix := promotion
	if len(prefix) > 253-len(h)-1 {
		prefix = strings.TrimRight(prefix[:253-len(h)-1], ".-")
	}
	return prefix + "-" + h
}

// PromotionLabelValue is the value of LabelPromotion for the Promotion
// named promotion: the name itself when it is a valid label value (at
// most 63 characters), else "h-" and a hash of it.
func PromotionLabelValue(promotion string) string {
	if len(validation.IsValidLabelValue(promotion)) == 0 {
		return promotion
	}
	sum := sha256.Sum256([]byte(promotion))
	return "h-" + hex.EncodeToString(sum[:16])
}
