package tracker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"tugboat.dev/tugboat/agent/release"
	"tugboat.dev/tugboat/api/wire"
)

// deploymentAt is the release's Deployment as an API server would hold it:
// generation gen, observed by the controller at observed, every replica
// updated and available when rolled.
func deploymentAt(rv string, gen, observed int64, rolled bool) *unstructured.Unstructured {
	updated := int64(0)
	if rolled {
		updated = 2
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": "apps", "name": "web", "uid": "dep-1", "resourceVersion": rv, "generation": gen},
		"spec":     map[string]any{"replicas": int64(2)},
		"status": map[string]any{
			"observedGeneration": observed, "replicas": int64(2), "updatedReplicas": updated,
			"readyReplicas": int64(2), "availableReplicas": int64(2),
			"conditions": []any{
				map[string]any{"type": "Available", "status": "True"},
				map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
			},
		},
	}}
	return u
}

// lister returns what it was last set to, and counts its calls.
type lister struct {
	mu    sync.Mutex
	objs  []*unstructured.Unstructured
	calls atomic.Int32
}

func (l *lister) set(objs ...*unstructured.Unstructured) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.objs = objs
}

func (l *lister) list(context.Context, release.Key) ([]*unstructured.Unstructured, error) {
	l.calls.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*unstructured.Unstructured, 0, len(l.objs))
	for _, o := range l.objs {
		out = append(out, o.DeepCopy())
	}
	return out, nil
}

// healthOf returns the health the tracker last reported for revision rev.
func healthOf(sink *recorder, rev int) []wire.Health {
	var out []wire.Health
	for _, e := range sink.all() {
		if e.Revision == rev && e.State != nil && e.State.Revision == rev {
			out = append(out, e.State.Health)
		}
	}
	return out
}

// upgrade runs the tracker through revision 1 (deployed before it
// started) and an upgrade to revision 2, deployed, with the given lists.
func upgrade(t *testing.T, opts Options, cache *lister) (*Tracker, *recorder) {
	t.Helper()
	sink := &recorder{}
	tr := New(opts, sink, cache.list)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = tr.Start(ctx) }()
	secret := func(rev int, status string) *corev1.Secret {
		s := releaseSecret("web", rev, status, types.UID(fmt.Sprintf("uid-%d", rev)))
		s.Namespace = "apps"
		return s
	}
	tr.ObserveStorage(secret(1, "deployed"), true)
	for _, s := range []*corev1.Secret{secret(2, "pending-upgrade"), secret(1, "superseded"), secret(2, "deployed")} {
		tr.ObserveStorage(s, false)
	}
	return tr, sink
}

