package heartbeat_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/heartbeat"
	"tugboat.dev/tugboat/e2e/identity"
)

// replica is a hub replica's digest writer on its own, as the hub's
// ServiceAccount: what another replica's receiver would write.
func replica(t *testing.T, name string) *heartbeat.Writer {
	t.Helper()
	opts := heartbeat.NewOptions()
	opts.Namespace, opts.Replica, opts.Interval = identity.HubNamespace, name+"-"+strings.ToLower(rand.Text()[:5]), testInterval
	w := heartbeat.NewWriter(hubc, opts)
	t.Cleanup(func() { deleteDigests(t, w.Replica()) })
	return w
}

// deleteDigests deletes every digest of replica.
func deleteDigests(t *testing.T, replica string) {
	t.Helper()
	err := cluster.Client.DeleteAllOf(context.Background(), &corev1.ConfigMap{}, client.InNamespace(identity.HubNamespace),
		client.MatchingLabels{heartbeat.LabelReplica: replica})
	if err != nil {
		t.Error(err)
	}
}

// TestHub_aReplicaThatDiesDoesNotLoseTheSpokesAnotherHears: two replicas'
// digests (besides the hub running the Spoke controller, which hears
// nothing itself) hear spokes alive and dying. Both become Ready from the
// digests alone. Then replica "dead" stops writing: alive, which replica
// "live" still hears, stays Ready for three timeouts with no AgentLost;
// dying, which only the dead replica heard, is lost within its timeout.
func TestHub_aReplicaThatDiesDoesNotLoseTheSpokesAnotherHears(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "hb-replicas")
	alive, _ := newSpoke(t, ns, "hb-replicas-alive")
	dying, _ := newSpoke(t, ns, "hb-replicas-dying")
	hubtest.Start(t, identity.HubConfig(cluster.RESTConfig), hubOptions())
	for _, sp := range []*tugboatv1alpha1.Spoke{alive, dying} {
		g.Eventually(func(g Gomega) string { return ready(g, sp) }).WithTimeout(10 * time.Second).Should(Equal(isLost))
	}

	dead, live := replica(t, "dead"), replica(t, "live")
	now := time.Now()
	dead.Heard(alive.Namespace, alive.Name, now)
	dead.Heard(dying.Namespace, dying.Name, now)
	live.Heard(alive.Namespace, alive.Name, now)
	g.Expect(dead.Flush(ctx)).To(Succeed())
	g.Expect(live.Flush(ctx)).To(Succeed())
	for _, sp := range []*tugboatv1alpha1.Spoke{alive, dying} {
		g.Eventually(func(g Gomega) string { return ready(g, sp) }).WithTimeout(testTimeout).WithPolling(50*time.Millisecond).Should(Equal(isReady),
			"Ready from a digest alone, without waiting for a requeue")
	}

	// dead writes no more; live goes on hearing alive.
	stop := time.Now()
	for time.Since(stop) < 3*testTimeout {
		live.Heard(alive.Namespace, alive.Name, time.Now())
		g.Expect(live.Flush(ctx)).To(Succeed())
		g.Expect(ready(g, alive)).To(Equal(isReady), "%s after the replica died", time.Since(stop))
		time.Sleep(testInterval) // the replica's interval
	}
	g.Expect(ready(g, dying)).To(Equal(isLost))
	g.Expect(spokeEvents(g, alive)).To(Equal([]string{"AgentReady"}))
	g.Expect(spokeEvents(g, dying)).To(Equal([]string{"AgentReady", "AgentLost"}))
}

