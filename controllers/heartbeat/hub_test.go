package heartbeat_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/heartbeat"
	"tugboat.dev/tugboat/controllers/hub/hubtest"
	"tugboat.dev/tugboat/e2e/identity"
)

// TestHub_heartbeatsGoToTheDigestNotToTheSpoke: a real hub, as its
// ServiceAccount, receives a spoke's state snapshots for four heartbeat
// timeouts. They are recorded in the replica's digest; the Spoke's status
// is written a bounded number of times (the first heartbeat, its turning
// Ready), not per heartbeat (before digests: once per half timeout, 8 here),
// and the Spoke stays Ready though its lastSeen grows older than the
// timeout. Then the agent stops: within its timeout (and a digest
// interval) the Spoke is lost, with the AgentLost Event, and lastSeen shows
// when it was last heard.
func TestHub_heartbeatsGoToTheDigestNotToTheSpoke(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "hb-writes")
	sp, key := newSpoke(t, ns, "hb-writes-edge")
	var writes statusWrites
	h, _ := hubtest.Start(t, writes.wrap(identity.HubConfig(cluster.RESTConfig)), hubOptions())
	g.Expect(h.Heartbeats).NotTo(BeNil(), "the hub writes digests")
	addr := receiverReady(g, h)

	g.Eventually(func(g Gomega) string { return ready(g, sp) }).WithTimeout(10 * time.Second).Should(Equal(isLost))
	start := time.Now()
	const n = 40
	for i := range n {
		postState(g, addr, sp, key)
		if i == 0 {
			g.Eventually(func(g Gomega) string { return ready(g, sp) }).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal(isReady))
		}
		time.Sleep(4 * testTimeout / n) // the agent's interval, not a wait for the hub
	}
	g.Expect(time.Since(start)).To(BeNumerically(">=", 4*testTimeout))
	got := &tugboatv1alpha1.Spoke{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(sp), got)).To(Succeed())
	g.Expect(ready(g, sp)).To(Equal(isReady), "heard from through the digest")
	g.Expect(writes.of(sp)).To(BeNumerically("<=", 3), "Spoke status writes for %d heartbeats", n)
	g.Expect(time.Since(got.Status.LastSeen.Time)).To(BeNumerically(">", testTimeout), "lastSeen is not written per heartbeat")
	g.Expect(spokeEvents(g, sp)).To(Equal([]string{"AgentReady"}))

	// The digest of this replica holds the spoke, heard within an interval.
	var cm corev1.ConfigMap
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: identity.HubNamespace, Name: heartbeat.Name(h.Heartbeats.Replica(), 0)}, &cm)).To(Succeed())
	d, err := heartbeat.Decode([]byte(cm.Data[heartbeat.DataKey]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Heard()).To(HaveKeyWithValue(client.ObjectKeyFromObject(sp), BeTemporally("~", time.Now(), 2*time.Second)))

	// The agent stops: lost within the timeout, a digest interval, and the
	// time the controller takes.
	last := time.Now()
	g.Eventually(func(g Gomega) string { return ready(g, sp) }).WithTimeout(testTimeout + testInterval + 5*time.Second).WithPolling(100 * time.Millisecond).Should(Equal(isLost))
	g.Expect(time.Since(last)).To(BeNumerically(">=", testTimeout-time.Second), "not lost before its timeout")
	g.Eventually(func(g Gomega) []string { return spokeEvents(g, sp) }).WithTimeout(10 * time.Second).Should(Equal([]string{"AgentReady", "AgentLost"}))
	g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(sp), got)).To(Succeed())
	g.Expect(got.Status.LastSeen.Time).To(BeTemporally("~", last, 2*time.Second), "lost, lastSeen is when it was last heard")

	// Back: Ready again at its first snapshot.
	postState(g, addr, sp, key)
	g.Eventually(func(g Gomega) string { return ready(g, sp) }).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal(isReady))
}
