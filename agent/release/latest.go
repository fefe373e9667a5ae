package release

import "tugboat.dev/tugboat/api/wire"

// Latest picks the current revision of each release, as `helm status` and
// `helm upgrade` do: the highest revision. Two objects holding the same
// revision (the secret and configmap drivers both used, or a copy in
// another storage namespace) are told apart by status, deployed first and
// superseded last, then by the later LastDeployed, then by storage location,
// so the answer does not depend on the order of releases. Nil entries are
// skipped.
func Latest(releases []*Release) map[Key]*Release {
	out := make(map[Key]*Release)
	for _, r := range releases {
		if r == nil {
			continue
		}
		k := r.Key()
		if cur, ok := out[k]; !ok || newer(r, cur) {
			out[k] = r
		}
	}
	return out
}

// newer reports whether a is more current than b (same release).
func newer(a, b *Release) bool {
	if a.Revision != b.Revision {
		return a.Revision > b.Revision
	}
	if ra, rb := statusRank(a.Status), statusRank(b.Status); ra != rb {
		return ra > rb
	}
	if !a.LastDeployed.Equal(b.LastDeployed) {
		return a.LastDeployed.After(b.LastDeployed)
	}
	if a.StorageNamespace != b.StorageNamespace {
		return a.StorageNamespace < b.StorageNamespace
	}
	return a.StorageName < b.StorageName
}

// statusRank orders statuses for a tie on revision: deployed is the live
// record, superseded a stale one, everything else in between.
func statusRank(s wire.ReleaseStatus) int {
	switch s {
	case wire.StatusDeployed:
		return 3
	case wire.StatusSuperseded:
		return 1
	case wire.StatusUnknown:
		return 0
	default:
		return 2
	}
}
