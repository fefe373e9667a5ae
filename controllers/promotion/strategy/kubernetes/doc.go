// Package kubernetes is the kubernetes promotion strategy: it sets
// spec.chart.spec.version on each destination target's Flux HelmRelease by
// server-side apply, through the Spoke's kubeconfig (see spokeaccess), and
// leaves the upgrade to the spoke's helm-controller.
//
// The apply is made by field manager "tugboat" and carries only
// spec.chart.spec.version and the annotation tugboat.dev/promotion, so
// tugboat owns those two fields and nothing else; ownership is forced, so a
// previous owner of the version (a person with kubectl, an earlier apply) is
// overridden. A GitOps tool that applies the HelmRelease from git with force
// will set the version back: promote through git (pullRequest) there.
//
// It never creates a HelmRelease: it reads the object first and applies with
// its UID as a precondition, so an object deleted in between is not
// recreated (an apply carrying a resourceVersion would be: the API server
// ignores it on create). HelmReleases that take their chart from spec.chartRef (an
// OCIRepository or HelmChart) have no spec.chart.spec.version to set and are
// refused.
//
// Promote is idempotent: a HelmRelease already at the version with this
// Promotion's annotation is left untouched (no write, no new
// resourceVersion).
package kubernetes
