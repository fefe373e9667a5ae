package ownership

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// The agent labels every object a release owns with
// tugboatv1alpha1.LabelRelease (the release name) and tugboatv1alpha1.LabelReleaseNamespace
// (where Helm stores the release).
const (
	// AnnotationHelmReleaseName is the annotation Helm puts on every object
	// it renders, naming the release.
	AnnotationHelmReleaseName = "meta.helm.sh/release-name"
	// AnnotationHelmReleaseNamespace is the annotation Helm puts on every
	// object it renders, naming the release's namespace.
	AnnotationHelmReleaseNamespace = "meta.helm.sh/release-namespace"
)

// Release identifies a Helm release: its name and the namespace Helm stores
// it in.
type Release struct {
	// Name is the release name.
	Name string
	// Namespace is the namespace of the release (not necessarily of the
	// object).
	Namespace string
}

// IsZero reports whether r identifies no release.
func (r Release) IsZero() bool { return r.Name == "" && r.Namespace == "" }

// String returns namespace/name.
func (r Release) String() string { return r.Namespace + "/" + r.Name }

// valid reports whether both parts can be label values, so that labeling an
// object with them never makes the object invalid.
func (r Release) valid() bool {
	return r.Name != "" && r.Namespace != "" &&
		len(validation.IsValidLabelValue(r.Name)) == 0 &&
		len(validation.IsValidLabelValue(r.Namespace)) == 0
}

// Labels returns the two tracking labels for r.
func (r Release) Labels() map[string]string {
	return map[string]string{tugboatv1alpha1.LabelRelease: r.Name, tugboatv1alpha1.LabelReleaseNamespace: r.Namespace}
}

// HelmRelease returns the release named by Helm's annotations, if both are
// present and usable as label values.
func HelmRelease(annotations map[string]string) (Release, bool) {
	r := Release{Name: annotations[AnnotationHelmReleaseName], Namespace: annotations[AnnotationHelmReleaseNamespace]}
	return r, r.valid()
}

// LabeledRelease returns the release named by the tracking labels, if both
// are present and valid.
func LabeledRelease(labels map[string]string) (Release, bool) {
	r := Release{Name: labels[tugboatv1alpha1.LabelRelease], Namespace: labels[tugboatv1alpha1.LabelReleaseNamespace]}
	return r, r.valid()
}

// ReleaseFrom returns the release an object declares itself: Helm's
// annotations win over the tracking labels, since Helm rewrites them when a
// release adopts the object.
func ReleaseFrom(labels, annotations map[string]string) (Release, bool) {
	if r, ok := HelmRelease(annotations); ok {
		return r, true
	}
	return LabeledRelease(labels)
}

// ReleaseOf is ReleaseFrom for an object.
func ReleaseOf(obj metav1.Object) (Release, bool) {
	return ReleaseFrom(obj.GetLabels(), obj.GetAnnotations())
}

// HasLabels reports whether labels already carry r's tracking labels.
func HasLabels(labels map[string]string, r Release) bool {
	return labels[tugboatv1alpha1.LabelRelease] == r.Name && labels[tugboatv1alpha1.LabelReleaseNamespace] == r.Namespace
}
