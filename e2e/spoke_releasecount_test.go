package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/agent"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// TestAgentToHub_spokeReleaseCountFollowsInstallAndUninstallAtOnce: the
// Spoke's status.releaseCount (`tugboat spoke list` RELEASES, `kubectl get
// spokes`) used to change only at the agent's next periodic state post, so
// a fresh `helm install` showed 0 for up to the state interval. With a
// state interval of an hour, only the state post the agent makes when a
// release appears or goes can move the count: it follows an install and an
// uninstall within seconds.
func TestAgentToHub_spokeReleaseCountFollowsInstallAndUninstallAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hubCluster, spokes := startClusters(t, 1)
	f := newFleet(t, hubCluster)
	key := f.registerSpoke("spoke-count")
	keyFile := filepath.Join(t.TempDir(), "spoke-count.key")
	g.Expect(os.WriteFile(keyFile, key, 0o600)).To(Succeed())
	f.agentWith("spoke-count", f.agentConfig(spokes[0]), keyFile, testr.New(t), func(o *agent.Options) {
		o.Reporter.StateInterval = time.Hour
	})

	spoke := func(g Gomega) *tugboatv1alpha1.Spoke {
		var sp tugboatv1alpha1.Spoke
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "spoke-count"}, &sp)).To(Succeed())
		return &sp
	}
	var first time.Time
	g.Eventually(func(g Gomega) {
		sp := spoke(g)
		g.Expect(apimeta.IsStatusConditionTrue(sp.Status.Conditions, "Ready")).To(BeTrue())
		g.Expect(sp.Status.LastSeen).NotTo(BeNil())
		first = sp.Status.LastSeen.Time
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(spoke(g).Status.ReleaseCount).To(BeZero())

	helm := newHelm(t, spokes[0], "apps")
	helm.install("web", "1.0.0")
	g.Eventually(func(g Gomega) int32 { return spoke(g).Status.ReleaseCount }).
		WithTimeout(15*time.Second).WithPolling(100*time.Millisecond).Should(Equal(int32(1)), "the count after helm install")
	g.Expect(spoke(g).Status.LastSeen.Time).NotTo(BeTemporally("<", first), "a new state post, not the one at start")

	helm.install("api", "1.0.0")
	g.Eventually(func(g Gomega) int32 { return spoke(g).Status.ReleaseCount }).
		WithTimeout(15*time.Second).WithPolling(100*time.Millisecond).Should(Equal(int32(2)), "the count after a second install")

	helm.uninstall("web")
	g.Eventually(func(g Gomega) int32 { return spoke(g).Status.ReleaseCount }).
		WithTimeout(15*time.Second).WithPolling(100*time.Millisecond).Should(Equal(int32(1)), "the count after helm uninstall")
}
