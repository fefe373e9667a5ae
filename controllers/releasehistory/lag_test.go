package releasehistory_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/controllers/releasehistory"
	"tugboat.dev/tugboat/e2e/harness"
)

// laggingCache is the manager's cached client, except that it serves each
// ReleaseHistory as it first saw it: an informer that has not caught up
// with the writes, as under load.
type laggingCache struct {
	client.Client
	mu     sync.Mutex
	frozen map[client.ObjectKey]*tugboatv1alpha1.ReleaseHistory
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	rh, ok := obj.(*tugboatv1alpha1.ReleaseHistory)
	if !ok {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.frozen[key]; f != nil {
		f.DeepCopyInto(rh)
		return nil
	}
	if err := c.Client.Get(ctx, key, rh, opts...); err != nil {
		return err
	}
	c.frozen[key] = rh.DeepCopy()
	return nil
}

// TestRecorder_aLaggingCacheCostsNoConflict: when the cache has not caught
// up with the recorder's own last write of a history, the next write
// starts from what that write returned instead of the stale copy, which
// the API server would refuse (a conflict, a read and the write again).
// Every write lands, in order, with no read of the API server.
func TestRecorder_aLaggingCacheCostsNoConflict(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sp := newSpoke(t, g, "lagging")
	cache := &laggingCache{Client: manager.GetClient(), frozen: map[client.ObjectKey]*tugboatv1alpha1.ReleaseHistory{}}
	api := harness.CountGets[*tugboatv1alpha1.ReleaseHistory](manager.GetAPIReader())
	opts := releasehistory.NewOptions()
	opts.WriteInterval = 0
	rec := releasehistory.NewRecorder(cache, api, opts)
	go func() { _ = rec.Start(ctx) }()
	g.Eventually(rec.Ready).WithTimeout(10 * time.Second).Should(Succeed())

	// The first write creates the history, which the lagging cache then
	// serves as it was for every later one.
	for rev := 1; rev <= 5; rev++ {
		s := releaseState(rev, fmt.Sprintf("1.0.%d", rev), wire.StatusDeployed, wire.HealthCurrent)
		g.Expect(rec.RecordEvents(ctx, ingest.Spoke{Name: "lagging"}, []wire.Event{releaseEvent("lagging", s, int64(rev), "UpgradeSucceeded")})).To(Succeed())
	}
	rh := getHistory(g, sp, "web")
	g.Expect(rh.Status.Current.Revision).To(Equal(int32(5)))
	g.Expect(rh.Status.Revisions).To(HaveLen(5))
	g.Expect(api.Total()).To(BeZero(), "no write conflicted and was retried on a read of the API server")
	// The cache may still have caught up with the first write (it freezes
	// at the first copy it serves); the three after it started from the
	// recorder's own last write.
	g.Expect(rec.Stats().FromLastWrite.Load()).To(BeNumerically(">=", 3))

	// Another writer changes the history behind the recorder's back: the
	// recorder's next write conflicts, is retried on a fresh read, and
	// keeps both changes.
	g.Expect(recorder.RecordEvents(ctx, ingest.Spoke{Name: "lagging"}, []wire.Event{releaseEvent("lagging", releaseState(6, "1.0.6", wire.StatusDeployed, wire.HealthCurrent), 6, "UpgradeSucceeded")})).To(Succeed())
	g.Expect(rec.RecordEvents(ctx, ingest.Spoke{Name: "lagging"}, []wire.Event{releaseEvent("lagging", releaseState(7, "1.0.7", wire.StatusDeployed, wire.HealthCurrent), 7, "UpgradeSucceeded")})).To(Succeed())
	rh = getHistory(g, sp, "web")
	g.Expect(rh.Status.Current.Revision).To(Equal(int32(7)))
	g.Expect(rh.Status.Revisions).To(HaveLen(7))
	g.Expect(api.Total()).To(BeNumerically(">=", 1), "the conflict was retried on a read of the API server")
}

// forgettingCache is the manager's cached client, except that it does not
// know any ReleaseHistory (an informer relisting under load), and it
// counts creates.
type forgettingCache struct {
	client.Client
	mu      sync.Mutex
	creates int
}

func (c *forgettingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*tugboatv1alpha1.ReleaseHistory); ok {
		return apierrors.NewNotFound(tugboatv1alpha1.GroupVersion.WithResource("releasehistories").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *forgettingCache) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.mu.Lock()
	c.creates++
	c.mu.Unlock()
	return c.Client.Create(ctx, obj, opts...)
}

// TestRecorder_aCacheThatLostAHistoryItWroteCostsNoCreate: when the cache
// does not show a history this recorder wrote (and its last write is no
// longer kept), the recorder reads it from the API server instead of
// trying to create it again, which the API server would refuse.
func TestRecorder_aCacheThatLostAHistoryItWroteCostsNoCreate(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sp := newSpoke(t, g, "forgetting")
	cache := &forgettingCache{Client: manager.GetClient()}
	opts := releasehistory.NewOptions()
	opts.WriteInterval = 0
	rec := releasehistory.NewRecorder(cache, manager.GetAPIReader(), opts)
	go func() { _ = rec.Start(ctx) }()
	g.Eventually(rec.Ready).WithTimeout(10 * time.Second).Should(Succeed())

	for rev := 1; rev <= 3; rev++ {
		rec.ForgetRecentWrites()
		s := releaseState(rev, fmt.Sprintf("1.0.%d", rev), wire.StatusDeployed, wire.HealthCurrent)
		g.Expect(rec.RecordEvents(ctx, ingest.Spoke{Name: "forgetting"}, []wire.Event{releaseEvent("forgetting", s, int64(rev), "UpgradeSucceeded")})).To(Succeed())
	}
	g.Expect(getHistory(g, sp, "web").Status.Revisions).To(HaveLen(3))
	cache.mu.Lock()
	defer cache.mu.Unlock()
	g.Expect(cache.creates).To(Equal(1), "created once, then read from the API server")
}
