package actions_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/controllers/hub"
	"tugboat.dev/tugboat/e2e/harness"
)

// cluster is the hub's real API server (etcd and kube-apiserver, with the
// tugboat CRDs); hubURL is the receiver of the hub that runs in-process
// against it for the whole package.
var (
	cluster *harness.Cluster
	hubURL  string
)

// pollTimeout is the hub's long-poll timeout in these tests.
const pollTimeout = 10 * time.Second

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	var err error
	cluster, err = harness.Start(context.Background(), harness.Options{
		Name: "hub", ControlPlaneOnly: true, CRDPaths: []string{"../../../config/crd/bases"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop, err := startHub()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = cluster.Stop()
		return 1
	}
	code := m.Run()
	stop()
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

// startHub runs the whole hub (receiver, recorder, Spoke, Pipeline and
// Promotion reconcilers, with the default strategies) in-process.
func startHub() (stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	opts := hub.NewOptions()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress, opts.LeaderElection = "0", "0", false
	opts.Receiver.BindAddress = addr
	opts.Receiver.ActionPollTimeout = pollTimeout
	ctx, cancel := context.WithCancel(context.Background())
	h, err := hub.New(ctx, cluster.RESTConfig, opts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("assembling the hub: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := h.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "hub stopped: %v\n", err)
		}
	}()
	hubURL = "http://" + addr
	return func() { cancel(); <-done }, nil
}
