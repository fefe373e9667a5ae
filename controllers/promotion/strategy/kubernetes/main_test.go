package kubernetes

import (
	"context"
	"fmt"
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
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	var err error
	cluster, err = harness.Start(context.Background(), harness.Options{
		Name: "spoke", ControlPlaneOnly: true, CRDPaths: []string{"testdata/crds"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "cluster logs: %s\n", cluster.LogDir)
		_ = cluster.StopKeepLogs()
		return code
	}
	if err := cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}
