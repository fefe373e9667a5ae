package releasehistory_test

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/e2e/harness"
)

// heartbeatRefresh is the recorder's HeartbeatRefresh in this package's
// tests.
const heartbeatRefresh = 1500 * time.Millisecond

// writeCounter watches the ReleaseHistories and the Spokes of a namespace
// from a resourceVersion on, and counts ReleaseHistory writes and Spoke
// heartbeat writes (versions whose status.lastSeen differs from the
// version before).
type writeCounter struct {
	mu        sync.Mutex
	histories int
	lastSeen  map[string]string
	beats     int
	sentinel  map[string]bool
}

func watchWrites(t *testing.T, g Gomega, ns string) *writeCounter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	wc, err := client.NewWithWatch(hub.RESTConfig, client.Options{Scheme: harness.DefaultScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	c := &writeCounter{lastSeen: map[string]string{}, sentinel: map[string]bool{}}

	var spokes tugboatv1alpha1.SpokeList
	g.Expect(wc.List(ctx, &spokes, client.InNamespace(ns))).To(Succeed())
	for _, sp := range spokes.Items {
		c.lastSeen[sp.Name] = sp.Status.LastSeen.String()
	}
	var rhs tugboatv1alpha1.ReleaseHistoryList
	g.Expect(wc.List(ctx, &rhs, client.InNamespace(ns))).To(Succeed())

	rw, err := wc.Watch(ctx, &tugboatv1alpha1.ReleaseHistoryList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rhs.ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	sw, err := wc.Watch(ctx, &tugboatv1alpha1.SpokeList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: spokes.ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(rw.Stop)
	t.Cleanup(sw.Stop)
	go func() {
		for ev := range rw.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				rh := ev.Object.(*tugboatv1alpha1.ReleaseHistory)
				c.mu.Lock()
				c.histories++
				if rh.Labels["sentinel"] != "" {
					c.sentinel["rh/"+rh.Labels["sentinel"]] = true
				}
				c.mu.Unlock()
			}
		}
	}()
	go func() {
		for ev := range sw.ResultChan() {
			if ev.Type != watch.Modified {
				continue
			}
			sp := ev.Object.(*tugboatv1alpha1.Spoke)
			c.mu.Lock()
			if seen := sp.Status.LastSeen.String(); seen != c.lastSeen[sp.Name] {
				c.beats++
				c.lastSeen[sp.Name] = seen
			}
			if sp.Labels["sentinel"] != "" {
				c.sentinel["spoke/"+sp.Labels["sentinel"]] = true
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// settle writes a sentinel label on the Spoke and on a ReleaseHistory and
// waits until the watches delivered both: every write made before is then
// counted (a watch delivers a resource's writes in order).
func (c *writeCounter) settle(g Gomega, sp *tugboatv1alpha1.Spoke, rh *tugboatv1alpha1.ReleaseHistory, mark string) (histories, beats int) {
	ctx := context.Background()
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"sentinel":"`+mark+`"}}}`))
	g.Expect(hub.Client.Patch(ctx, sp.DeepCopy(), patch)).To(Succeed())
	g.Expect(hub.Client.Patch(ctx, rh.DeepCopy(), patch)).To(Succeed())
	g.Eventually(func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.sentinel["spoke/"+mark] && c.sentinel["rh/"+mark]
	}).WithTimeout(10 * time.Second).Should(BeTrue())
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.histories - 1, c.beats // the sentinel is one history write
}

func (c *writeCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.histories, c.beats = 0, 0
}

// TestRecorder_unchangedSnapshotWritesNothing: the periodic state snapshot
// of a spoke whose releases did not change writes no ReleaseHistory and at
// most one heartbeat per HeartbeatRefresh; a changed release is still
// written; a spoke that stops sending still turns not Ready, and its next
// (unchanged) snapshot makes it Ready again.
func TestRecorder_unchangedSnapshotWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sp := newSpoke(t, g, "quiet")
	web := releaseState(3, "1.2.0", wire.StatusDeployed, wire.HealthCurrent)
	api := wire.ReleaseState{Namespace: "apps", Release: "api", Chart: "api", ChartVersion: "2.0.0", Revision: 1,
		Status: wire.StatusDeployed, Health: wire.HealthCurrent}
	take := func(releases ...wire.ReleaseState) *wire.StateSnapshot { return snapshot("quiet", releases...) }
	g.Expect(recorder.RecordState(ctx, ingest.Spoke{Name: "quiet"}, take(web, api))).To(Succeed())
	rh := getHistory(g, sp, "web")
	g.Expect(rh.Status.Current.ChartVersion).To(Equal("1.2.0"))

	c := watchWrites(t, g, sp.Namespace)
	stats := recorder.Stats()
	skippedBefore := stats.UnchangedReleases.Load()
	began := time.Now()
	sent := 0
	// Unchanged snapshots, until the recorder's cache holds its own writes
	// and it compares without queueing (and at least 20).
	g.Eventually(func() int64 {
		g.Expect(recorder.RecordState(ctx, ingest.Spoke{Name: "quiet"}, take(web, api))).To(Succeed())
		sent++
		return stats.UnchangedReleases.Load() - skippedBefore
	}).WithTimeout(10 * time.Second).WithPolling(time.Millisecond).Should(BeNumerically(">=", 2))
	for sent < 20 {
		g.Expect(recorder.RecordState(ctx, ingest.Spoke{Name: "quiet"}, take(web, api))).To(Succeed())
		sent++
	}
	elapsed := time.Since(began)
	histories, beats := c.settle(g, sp, rh, "one")
	g.Expect(histories).To(BeZero(), "no ReleaseHistory write for %d unchanged snapshots", sent)
	// lastSeen is kept to the second, so two writes can be as little as
	// HeartbeatRefresh-1s apart.
	bound := 1 + int(elapsed/(heartbeatRefresh-time.Second))
	g.Expect(beats).To(BeNumerically("<=", bound), "%d snapshots in %s", sent, elapsed)
	g.Expect(beats).To(BeNumerically("<", sent))
	t.Logf("%d unchanged snapshots in %s: %d ReleaseHistory writes, %d heartbeat writes", sent, elapsed.Round(time.Millisecond), histories, beats)

	// A changed release is written, the unchanged one is not.
	c.reset()
	web.Health, web.HealthReason = wire.HealthFailed, "Deployment web: ProgressDeadlineExceeded"
	g.Expect(recorder.RecordState(ctx, ingest.Spoke{Name: "quiet"}, take(web, api))).To(Succeed())
	g.Expect(getHistory(g, sp, "web").Status.Current.Health).To(Equal(tugboatv1alpha1.HealthFailed))
	histories, _ = c.settle(g, sp, rh, "two")
	g.Expect(histories).To(Equal(1))

	// A new agent version is written at once, however young lastSeen is.
	upgraded := take(web, api)
	upgraded.AgentVersion = "v0.2.0-test"
	g.Expect(recorder.RecordState(ctx, ingest.Spoke{Name: "quiet"}, upgraded)).To(Succeed())
	var got tugboatv1alpha1.Spoke
	g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(sp), &got)).To(Succeed())
	g.Expect(got.Status.AgentVersion).To(Equal("v0.2.0-test"))

	// Silence: the Spoke turns not Ready after the 2 s heartbeat timeout;
	// the next unchanged snapshot makes it Ready again.
	ready := func() metav1.ConditionStatus {
		var got tugboatv1alpha1.Spoke
		g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(sp), &got)).To(Succeed())
		if cond := apimeta.FindStatusCondition(got.Status.Conditions, "Ready"); cond != nil {
			return cond.Status
		}
		return ""
	}
	g.Eventually(ready).WithTimeout(10 * time.Second).Should(Equal(metav1.ConditionUnknown))
	g.Expect(recorder.RecordState(ctx, ingest.Spoke{Name: "quiet"}, upgraded)).To(Succeed())
	g.Eventually(ready).WithTimeout(10 * time.Second).Should(Equal(metav1.ConditionTrue))
}
