//go:build !agentonly

package app_test

import (
	"context"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
)

// startRealHub runs the whole hub (receiver and reconcilers) in-process
// against the test's API server until the returned stop is called (or the
// test ends).
func startRealHub(t *testing.T) (stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	opts := hub.NewOptions()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress, opts.LeaderElection = "0", "0", false
	opts.Receiver.BindAddress = addr
	opts.SkipControllerNameValidation = true
	ctx, cancel := context.WithCancel(context.Background())
	h, err := hub.New(ctx, cluster.RESTConfig, opts)
	if err != nil {
		cancel()
		t.Fatalf("assembling the hub: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := h.Start(ctx); err != nil {
			t.Logf("hub stopped: %v", err)
		}
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestDoctor_readsWhatTheRealHubWrites injects faults for the real hub's
// controllers to judge (a key Secret with a key too short, a Pipeline
// naming Spokes that do not exist), then stops the hub: doctor reports
// each from what the hub wrote, and the hub not running once it is gone.
func TestDoctor_readsWhatTheRealHubWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	withCLIVersion(t, "v0.3.0")
	ns := newNamespace(t)
	stop := startRealHub(t)

	// A bad key Secret: 5 bytes where the receiver needs 32.
	g.Expect(cluster.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-9-key"},
		Data: map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: []byte("short")}})).To(Succeed())
	sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-9"},
		Spec: tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: "edge-9-key"}}}
	g.Expect(cluster.Client.Create(ctx, sp)).To(Succeed())
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), sp) })
	// A Pipeline whose targets name Spokes never registered.
	p := newPipeline(t, ns, "web")

	var findings []app.Finding
	g.Eventually(func(g Gomega) {
		var err error
		findings, err = doctorJSON(t, cluster.KubeconfigPath, "-n", ns)
		g.Expect(err).To(MatchError(ContainSubstring("doctor found ")))
		g.Expect(findings).To(ContainElement(And(HaveField("Code", BeEquivalentTo("spoke-invalid-key")), HaveField("Object", ns+"/edge-9"),
			HaveField("Hint", ContainSubstring("put keys of at least 32 bytes")))))
		g.Expect(findings).To(ContainElement(And(HaveField("Code", BeEquivalentTo("pipeline-target-not-found")), HaveField("Object", ns+"/web"),
			HaveField("Message", ContainSubstring("spoke dev-1 is not registered in namespace "+ns)))))
		g.Expect(findings).To(ContainElement(HaveField("Code", BeEquivalentTo("hub-controllers-ok"))))
	}).WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "%+v", findings)
	g.Expect(findings).To(ContainElement(HaveField("Code", BeEquivalentTo("hub-never-reported"))))
	g.Expect(findings).NotTo(ContainElement(HaveField("Code", BeEquivalentTo("pipeline-unknown-spoke"))),
		"the hub reconciled the Pipeline: its TargetNotFound says it")

	// The hub stops; both objects change: nothing reconciles them.
	stop()
	g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
	sp.Spec.Suspend = true
	g.Expect(cluster.Client.Update(ctx, sp)).To(Succeed())
	g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
	p.Spec.Suspend = true
	g.Expect(cluster.Client.Update(ctx, p)).To(Succeed())
	findings, err := doctorJSON(t, cluster.KubeconfigPath, "-n", ns, "--reconcile-grace", "0s")
	g.Expect(err).To(MatchError(ContainSubstring("doctor found ")))
	g.Expect(findings).To(ContainElement(And(HaveField("Code", BeEquivalentTo("hub-controllers-not-reconciling")), HaveField("Severity", BeEquivalentTo("error")),
		HaveField("Message", "the hub's controllers are not reconciling: none of 2 Spokes and Pipelines has status.observedGeneration up to its generation"))))
	// The hub's view of the Pipeline is outdated: doctor checks its targets.
	g.Expect(findings).To(ContainElement(And(HaveField("Code", BeEquivalentTo("pipeline-unknown-spoke")),
		HaveField("Message", "environment dev targets Spoke dev-1, not registered in namespace "+ns))))
}
