package actions_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/e2e/harness"
)

// cluster is the hub's real API server (etcd and kube-apiserver, with the
// tugboat CRDs); hubURL is the receiver of the hub that runs in-process
// against it for the whole package.
var (
	cluster *harness.Cluster
	hubURL  string
	// stopHub stops the running hub (restartHub starts another).
	stopHub func()
)

// pollTimeout is the hub's long-poll timeout in these tests.
const pollTimeout = 10 * time.Second

// previewTimeout is how long a Promotion waits for its preview here.
const previewTimeout = 4 * time.Second

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	opts := harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true}
	os.Exit(harness.Main(opts, func(c *harness.Cluster) int {
		cluster = c
		stop, err := startHub()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		stopHub = stop
		defer func() { stopHub() }()
		return m.Run()
	}))
}

// restartHub starts a new hub after stopHub stopped the last one, as a
// hub process that restarts: nothing but the API server's state carries
// over.
func restartHub(t *testing.T) {
	t.Helper()
	stop, err := startHub()
	if err != nil {
		t.Fatal(err)
	}
	stopHub = stop
	// Until its receiver listens, an agent's requests are refused.
	NewWithT(t).Eventually(func() error {
		c, err := net.Dial("tcp", strings.TrimPrefix(hubURL, "http://"))
		if err == nil {
			_ = c.Close()
		}
		return err
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
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
	// restartHub runs a second hub in the process.
	opts.SkipControllerNameValidation = true
	opts.Receiver.BindAddress = addr
	opts.Receiver.ActionPollTimeout = pollTimeout
	opts.Promotion.PreviewTimeout = previewTimeout
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
