// Package hubtest runs a real hub in-process for tests: the receiver,
// recorder and controllers of cmd/tugboat/app/hub against a test API server.
//
// It is a test helper: tugboat itself does not use it.
package hubtest

import (
	"context"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
)

// Options returns the hub's defaults for a test: no metrics or probe
// endpoints, no leader election, the receiver on a free loopback port, and
// controller names not checked for uniqueness (tests run several hubs in
// one process), and loopback destinations allowed.
func Options() hub.Options {
	opts := hub.NewOptions()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress, opts.LeaderElection = "0", "0", false
	opts.Receiver.BindAddress = "127.0.0.1:0"
	opts.SkipControllerNameValidation = true
	// Every destination of a test (webhooks, Slack and Flux stand-ins)
	// listens on loopback.
	opts.Egress.AllowLoopback = true
	// The tests' Gitea serves git over plain http on loopback.
	opts.PullRequestAllowHTTP = true
	return opts
}

// Start assembles the hub with opts against the API server cfg reaches and
// runs it until the returned stop is called or the test ends. An error
// from the running hub fails the test unless stop caused it.
func Start(t testing.TB, cfg *rest.Config, opts hub.Options) (*hub.Hub, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h, err := hub.New(ctx, cfg, opts)
	if err != nil {
		cancel()
		t.Fatalf("assembling the hub: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := h.Start(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("hub stopped: %v", err)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return h, stop
}
