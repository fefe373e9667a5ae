//go:build !agentonly

package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app"
)

// status --watch prints the status, then again after each change made
// while it watches (appended, stdout not being a terminal), and returns
// nil when its context ends.
func TestStatusWatch_printsEveryChange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	reportedPipeline(t, ns)

	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out syncBuffer
	cmd := app.NewRootCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"status", "--watch", "-n", ns, "--kubeconfig", cluster.KubeconfigPath})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(watchCtx) }()

	g.Eventually(out.String, 20*time.Second, 20*time.Millisecond).Should(ContainSubstring("web-production-1.4.0"))
	g.Expect(out.String()).NotTo(ContainSubstring("1.5.0"))

	// A change of a Pipeline's status shows up.
	p := &tugboatv1alpha1.Pipeline{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, p)).To(Succeed())
	p.Status.Environments[0].Versions = []string{"1.5.0"}
	g.Expect(cluster.Client.Status().Update(ctx, p)).To(Succeed())
	g.Eventually(out.String, 20*time.Second, 20*time.Millisecond).Should(ContainSubstring("1.5.0"))

	// So does a new Pipeline.
	newPipeline(t, ns, "api")
	g.Eventually(func() []string { return lineWith(out.String(), "api", "dev") }, 20*time.Second, 20*time.Millisecond).ShouldNot(BeNil())

	// Each print is whole: three of them, the first without a change.
	g.Expect(strings.Count(out.String(), "PIPELINE")).To(Equal(3), out.String())
	first := out.String()[:strings.Index(out.String(), "\n\n")]
	g.Expect(lineWith(first, "web", "dev")).To(Equal([]string{"web", "dev", "1.4.0", "2026-05-01T10:00:00Z", "-", "-"}), first)

	cancel()
	g.Eventually(done, 10*time.Second).Should(Receive(BeNil()))
}
