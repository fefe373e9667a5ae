package release

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	rspb "helm.sh/helm/v3/pkg/release"

	"tugboat.dev/tugboat/api/wire"
)

// Release is one revision of a Helm release, as decoded from its storage
// object.
type Release struct {
	// Namespace is the release's namespace (where its objects go). Flux may
	// store a release elsewhere; see StorageNamespace.
	Namespace string
	// Name is the release name.
	Name string
	// Revision is the Helm revision (1 or more).
	Revision int
	// StorageNamespace is the namespace of the Secret or ConfigMap the
	// revision was decoded from.
	StorageNamespace string
	// StorageName is the name of that object, e.g. sh.helm.release.v1.web.v7.
	StorageName string
	// StorageUID is that object's UID. It tells apart two occurrences of
	// the same revision number: an uninstall and a reinstall both make a
	// revision 1, each stored in a new object.
	StorageUID string
	// Chart is the chart's name.
	Chart string
	// ChartVersion is the chart's version.
	ChartVersion string
	// AppVersion is the chart's appVersion, if any.
	AppVersion string
	// Status is the revision's Helm status.
	Status wire.ReleaseStatus
	// FirstDeployed is when the release was first installed.
	FirstDeployed time.Time
	// LastDeployed is when this revision was deployed.
	LastDeployed time.Time
	// Description is Helm's log line for the revision, e.g. "Upgrade
	// complete" or the error that failed it.
	Description string
	// ValuesDigest is "sha256:<hex>" of the user-supplied values (the
	// release's .config) as canonical JSON: encoding/json's output, with
	// object keys sorted and numbers as Helm stored them. No values hash as
	// "{}".
	ValuesDigest string
	// ManifestDigest is "sha256:<hex>" of the rendered manifest's bytes.
	ManifestDigest string
	// Manifest is the rendered manifest (multi-document YAML), for ownership
	// backfill. Hooks are not part of it.
	Manifest string
}

// Key identifies a release: its namespace and name.
type Key struct {
	// Namespace is the release's namespace.
	Namespace string
	// Name is the release name.
	Name string
}

// String returns "namespace/name".
func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Key returns the release's namespace and name.
func (r *Release) Key() Key { return Key{Namespace: r.Namespace, Name: r.Name} }

// State returns the revision as the wire protocol reports it. Health is
// wire.HealthUnknown and HealthReason and HelmRelease are empty: the caller,
// who follows the release's workloads and knows its Flux HelmRelease, fills
// them in.
func (r *Release) State() wire.ReleaseState {
	return wire.ReleaseState{
		Namespace:      r.Namespace,
		Release:        r.Name,
		Chart:          r.Chart,
		ChartVersion:   r.ChartVersion,
		AppVersion:     r.AppVersion,
		Revision:       r.Revision,
		Status:         r.Status,
		Health:         wire.HealthUnknown,
		ValuesDigest:   r.ValuesDigest,
		ManifestDigest: r.ManifestDigest,
		FirstDeployed:  r.FirstDeployed,
		LastDeployed:   r.LastDeployed,
		ReleaseUID:     r.StorageUID,
	}
}

// WireStatus maps a Helm release status onto the wire's. Every status Helm v3
// records maps to itself; anything else (an empty or future status) is
// wire.StatusUnknown.
func WireStatus(s rspb.Status) wire.ReleaseStatus {
	switch s {
	case rspb.StatusDeployed:
		return wire.StatusDeployed
	case rspb.StatusUninstalled:
		return wire.StatusUninstalled
	case rspb.StatusSuperseded:
		return wire.StatusSuperseded
	case rspb.StatusFailed:
		return wire.StatusFailed
	case rspb.StatusUninstalling:
		return wire.StatusUninstalling
	case rspb.StatusPendingInstall:
		return wire.StatusPendingInstall
	case rspb.StatusPendingUpgrade:
		return wire.StatusPendingUpgrade
	case rspb.StatusPendingRollback:
		return wire.StatusPendingRollback
	default:
		return wire.StatusUnknown
	}
}

// fromHelm builds a Release from Helm's, taking the release name and revision
// from the storage object's name when the JSON lacks them.
func fromHelm(rls *rspb.Release, storageNamespace, storageName string) (*Release, *stageError) {
	r := &Release{
		Namespace:        rls.Namespace,
		Name:             rls.Name,
		Revision:         rls.Version,
		StorageNamespace: storageNamespace,
		StorageName:      storageName,
		Status:           wire.StatusUnknown,
		Manifest:         rls.Manifest,
	}
	if name, rev, ok := ParseStorageName(storageName); ok {
		if r.Name == "" {
			r.Name = name
		}
		if r.Revision == 0 {
			r.Revision = rev
		}
	}
	if r.Namespace == "" {
		r.Namespace = storageNamespace
	}
	switch {
	case r.Name == "":
		return nil, failf(StageMissing, "release has no name")
	case r.Revision < 1 || r.Revision > wire.MaxRevision:
		return nil, failf(StageMissing, "release has no valid revision (got %d)", r.Revision)
	case rls.Chart == nil || rls.Chart.Metadata == nil || rls.Chart.Metadata.Name == "" || rls.Chart.Metadata.Version == "":
		return nil, failf(StageMissing, "release has no chart name and version")
	}
	md := rls.Chart.Metadata
	r.Chart, r.ChartVersion, r.AppVersion = md.Name, md.Version, md.AppVersion
	if rls.Info != nil {
		r.Status = WireStatus(rls.Info.Status)
		r.FirstDeployed = rls.Info.FirstDeployed.Time
		r.LastDeployed = rls.Info.LastDeployed.Time
		r.Description = rls.Info.Description
	}
	var err error
	if r.ValuesDigest, err = valuesDigest(rls.Config); err != nil {
		return nil, fail(StageJSON, err)
	}
	r.ManifestDigest = sha256Digest([]byte(rls.Manifest))
	return r, nil
}

// valuesDigest hashes the canonical JSON of a release's user-supplied values.
func valuesDigest(config map[string]any) (string, error) {
	if config == nil {
		config = map[string]any{}
	}
	b, err := json.Marshal(config)
	if err != nil {
		return "", errors.New("re-encoding the values: " + err.Error())
	}
	return sha256Digest(b), nil
}

// sha256Digest returns "sha256:<64 lowercase hex>", the form the wire
// protocol accepts for digests.
func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
