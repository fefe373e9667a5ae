package heartbeat_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/heartbeat"
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
	var lastPost time.Time // when the last heartbeat was sent: the hub heard it after
	for i := range n {
		lastPost = time.Now()
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
	// time the controller takes. Not before the timeout, counted from the
	// last heartbeat sent, less the digest's one-second granularity (it
	// keeps Unix seconds, so a heartbeat heard at 12.9 s counts as 12 s).
	// Counting from after the checks above instead (as this test once did)
	// made a correct hub fail it when those checks took more than 0.1 s.
	g.Eventually(func(g Gomega) string { return ready(g, sp) }).WithTimeout(testTimeout + testInterval + 5*time.Second).WithPolling(100 * time.Millisecond).Should(Equal(isLost))
	g.Expect(time.Since(lastPost)).To(BeNumerically(">=", testTimeout-time.Second), "not lost before its timeout")
	g.Eventually(func(g Gomega) []string { return spokeEvents(g, sp) }).WithTimeout(10 * time.Second).Should(Equal([]string{"AgentReady", "AgentLost"}))
	g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(sp), got)).To(Succeed())
	g.Expect(got.Status.LastSeen.Time).To(BeTemporally("~", lastPost, 2*time.Second), "lost, lastSeen is when it was last heard")

	// Back: Ready again at its first snapshot.
	postState(g, addr, sp, key)
	g.Eventually(func(g Gomega) string { return ready(g, sp) }).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal(isReady))
}

// TestHub_aReplicaThatCannotWriteItsDigestRecordsLastSeenInstead: a hub
// whose digest writes fail (here RBAC lets it read ConfigMaps in its
// digests' namespace but not write them, as a real API server answers)
// falls back to writing status.lastSeen at least every half heartbeat
// timeout, so a spoke that reports stays Ready for four timeouts, and
// there is no AgentLost.
func TestHub_aReplicaThatCannotWriteItsDigestRecordsLastSeenInstead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	digests := newNamespace(t, "hb-readonly-digests")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: digests, Name: "read-configmaps"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: digests, Name: "read-configmaps"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: identity.HubUser}}}
	g.Expect(cluster.Client.Create(ctx, role)).To(Succeed())
	g.Expect(cluster.Client.Create(ctx, binding)).To(Succeed())
	g.Eventually(func(g Gomega) error {
		return hubc.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(digests))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	ns := newNamespace(t, "hb-readonly")
	sp, key := newSpoke(t, ns, "hb-readonly-edge")
	opts := hubOptions()
	opts.Heartbeats.Namespace = digests
	var writes statusWrites
	h, _ := hubtest.Start(t, writes.wrap(identity.HubConfig(cluster.RESTConfig)), opts)
	addr := receiverReady(g, h)

	start := time.Now()
	for i := 0; time.Since(start) < 4*testTimeout; i++ {
		postState(g, addr, sp, key)
		if i == 0 {
			g.Eventually(func(g Gomega) string { return ready(g, sp) }).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal(isReady))
		} else {
			g.Expect(ready(g, sp)).To(Equal(isReady), "%s after the first heartbeat", time.Since(start))
		}
		time.Sleep(testTimeout / 10) // the agent's interval
	}
	g.Expect(spokeEvents(g, sp)).To(Equal([]string{"AgentReady"}))
	g.Expect(writes.of(sp)).To(BeNumerically(">=", 4), "lastSeen written every half timeout while the digest cannot be")
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: digests, Name: heartbeat.Name(h.Heartbeats.Replica(), 0)}, &corev1.ConfigMap{})).
		To(MatchError(ContainSubstring("not found")), "the digest was never written")
}
