package statuspatch_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/statuspatch"
	"tugboat.dev/tugboat/e2e/harness"
)

// cluster is a real API server with tugboat's CRDs.
var cluster *harness.Cluster

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(harness.Main(harness.Options{Name: "statuspatch", ControlPlaneOnly: true, TugboatCRDs: true}, func(c *harness.Cluster) int {
		cluster = c
		return m.Run()
	}))
}

// countingClient is a client of the test API server that counts the
// status PATCH requests it sends.
func countingClient(t *testing.T) (client.Client, *atomic.Int32) {
	t.Helper()
	var patches atomic.Int32
	cfg := rest.CopyConfig(cluster.RESTConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPatch {
				patches.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	c, err := client.New(cfg, client.Options{Scheme: cluster.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, &patches
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var spokes atomic.Int32

// newSpoke creates a Spoke and returns it as read back.
func newSpoke(t *testing.T) *tugboatv1alpha1.Spoke {
	t.Helper()
	ctx := context.Background()
	sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("patched-%d", spokes.Add(1))},
		Spec: tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: "key"}}}
	if err := cluster.Client.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), sp) })
	return sp
}

func get(g Gomega, sp *tugboatv1alpha1.Spoke) *tugboatv1alpha1.Spoke {
	got := &tugboatv1alpha1.Spoke{}
	g.Expect(cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(sp), got)).To(Succeed())
	return got
}

// A reconcile that changes nothing sends nothing; one that changes the
// conditions and another status field writes both in one request (a
// reconcile brought by the write never sees half of it), as field manager
// tugboat-hub, with observedGeneration when the reconcile observed it.
func TestPatcher_writesWhatChangedInOneRequest(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, patches := countingClient(t)
	sp := newSpoke(t)

	p := statuspatch.New(sp, c)
	g.Expect(p.Patch(ctx, sp, false, nil)).To(Succeed())
	g.Expect(patches.Load()).To(BeZero(), "nothing changed: no request")

	statuspatch.Set(sp, tugboatv1alpha1.ReadyCondition, metav1.ConditionTrue, tugboatv1alpha1.AgentConnectedReason, "connected")
	sp.Status.AgentVersion = "v1.2.3"
	g.Expect(p.Patch(ctx, sp, true, nil)).To(Succeed())
	g.Expect(patches.Load()).To(BeEquivalentTo(1), "the conditions and the rest in one request")
	got := get(g, sp)
	g.Expect(got.Status.AgentVersion).To(Equal("v1.2.3"))
	g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, "Ready")).To(And(
		HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "AgentConnected"), HaveField("ObservedGeneration", got.Generation)))
	g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	var managers []string
	for _, f := range got.ManagedFields {
		if f.Subresource == "status" {
			managers = append(managers, f.Manager)
		}
	}
	g.Expect(managers).To(ConsistOf(statuspatch.FieldOwner))

	// The same again: the patcher remembers what it wrote.
	statuspatch.Set(sp, tugboatv1alpha1.ReadyCondition, metav1.ConditionTrue, tugboatv1alpha1.AgentConnectedReason, "connected")
	g.Expect(p.Patch(ctx, sp, true, nil)).To(Succeed())
	g.Expect(patches.Load()).To(BeEquivalentTo(1))

	// A message longer than a condition's bound is clipped, not refused.
	long := make([]byte, 4*statuspatch.MaxMessageLength)
	for i := range long {
		long[i] = 'x'
	}
	statuspatch.Set(sp, tugboatv1alpha1.ReadyCondition, metav1.ConditionFalse, tugboatv1alpha1.AgentNotSeenReason, string(long))
	statuspatch.Delete(sp, tugboatv1alpha1.ReconcilingCondition)
	g.Expect(p.Patch(ctx, sp, false, nil)).To(Succeed())
	g.Expect(len(apimeta.FindStatusCondition(get(g, sp).Status.Conditions, "Ready").Message)).To(BeNumerically("<=", statuspatch.MaxMessageLength))
}

