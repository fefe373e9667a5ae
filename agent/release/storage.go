package release

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Helm v3's storage conventions (helm.sh/helm/v3/pkg/storage and
// pkg/storage/driver).
const (
	// SecretType is the type of the Secrets Helm's secret driver writes.
	SecretType corev1.SecretType = "helm.sh/release.v1" //nolint:gosec // G101: a Secret type name, not a credential
	// StorageNamePrefix starts the name of every storage object:
	// "sh.helm.release.v1.<release>.v<revision>".
	StorageNamePrefix = "sh.helm.release.v1."
	// OwnerLabel is the label Helm sets to OwnerValue on its storage objects.
	OwnerLabel = "owner"
	// OwnerValue is the value of OwnerLabel on Helm's storage objects.
	OwnerValue = "helm"
	// DataKey is the key holding the encoded release, in .data of both
	// drivers.
	DataKey = "release"
)

// StorageName returns the name Helm gives the storage object of a release
// revision, e.g. StorageName("web", 7) is "sh.helm.release.v1.web.v7".
func StorageName(release string, revision int) string {
	return StorageNamePrefix + release + ".v" + strconv.Itoa(revision)
}

// ParseStorageName splits a storage object name such as
// "sh.helm.release.v1.web.v7" into the release name ("web") and the revision
// (7). Release names may contain dots; the revision is the part after the
// last ".v". ok is false for any other name.
func ParseStorageName(name string) (release string, revision int, ok bool) {
	rest, found := strings.CutPrefix(name, StorageNamePrefix)
	if !found {
		return "", 0, false
	}
	i := strings.LastIndex(rest, ".v")
	if i <= 0 {
		return "", 0, false
	}
	digits := rest[i+2:]
	if digits == "" || len(digits) > 10 {
		return "", 0, false
	}
	for j := 0; j < len(digits); j++ {
		if digits[j] < '0' || digits[j] > '9' {
			return "", 0, false
		}
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || n > 1<<31-1 {
		return "", 0, false
	}
	return rest[:i], n, true
}

// IsReleaseSecret reports whether obj is a Helm release Secret: type
// helm.sh/release.v1 and label owner=helm. It accepts what informers hand
// to event handlers: a *corev1.Secret, a cache.DeletedFinalStateUnknown
// wrapping one, or a *metav1.PartialObjectMetadata (from a metadata-only
// informer on Secrets), for which the type is not available and the label
// and a storage name (see ParseStorageName) are checked instead. Anything
// else is false.
func IsReleaseSecret(obj any) bool {
	switch o := obj.(type) {
	case *corev1.Secret:
		return o != nil && o.Type == SecretType && o.Labels[OwnerLabel] == OwnerValue
	case *metav1.PartialObjectMetadata:
		return o != nil && (o.Kind == "" || o.Kind == "Secret") && isStorageMeta(&o.ObjectMeta)
	case cache.DeletedFinalStateUnknown:
		return IsReleaseSecret(o.Obj)
	case *cache.DeletedFinalStateUnknown:
		return o != nil && IsReleaseSecret(o.Obj)
	}
	return false
}

// IsReleaseConfigMap reports whether obj is a Helm release ConfigMap (Helm's
// configmap driver): label owner=helm and a storage name (see
// ParseStorageName). It accepts a *corev1.ConfigMap, a
// *metav1.PartialObjectMetadata or a cache.DeletedFinalStateUnknown wrapping
// either; anything else is false.
func IsReleaseConfigMap(obj any) bool {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return o != nil && isStorageMeta(&o.ObjectMeta)
	case *metav1.PartialObjectMetadata:
		return o != nil && (o.Kind == "" || o.Kind == "ConfigMap") && isStorageMeta(&o.ObjectMeta)
	case cache.DeletedFinalStateUnknown:
		return IsReleaseConfigMap(o.Obj)
	case *cache.DeletedFinalStateUnknown:
		return o != nil && IsReleaseConfigMap(o.Obj)
	}
	return false
}

func isStorageMeta(m *metav1.ObjectMeta) bool {
	if m.Labels[OwnerLabel] != OwnerValue {
		return false
	}
	_, _, ok := ParseStorageName(m.Name)
	return ok
}
