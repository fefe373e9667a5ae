package gauges_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/e2e/harness"
)

// hub is a real API server (etcd and kube-apiserver) with tugboat's CRDs.
var hub *harness.Cluster

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(harness.Main(harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true}, func(c *harness.Cluster) int {
		hub = c
		return m.Run()
	}))
}
