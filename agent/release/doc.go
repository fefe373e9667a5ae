// Package release decodes Helm's release storage (the Secrets and ConfigMaps
// that `helm install/upgrade` and Flux's helm-controller write) into the small
// model tugboat reports: chart, version, revision, status, timestamps and
// digests of the values and the rendered manifest.
//
// A Helm v3 storage object holds, under the key "release", the standard
// base64 encoding of (optionally gzip-compressed) JSON of
// helm.sh/helm/v3/pkg/release.Release. DecodeSecret and DecodeConfigMap undo
// that with hard limits on the encoded and the decompressed size, so a
// hostile or corrupt object (a gzip bomb, garbage) yields a *DecodeError
// naming the object and the stage that failed, never a panic or an
// out-of-memory kill.
//
// The package also names things the way Helm and Flux do: ParseStorageName
// splits "sh.helm.release.v1.<release>.v<revision>", Latest picks the
// current revision of each release as `helm status` does, and
// HelmReleaseTarget says where a Flux HelmRelease keeps its Helm storage.
//
// It is not an informer, a cache or a Helm client: it reads objects it is
// given and never talks to an API server. Health (are the release's
// workloads rolled out?) lives in agent/health; which objects a release owns
// lives with the ownership tracker.
package release
