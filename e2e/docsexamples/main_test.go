package docsexamples

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/config"
	"tugboat.dev/tugboat/e2e/harness"
)

// docsDir is the repository's docs/, from this package's directory.
const docsDir = "../../docs"

// cluster is one API server (etcd and kube-apiserver) with the tugboat.dev
// CRDs the hub chart ships and the Flux CRDs the docs' examples use
// (HelmRelease; notification-controller's Provider and Alert).
var cluster *harness.Cluster

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(harness.Main(harness.Options{
		Name:             "docs",
		ControlPlaneOnly: true,
		CRDPaths:         []string{"../testdata/crds/flux", "../testdata/crds/notification-controller"},
	}, func(c *harness.Cluster) int {
		cluster = c
		if err := installTugboatCRDs(c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}))
}

// installTugboatCRDs installs the CRDs embedded in the binary (config.CRDs),
// the ones `tugboat install hub` installs.
func installTugboatCRDs(c *harness.Cluster) error {
	files, err := config.CRDs()
	if err != nil {
		return err
	}
	crds, err := harness.ReadCRDFiles(files)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return harness.Install(ctx, c.Client, crds)
}