// TestIndex_ignoresCorruptAndForeignDigests: digest ConfigMaps that are
// not JSON, of another format, in a ConfigMap named for another replica,
// written an hour ahead, with a spoke heard in the future or without the
// data key are each ignored with the reason logged; they neither crash the
// hub's Spoke controller nor make a spoke Ready, and a spoke a valid digest
// hears stays Ready beside them.
func TestIndex_ignoresCorruptAndForeignDigests(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "hb-corrupt")
	heard, _ := newSpoke(t, ns, "hb-corrupt-heard")
	forged, _ := newSpoke(t, ns, "hb-corrupt-forged")
	hubtest.Start(t, identity.HubConfig(cluster.RESTConfig), hubOptions())

	now := time.Now()
	digest := func(replica string, at time.Time, ages map[string]int64) string {
		d := heartbeat.Digest{Format: heartbeat.Format, Replica: replica, Shards: 1, At: at.Unix(), Spokes: ages}
		raw, err := d.Encode()
		g.Expect(err).NotTo(HaveOccurred())
		return string(raw)
	}
	key := func(sp client.Object) string { return sp.GetNamespace() + "/" + sp.GetName() }
	bad := map[string]struct {
		data map[string]string
		why  string
	}{
		"not-json": {map[string]string{heartbeat.DataKey: "{not json"}, "not a heartbeat digest"},
		"other-format": {map[string]string{heartbeat.DataKey: strings.Replace(digest("bad-other-format", now, map[string]int64{key(forged): 0}),
			heartbeat.Format, "example.com/other", 1)}, "example.com/other"},
		"misnamed": {map[string]string{heartbeat.DataKey: digest("someone-else", now, map[string]int64{key(forged): 0})}, "a foreign object"},
		"future":   {map[string]string{heartbeat.DataKey: digest("bad-future", now.Add(time.Hour), map[string]int64{key(forged): 0, key(heard): 0})}, "ahead of this replica's clock"},
		"negative": {map[string]string{heartbeat.DataKey: digest("bad-negative", now, map[string]int64{key(forged): -3600})}, "is not between"},
		"no-data":  {map[string]string{"other": "x"}, "no data key"},
	}
	for name, b := range bad {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: identity.HubNamespace, Name: heartbeat.Name("bad-"+name, 0),
			Labels: map[string]string{heartbeat.LabelDigest: "true", heartbeat.LabelReplica: "bad-" + name}}, Data: b.data}
		g.Expect(cluster.Client.Create(ctx, cm)).To(Succeed())
		t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), cm) })
	}
	w := replica(t, "valid")
	w.Heard(heard.Namespace, heard.Name, now)
	g.Expect(w.Flush(ctx)).To(Succeed())

	// The hub's Spoke controller: heard is Ready, forged is not, for
	// longer than a timeout.
	g.Eventually(func(g Gomega) string { return ready(g, heard) }).WithTimeout(testTimeout).WithPolling(50 * time.Millisecond).Should(Equal(isReady))
	g.Consistently(func(g Gomega) string { return ready(g, forged) }).WithTimeout(testTimeout + time.Second).WithPolling(200 * time.Millisecond).Should(Equal(isLost))

	// The index, as the hub reads it, says why it ignored each.
	var mu sync.Mutex
	var logged []string
	x := heartbeat.NewIndex(hubc, identity.HubNamespace)
	x.Log = funcr.New(func(_, args string) { mu.Lock(); logged = append(logged, args); mu.Unlock() }, funcr.Options{})
	t0, err := x.LastHeard(ctx, types.NamespacedName{Namespace: forged.Namespace, Name: forged.Name})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(t0.IsZero()).To(BeTrue(), "no valid digest heard %s", forged.Name)
	t1, err := x.LastHeard(ctx, types.NamespacedName{Namespace: heard.Namespace, Name: heard.Name})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(t1.Unix()).To(Equal(now.Unix()), "the valid digest's time, not the future one's")
	mu.Lock()
	defer mu.Unlock()
	for name, b := range bad {
		g.Expect(logged).To(ContainElement(And(ContainSubstring(heartbeat.Name("bad-"+name, 0)), ContainSubstring(b.why))), name)
	}
	g.Expect(logged).To(HaveLen(len(bad)), "each ignored version logged once: %v", logged)
}

