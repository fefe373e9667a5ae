package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
)

// BenchmarkAPIServer_heartbeatWrite measures what one heartbeat costs a
// real control plane (kube-apiserver + etcd), in CPU time per write, three
// ways: the merge patch of a Spoke's status the hub sends (lastSeen and
// the replay floor), and, for comparison, the renewal of a
// coordination.k8s.io Lease per spoke as kubelets renew their node's (a
// merge patch, and an update from the last copy). 500 Spokes and Leases,
// 16 writers, b.N writes each (-benchtime=6000x for a steady figure). It
// runs only when -bench selects it.
func BenchmarkAPIServer_heartbeatWrite(b *testing.B) {
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		b.Skip("runs only under -bench")
	}
	if testing.Short() {
		b.Skip("starts a control plane")
	}
	c := harness.StartT(b, harness.Options{Name: "heartbeat", ControlPlaneOnly: true, TugboatCRDs: true})
	ctx := context.Background()
	const n, ns = 500, "default"
	spokeName := func(i int) string { return fmt.Sprintf("spoke-%03d", i%n) }
	now := metav1.Now()
	for i := range n {
		sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: spokeName(i)},
			Spec: tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: spokeName(i) + "-key"}}}
		if err := c.Client.Create(ctx, sp); err != nil {
			b.Fatal(err)
		}
		// The status a live Spoke has.
		sp.Status = tugboatv1alpha1.SpokeStatus{LastSeen: &now, AgentVersion: "v0.1.0", KubernetesVersion: "v1.36.3", ReleaseCount: 10,
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AgentConnected",
				Message: "agent v0.1.0 is sending heartbeats", LastTransitionTime: now, ObservedGeneration: 1}}}
		if err := c.Client.Status().Update(ctx, sp); err != nil {
			b.Fatal(err)
		}
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spoke-" + spokeName(i),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: tugboatv1alpha1.GroupVersion.String(), Kind: "Spoke", Name: sp.Name, UID: sp.UID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(sp.Name), LeaseDurationSeconds: ptr.To(int32(90)), RenewTime: &metav1.MicroTime{Time: time.Now()}}}
		if err := c.Client.Create(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
	microTime := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00") }
	var mu sync.Mutex
	leases := map[string]*coordinationv1.Lease{}
	for _, w := range []struct {
		name  string
		write func(i int) error
	}{
		{"spoke-status-merge-patch", func(i int) error {
			data := fmt.Sprintf(`{"status":{"lastSeen":%q,"agentVersion":"v0.1.0","agentProtocolVersion":2,"kubernetesVersion":"v1.36.3","releaseCount":10,"lastSnapshotTakenAt":%q}}`,
				time.Now().UTC().Add(time.Duration(i)*time.Second).Format(time.RFC3339), microTime(time.Now()))
			sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: spokeName(i)}}
			return c.Client.Status().Patch(ctx, sp, client.RawPatch(types.MergePatchType, []byte(data)))
		}},
		{"lease-merge-patch", func(i int) error {
			data := fmt.Sprintf(`{"metadata":{"annotations":{"tugboat.dev/last-snapshot-taken-at":%q}},"spec":{"renewTime":%q}}`,
				microTime(time.Now()), microTime(time.Now().Add(time.Duration(i)*time.Microsecond)))
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spoke-" + spokeName(i)}}
			return c.Client.Patch(ctx, l, client.RawPatch(types.MergePatchType, []byte(data)))
		}},
		{"lease-update", func(i int) error {
			name := "spoke-" + spokeName(i)
			mu.Lock()
			l := leases[name]
			mu.Unlock()
			if l == nil {
				l = &coordinationv1.Lease{}
				if err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, l); err != nil {
					return err
				}
			}
			l = l.DeepCopy()
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			err := c.Client.Update(ctx, l)
			mu.Lock()
			defer mu.Unlock()
			if apierrors.IsConflict(err) {
				delete(leases, name) // another writer's copy is newer: read it again next time
				return nil
			}
			if err != nil {
				return err
			}
			leases[name] = l
			return nil
		}},
	} {
		b.Run(w.name, func(b *testing.B) {
			cpu := func() time.Duration { return controlPlaneCPU(b, c) }
			before := cpu()
			next := make(chan int)
			errs := make(chan error, 16)
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range next {
						if err := w.write(i); err != nil {
							select {
							case errs <- err:
							default:
							}
						}
					}
				}()
			}
			i := 0
			for b.Loop() {
				next <- i
				i++
			}
			close(next)
			wg.Wait()
			b.StopTimer()
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
			used := cpu() - before
			b.ReportMetric(float64(used.Microseconds())/1000/float64(i), "cp-cpu-ms/write")
			b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}
