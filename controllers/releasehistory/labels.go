package releasehistory

// Labels on every ReleaseHistory, so the hub can list a spoke's releases
// without reading them all.
const (
	// LabelSpoke is the name of the Spoke the release runs on.
	LabelSpoke = "tugboat.dev/spoke"
	// LabelRelease is the Helm release name.
	LabelRelease = "tugboat.dev/release"
	// LabelReleaseNamespace is the release's namespace on the spoke.
	LabelReleaseNamespace = "tugboat.dev/release-namespace"

	// SpokeNameIndex is the cache field index of Spokes by name (Spoke names
	// are unique across the hub).
	SpokeNameIndex = "tugboat.dev/spoke-name"
	// HistorySpokeIndex is the cache field index of ReleaseHistories by
	// their LabelSpoke: a state snapshot lists its spoke's histories, and a
	// label selector would scan every history of the namespace.
	HistorySpokeIndex = "tugboat.dev/history-spoke"
)
