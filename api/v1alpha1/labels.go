package v1alpha1

// Labels tugboat puts on objects, declared once: the hub's ReleaseHistories
// and key Secrets, and the objects a release owns on a spoke (the agent's
// admission webhook and backfill).
const (
	// LabelSpoke names the Spoke a ReleaseHistory's release runs on, and the
	// Spoke a generated key Secret belongs to.
	LabelSpoke = "tugboat.dev/spoke"
	// LabelRelease is a Helm release's name: on a ReleaseHistory, and on
	// every object the release owns on a spoke.
	LabelRelease = "tugboat.dev/release"
	// LabelReleaseNamespace is the release's namespace (where Helm stores
	// it), next to LabelRelease.
	LabelReleaseNamespace = "tugboat.dev/release-namespace"
)
