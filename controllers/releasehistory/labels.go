package releasehistory

// Every ReleaseHistory carries the labels tugboatv1alpha1.LabelSpoke,
// tugboatv1alpha1.LabelRelease and tugboatv1alpha1.LabelReleaseNamespace, so the hub can list a spoke's
// releases without reading them all.
const (
	// SpokeNameIndex is the cache field index of Spokes by name (Spoke names
	// are unique across the hub).
	SpokeNameIndex = "tugboat.dev/spoke-name"
	// HistorySpokeIndex is the cache field index of ReleaseHistories by
	// their tugboatv1alpha1.LabelSpoke: a state snapshot lists its spoke's histories, and a
	// label selector would scan every history of the namespace.
	HistorySpokeIndex = "tugboat.dev/history-spoke"
)
