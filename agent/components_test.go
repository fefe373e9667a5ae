package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"tugboat.dev/tugboat/agent/release"
	"tugboat.dev/tugboat/agent/tracker"
	"tugboat.dev/tugboat/api/wire"
)

type discard struct{}

func (discard) Enqueue(...wire.Event) {}

func realTracker() *tracker.Tracker {
	return tracker.New(tracker.Options{Spoke: "spoke-1"}, discard{},
		func(context.Context, release.Key) ([]*unstructured.Unstructured, error) { return nil, nil })
}

// Issue 13, bug 6: when one component of the agent stops while the agent
// runs, with an error or without, the others are stopped and the error
// names it, so the process ends non-zero and the kubelet restarts it.
func TestRunComponents_oneStoppingStopsTheAgentWithAnError(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		wantErr string
	}{
		{"with an error", errors.New("hub key file unreadable"), "agent component reporter: hub key file unreadable"},
		{"without an error", nil, "agent component reporter: stopped while the agent was running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			trackerStopped := make(chan struct{})
			tr := realTracker()
			done := make(chan error, 1)
			go func() {
				done <- runComponents(context.Background(), testr.New(t),
					component{"tracker", func(ctx context.Context) error {
						defer close(trackerStopped)
						return tr.Start(ctx)
					}},
					component{"reporter", func(context.Context) error { return tc.err }},
				)
			}()
			var err error
			g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&err))
			g.Expect(err).To(MatchError(tc.wantErr))
			g.Expect(trackerStopped).To(BeClosed(), "the tracker was stopped, not left running")
		})
	}
}

// Stopping the agent (its context ends) is not an error.
func TestRunComponents_stopsCleanlyWhenTheAgentStops(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runComponents(ctx, testr.New(t),
			component{"tracker", realTracker().Start},
			component{"action poller", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }})
	}()
	g.Consistently(done).WithTimeout(200 * time.Millisecond).ShouldNot(Receive())
	cancel()
	var err error
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&err))
	g.Expect(err).NotTo(HaveOccurred())
}

// A manager runnable (the webhook server) that returns early, even
// without an error, stops the manager with an error.
func TestMustRun_anEarlyReturnIsAnError(t *testing.T) {
	g := NewWithT(t)
	early := mustRun{name: "webhook server", runnable: runnableFunc(func(context.Context) error { return nil })}
	g.Expect(early.Start(context.Background())).To(MatchError("agent component webhook server: stopped while the agent was running"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.Expect(early.Start(ctx)).To(Succeed(), "returning once stopped is fine")
}

type runnableFunc func(context.Context) error

func (f runnableFunc) Start(ctx context.Context) error { return f(ctx) }

// Wrapped in mustRun, a runnable that returns early stops a real
// controller-runtime manager with its error (the manager alone would keep
// running: it stops only for a runnable's error).
func TestMustRun_stopsTheManager(t *testing.T) {
	g := NewWithT(t)
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 testr.New(t),
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mgr.Add(mustRun{name: "webhook server", runnable: runnableFunc(func(context.Context) error { return nil })})).To(Succeed())
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- mgr.Start(ctx) }()
	var got error
	g.Eventually(done).WithTimeout(30 * time.Second).Should(Receive(&got))
	g.Expect(got).To(MatchError(ContainSubstring("agent component webhook server: stopped while the agent was running")))
}
