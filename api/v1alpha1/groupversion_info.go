package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "tugboat.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers every kind of the package and its list.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Spoke{}, &SpokeList{},
		&ReleaseHistory{}, &ReleaseHistoryList{},
		&Pipeline{}, &PipelineList{},
		&Promotion{}, &PromotionList{},
		&PromotionTarget{}, &PromotionTargetList{},
		&PromotionPreview{}, &PromotionPreviewList{},
		&SpokeClass{}, &SpokeClassList{},
		&Lifecycle{}, &LifecycleList{},
		&LifecycleEvent{}, &LifecycleEventList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