// TestWriter_shardsTwentyThousandSpokesBelowTheObjectLimit: a replica
// that heard 20,000 spokes writes its digest in shards the API server
// accepts, each below MaxShardBytes (half the ConfigMap limit of 1 MiB),
// and the index reads every spoke's time back. When all but ten expire,
// the shards no longer needed are deleted.
func TestWriter_shardsTwentyThousandSpokesBelowTheObjectLimit(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := replica(t, "big")
	clock := time.Now()
	w.Now = func() time.Time { return clock }
	const n = 20000
	heardAt := func(i int) time.Time { return clock.Add(-time.Duration(i%60) * time.Second) }
	name := func(i int) types.NamespacedName {
		return types.NamespacedName{Namespace: fmt.Sprintf("tenant-%02d", i%50), Name: fmt.Sprintf("cluster-%05d-eu-west-1-production", i)}
	}
	for i := range n {
		w.Heard(name(i).Namespace, name(i).Name, heardAt(i))
	}
	g.Expect(w.Flush(ctx)).To(Succeed())

	var list corev1.ConfigMapList
	g.Expect(cluster.Client.List(ctx, &list, client.InNamespace(identity.HubNamespace), client.MatchingLabels{heartbeat.LabelReplica: w.Replica()})).To(Succeed())
	g.Expect(len(list.Items)).To(BeNumerically(">", 1), "sharded")
	x := heartbeat.NewIndex(hubc, identity.HubNamespace)
	x.Now = w.Now
	got := map[types.NamespacedName]time.Time{}
	for i := range list.Items {
		cm := &list.Items[i]
		g.Expect(len(cm.Data[heartbeat.DataKey])).To(BeNumerically("<=", heartbeat.MaxShardBytes), cm.Name)
		for k, at := range x.HeardIn(cm) {
			got[k] = at
		}
	}
	g.Expect(got).To(HaveLen(n))
	for i := range n {
		if !got[name(i)].Equal(heardAt(i).Truncate(time.Second)) {
			t.Fatalf("%s heard at %s, the digest says %s", name(i), heardAt(i), got[name(i)])
		}
	}

	// All but ten expire: one shard remains.
	clock = clock.Add(heartbeat.NewOptions().Expiry + time.Minute)
	for i := range 10 {
		w.Heard(name(i).Namespace, name(i).Name, clock)
	}
	g.Expect(w.Flush(ctx)).To(Succeed())
	g.Expect(cluster.Client.List(ctx, &list, client.InNamespace(identity.HubNamespace), client.MatchingLabels{heartbeat.LabelReplica: w.Replica()})).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	g.Expect(list.Items[0].Name).To(Equal(heartbeat.Name(w.Replica(), 0)))
}

// TestWriter_deletesTheDigestOfAReplicaGone: a replica deletes the digest
// of another replica not written for the expiry (a Pod replaced), and
// leaves a recent one and one it cannot read alone.
func TestWriter_deletesTheDigestOfAReplicaGone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	gone, recent, sweeper := replica(t, "gone"), replica(t, "recent"), replica(t, "sweeper")
	gone.Now = func() time.Time { return time.Now().Add(-heartbeat.NewOptions().Expiry - time.Minute) }
	gone.Heard("fleet", "hb-gone-edge", gone.Now())
	recent.Heard("fleet", "hb-recent-edge", time.Now())
	g.Expect(gone.Flush(ctx)).To(Succeed())
	g.Expect(recent.Flush(ctx)).To(Succeed())
	unreadable := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: identity.HubNamespace, Name: heartbeat.Name("unreadable", 0),
		Labels: map[string]string{heartbeat.LabelDigest: "true", heartbeat.LabelReplica: "unreadable"}}, Data: map[string]string{heartbeat.DataKey: "{"}}
	g.Expect(cluster.Client.Create(ctx, unreadable)).To(Succeed())
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), unreadable) })

	g.Expect(sweeper.Flush(ctx)).To(Succeed())
	exists := func(name string) bool {
		err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: identity.HubNamespace, Name: name}, &corev1.ConfigMap{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return err == nil
	}
	g.Expect(exists(heartbeat.Name(gone.Replica(), 0))).To(BeFalse(), "the digest of a replica gone is deleted")
	g.Expect(exists(heartbeat.Name(recent.Replica(), 0))).To(BeTrue())
	g.Expect(exists(unreadable.Name)).To(BeTrue())
}