// Not observed (the reconcile failed, or waits): observedGeneration stays.
func TestPatcher_leavesObservedGenerationUnlessObserved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sp := newSpoke(t)
	sp.Spec.Suspend = true
	g.Expect(cluster.Client.Update(ctx, sp)).To(Succeed())
	g.Expect(sp.Generation).To(BeEquivalentTo(2))

	p := statuspatch.New(sp, cluster.Client)
	reconcileErr := errors.New("listing Spokes: the server is on fire")
	statuspatch.Set(sp, tugboatv1alpha1.ReadyCondition, metav1.ConditionFalse, tugboatv1alpha1.ReconciliationFailedReason, reconcileErr.Error())
	g.Expect(p.Patch(ctx, sp, false, reconcileErr)).To(MatchError(reconcileErr), "the reconcile's error comes back")
	got := get(g, sp)
	g.Expect(got.Status.ObservedGeneration).To(BeZero())
	g.Expect(apimeta.IsStatusConditionFalse(got.Status.Conditions, "Ready")).To(BeTrue(), "written though the reconcile failed")

	g.Expect(p.Patch(ctx, sp, true, nil)).To(Succeed())
	g.Expect(get(g, sp).Status.ObservedGeneration).To(BeEquivalentTo(2))
}

// With an optimistic lock, a status another writer changed since the read
// is a Conflict, not overwritten; without, the fields that changed are
// merged into it. An object deleted meanwhile is no error.
func TestPatcher_optimisticLockAndDeletedObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sp := newSpoke(t)
	locked := statuspatch.New(sp.DeepCopy(), cluster.Client, statuspatch.WithOptimisticLock())
	merged := statuspatch.New(sp.DeepCopy(), cluster.Client)

	other := get(g, sp)
	other.Status.LastSeen = &metav1.Time{Time: other.CreationTimestamp.Time}
	g.Expect(cluster.Client.Status().Update(ctx, other)).To(Succeed())

	mine := sp.DeepCopy()
	mine.Status.AgentVersion = "v9"
	err := locked.Patch(ctx, mine, true, nil)
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)

	mine = sp.DeepCopy()
	mine.Status.AgentVersion = "v9"
	g.Expect(merged.Patch(ctx, mine, true, nil)).To(Succeed())
	got := get(g, sp)
	g.Expect(got.Status.AgentVersion).To(Equal("v9"))
	g.Expect(got.Status.LastSeen).NotTo(BeNil(), "the other writer's field is kept")

	g.Expect(cluster.Client.Delete(ctx, sp)).To(Succeed())
	mine.Status.AgentVersion = "v10"
	g.Expect(merged.Patch(ctx, mine, true, nil)).To(Succeed(), "deleted meanwhile")
}

// A condition's lastTransitionTime moves only when its status changes: a
// new message keeps it (tugboat doctor judges "Reconciling since" by it).
func TestSet_movesTheTransitionTimeOnlyOnAChangeOfStatus(t *testing.T) {
	g := NewWithT(t)
	sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	statuspatch.Set(sp, tugboatv1alpha1.ReconcilingCondition, metav1.ConditionTrue, tugboatv1alpha1.ProgressingReason, "1 of 3")
	first := apimeta.FindStatusCondition(sp.Status.Conditions, "Reconciling")
	g.Expect(first.ObservedGeneration).To(BeEquivalentTo(3))
	since := metav1.NewTime(first.LastTransitionTime.Add(-time.Hour))
	sp.Status.Conditions[0].LastTransitionTime = since

	statuspatch.Set(sp, tugboatv1alpha1.ReconcilingCondition, metav1.ConditionTrue, tugboatv1alpha1.ProgressingReason, "2 of 3")
	got := apimeta.FindStatusCondition(sp.Status.Conditions, "Reconciling")
	g.Expect(got.Message).To(Equal("2 of 3"))
	g.Expect(got.LastTransitionTime).To(Equal(since), "a new message is no transition")

	statuspatch.Set(sp, tugboatv1alpha1.ReconcilingCondition, metav1.ConditionFalse, tugboatv1alpha1.SucceededReason, "done")
	g.Expect(apimeta.FindStatusCondition(sp.Status.Conditions, "Reconciling").LastTransitionTime).NotTo(Equal(since))
	statuspatch.Delete(sp, tugboatv1alpha1.ReconcilingCondition)
	g.Expect(sp.Status.Conditions).To(BeEmpty())
}