// The race the settle time guarded against: Helm's deployed record of
// revision 2 arrives while the informers' cache still holds revision 1's
// Deployment, fully rolled out. Judged on the cache, revision 2 would be
// Current at once; judged on a fresh read, it is InProgress until the
// Deployment's new generation is observed and rolled out.
func TestTracker_aRevisionNotYetRolledOutIsNeverHealthyEarly(t *testing.T) {
	t.Run("without a fresh read, a stale cache makes it healthy early (the race)", func(t *testing.T) {
		g := NewWithT(t)
		cache := &lister{}
		cache.set(deploymentAt("10", 1, 1, true)) // revision 1's, stale
		_, sink := upgrade(t, Options{Spoke: "spoke-1", Settle: time.Millisecond}, cache)
		g.Eventually(func() []wire.Health { return healthOf(sink, 2) }).WithTimeout(10 * time.Second).Should(ContainElement(wire.HealthCurrent))
	})

	t.Run("judged on fresh reads until Current", func(t *testing.T) {
		g := NewWithT(t)
		cache, fresh := &lister{}, &lister{}
		cache.set(deploymentAt("10", 1, 1, true))  // stale
		fresh.set(deploymentAt("20", 2, 1, false)) // what the API server has: not observed yet
		tr, sink := upgrade(t, Options{Spoke: "spoke-1", Fresh: fresh.list}, cache)
		g.Eventually(fresh.calls.Load).WithTimeout(10 * time.Second).Should(BeNumerically(">=", 1))
		g.Consistently(func() []wire.Health { return healthOf(sink, 2) }).WithTimeout(300 * time.Millisecond).ShouldNot(ContainElement(wire.HealthCurrent))

		// The controller observed the generation, the rollout is under
		// way: still not healthy, whatever the stale cache says.
		fresh.set(deploymentAt("25", 2, 2, false))
		tr.Touch(release.Key{Namespace: "apps", Name: "web"})
		g.Consistently(func() []wire.Health { return healthOf(sink, 2) }).WithTimeout(300 * time.Millisecond).ShouldNot(ContainElement(wire.HealthCurrent))

		// Rolled out: Current.
		fresh.set(deploymentAt("30", 2, 2, true))
		tr.Touch(release.Key{Namespace: "apps", Name: "web"})
		g.Eventually(func() []wire.Health { return healthOf(sink, 2) }).WithTimeout(10 * time.Second).Should(ContainElement(wire.HealthCurrent))

		// Confirmed, but the cache still lags (it holds what the fresh
		// read saw before the rollout): it does not speak yet, and the
		// revision never flaps back to InProgress.
		cache.set(deploymentAt("25", 2, 2, false))
		reported := len(healthOf(sink, 2))
		for range 3 {
			before := fresh.calls.Load()
			tr.Touch(release.Key{Namespace: "apps", Name: "web"})
			g.Eventually(fresh.calls.Load).WithTimeout(10 * time.Second).Should(BeNumerically(">", before))
		}
		g.Expect(healthOf(sink, 2)).To(HaveLen(reported), "nothing new to report: %v", healthOf(sink, 2))

		// The cache caught up: used again, no more fresh reads.
		calls := fresh.calls.Load()
		cache.set(deploymentAt("30", 2, 2, true))
		for range 3 {
			tr.Touch(release.Key{Namespace: "apps", Name: "web"})
		}
		g.Consistently(fresh.calls.Load).WithTimeout(300 * time.Millisecond).Should(Equal(calls))
	})

	t.Run("the cache is used once it caught up with the fresh read", func(t *testing.T) {
		g := NewWithT(t)
		cache, fresh := &lister{}, &lister{}
		cache.set(deploymentAt("10", 1, 1, true))
		fresh.set(deploymentAt("20", 2, 1, false))
		tr, sink := upgrade(t, Options{Spoke: "spoke-1", Fresh: fresh.list}, cache)
		g.Eventually(func() []wire.Health { return healthOf(sink, 2) }).WithTimeout(10 * time.Second).Should(ContainElement(wire.HealthInProgress))
		g.Eventually(fresh.calls.Load).WithTimeout(10 * time.Second).Should(BeNumerically(">=", 1))

		// The informers delivered the update the fresh read saw (and a
		// later one, still rolling out): the cache speaks again, without
		// fresh reads, though the revision is not confirmed yet.
		key := release.Key{Namespace: "apps", Name: "web"}
		cache.set(deploymentAt("25", 2, 2, false))
		// Each touch makes the worker recompute at least once after it,
		// on the cache as it is then.
		recomputes := func(n int) {
			for range n {
				before := cache.calls.Load()
				tr.Touch(key)
				g.Eventually(cache.calls.Load).WithTimeout(10 * time.Second).Should(BeNumerically(">", before))
			}
		}
		recomputes(2) // flush a recompute that may have read the older cache
		calls := fresh.calls.Load()
		recomputes(3)
		g.Expect(fresh.calls.Load()).To(Equal(calls), "caught up: no fresh read")
		g.Expect(healthOf(sink, 2)).NotTo(ContainElement(wire.HealthCurrent))

		cache.set(deploymentAt("30", 2, 2, true))
		tr.Touch(key)
		g.Eventually(func() []wire.Health { return healthOf(sink, 2) }).WithTimeout(10 * time.Second).Should(ContainElement(wire.HealthCurrent))
		g.Expect(fresh.calls.Load()).To(Equal(calls))
	})
}

func TestCaughtUp(t *testing.T) {
	g := NewWithT(t)
	d := func(uid, rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetUID(types.UID(uid))
		u.SetResourceVersion(rv)
		return u
	}
	g.Expect(caughtUp(nil, nil)).To(BeFalse(), "no fresh read yet")
	g.Expect(caughtUp(nil, map[string]int64{})).To(BeTrue(), "nothing to catch up with")
	g.Expect(caughtUp([]*unstructured.Unstructured{d("a", "5")}, map[string]int64{"a": 5})).To(BeTrue())
	g.Expect(caughtUp([]*unstructured.Unstructured{d("a", "6")}, map[string]int64{"a": 5})).To(BeTrue())
	g.Expect(caughtUp([]*unstructured.Unstructured{d("a", "4")}, map[string]int64{"a": 5})).To(BeFalse(), "older")
	g.Expect(caughtUp([]*unstructured.Unstructured{d("a", "9")}, map[string]int64{"a": 5, "b": 3})).To(BeFalse(), "b not in the cache yet")
}
