package releasehistory_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/controllers/releasehistory"
	"tugboat.dev/tugboat/e2e/harness"
)

// A decisive event (a release turning Current or Failed: what a Pipeline
// decides on) is written without waiting for the write interval after the
// previous write of its history; another event waits for it. Here the
// interval is an hour: the decisive batch is recorded, the other is not
// (issue 18: no fixed delay on the path to a promotion).
func TestRecorder_decisiveEventsDoNotWaitForTheWriteInterval(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(hub.RESTConfig, ctrl.Options{Scheme: harness.DefaultScheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	g.Expect(err).NotTo(HaveOccurred())
	opts := releasehistory.NewOptions()
	opts.WriteInterval = time.Hour
	opts.HeartbeatRefresh = heartbeatRefresh
	slow := releasehistory.NewRecorder(mgr.GetClient(), mgr.GetAPIReader(), opts)
	g.Expect(slow.SetupWithManager(ctx, mgr)).To(Succeed())
	go func() { _ = mgr.Start(ctx) }()

	sp := newSpoke(t, g, "decisive")
	g.Eventually(func() error { _, err := slow.SpokeKeys(ctx, sp.Name); return err }).WithTimeout(10 * time.Second).Should(Succeed())
	record := func(events ...wire.Event) chan error {
		done := make(chan error, 1)
		go func() { done <- slow.RecordEvents(ctx, ingest.Spoke{Name: sp.Name}, events) }()
		return done
	}
	// The first write of the history has no previous write to wait for.
	g.Eventually(record(releaseEvent(sp.Name, releaseState(1, "1.0.0", wire.StatusDeployed, wire.HealthInProgress), 1, "InstallSucceeded"))).
		WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	// Not decisive (still in progress): it waits for the hour.
	waiting := record(releaseEvent(sp.Name, releaseState(1, "1.0.0", wire.StatusDeployed, wire.HealthInProgress), 2, "Progressing"))
	g.Consistently(waiting).WithTimeout(2 * time.Second).ShouldNot(Receive())
	// Decisive: the rollout completed.
	g.Eventually(record(releaseEvent(sp.Name, releaseState(1, "1.0.0", wire.StatusDeployed, wire.HealthCurrent), 3, "RolloutComplete"))).
		WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	g.Expect(getHistory(g, sp, "web").Status.Current.Health).To(BeEquivalentTo(wire.HealthCurrent))
	// The waiting op, queued before it, was written with it (one write
	// applies every queued op of the history).
	g.Eventually(waiting).WithTimeout(5 * time.Second).Should(Receive(BeNil()))
}
