package kubernetes

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/e2e/harness"
)

// cluster is one real API server (etcd and kube-apiserver only) with the
// HelmRelease CRD. It plays both sides: the hub, where the Spokes'
// kubeconfig Secrets are stored, and the spoke, whose HelmReleases are
// changed through those kubeconfigs.
var cluster *harness.Cluster

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(harness.Main(harness.Options{Name: "spoke", ControlPlaneOnly: true, CRDPaths: []string{"../../../../e2e/testdata/crds/flux"}}, func(c *harness.Cluster) int {
		cluster = c
		return m.Run()
	}))
}
