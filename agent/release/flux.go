package release

import (
	"crypto/sha256"
	"encoding/hex"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
)

// maxReleaseNameLength is the longest release name Helm accepts.
const maxReleaseNameLength = 53

// HelmReleaseTarget returns where a Flux HelmRelease keeps its Helm release:
// the namespace of the storage Secrets and the release name.
//
// When the HelmRelease's status records a release (status.history), that
// record wins: it is what helm-controller actually installed, even if the
// spec changed since. Otherwise the names are derived from the spec the way
// helm-controller derives them: the storage namespace is
// spec.storageNamespace, else the HelmRelease's namespace; the release name
// is spec.releaseName, else "[spec.targetNamespace-]metadata.name",
// shortened to 53 characters with a hash suffix when longer (see
// ShortenReleaseName). hr is not modified.
func HelmReleaseTarget(hr *helmv2.HelmRelease) (storageNamespace, releaseName string) {
	if hr == nil {
		return "", ""
	}
	storageNamespace = hr.GetStorageNamespace()
	if hr.Status.StorageNamespace != "" {
		storageNamespace = hr.Status.StorageNamespace
	}
	// Snapshots.Latest sorts in place: sort a copy, not the caller's status.
	history := append(helmv2.Snapshots(nil), hr.Status.History...)
	for i := len(history) - 1; i >= 0; i-- { // drop nil entries, which Latest cannot sort
		if history[i] == nil {
			history = append(history[:i], history[i+1:]...)
		}
	}
	if latest := history.Latest(); latest != nil && latest.Name != "" {
		return storageNamespace, latest.Name
	}
	return storageNamespace, ShortenReleaseName(hr.GetReleaseName())
}

// ShortenReleaseName returns name unchanged when it is at most 53 characters
// long, and otherwise its first 40 characters, "-" and the first 12 hex
// digits of its SHA-256: what helm-controller does to a release name derived
// from a long HelmRelease name (internal/release.ShortenName).
func ShortenReleaseName(name string) string {
	if len(name) <= maxReleaseNameLength {
		return name
	}
	const hashLength = 12
	sum := sha256.Sum256([]byte(name))
	return name[:maxReleaseNameLength-hashLength-1] + "-" + hex.EncodeToString(sum[:])[:hashLength]
}
