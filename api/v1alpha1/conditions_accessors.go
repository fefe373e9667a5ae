package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The conditions accessors of every kind with status.conditions: Flux's
// conditions contract (GetConditions, SetConditions), which its runtime's
// conditions package and patch helper work through. tugboat's reconcilers
// write status through that helper (controllers/statuspatch).

// GetConditions returns the Spoke's status conditions.
func (in *Spoke) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the Spoke's status conditions.
func (in *Spoke) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetConditions returns the SpokeClass's status conditions.
func (in *SpokeClass) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the SpokeClass's status conditions.
func (in *SpokeClass) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetConditions returns the Pipeline's status conditions.
func (in *Pipeline) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the Pipeline's status conditions.
func (in *Pipeline) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetConditions returns the Promotion's status conditions.
func (in *Promotion) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the Promotion's status conditions.
func (in *Promotion) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetConditions returns the Lifecycle's status conditions.
func (in *Lifecycle) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the Lifecycle's status conditions.
func (in *Lifecycle) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetConditions returns the ReleaseHistory's status conditions.
func (in *ReleaseHistory) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the ReleaseHistory's status conditions.
func (in *ReleaseHistory) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }
