package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/controllers/heartbeat"
	"tugboat.dev/tugboat/e2e/harness"
)

// BenchmarkAPIServer_heartbeatDigest measures what the heartbeats cost a
// real control plane with heartbeat digests (controllers/heartbeat): each
// iteration is one digest interval (5 s) of a hub replica hearing 5,000
// spokes that post a state snapshot every 30 s (833 heartbeats), written
// as the replica's digest (one shard). It reports the control plane's CPU
// per digest write and per heartbeat it carries, and the digest's size,
// to set beside BenchmarkAPIServer_heartbeatWrite (a Spoke status PATCH
// per heartbeat). It runs only when -bench selects it:
//
//	go test -count=1 -run '^$' -bench BenchmarkAPIServer_heartbeatDigest -benchtime=200x ./e2e/
func BenchmarkAPIServer_heartbeatDigest(b *testing.B) {
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		b.Skip("runs only under -bench")
	}
	if testing.Short() {
		b.Skip("starts a control plane")
	}
	c := harness.StartT(b, harness.Options{Name: "digest", ControlPlaneOnly: true, TugboatCRDs: true})
	ctx := context.Background()
	const ns, spokes, snapshotInterval, interval = "tugboat-system", 5000, 30 * time.Second, 5 * time.Second
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	opts := heartbeat.NewOptions()
	opts.Namespace, opts.Replica = ns, "bench-replica"
	w := heartbeat.NewWriter(c.Client, opts)
	clock := time.Now()
	w.Now = func() time.Time { return clock }
	perInterval := int(int64(spokes) * int64(interval) / int64(snapshotInterval))
	next := 0
	hear := func() {
		for range perInterval {
			w.Heard(fmt.Sprintf("fleet-%02d", next%20), fmt.Sprintf("spoke-%05d", next), clock)
			next = (next + 1) % spokes
		}
	}
	// Every spoke heard once: the digest at its steady size.
	for range spokes / perInterval {
		hear()
	}
	if err := w.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	before := controlPlaneCPU(b, c)
	n := 0
	for b.Loop() {
		clock = clock.Add(interval)
		hear()
		if err := w.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.StopTimer()
	used := controlPlaneCPU(b, c) - before
	var list corev1.ConfigMapList
	if err := c.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{heartbeat.LabelReplica: opts.Replica}); err != nil {
		b.Fatal(err)
	}
	size := 0
	for _, cm := range list.Items {
		size += len(cm.Data[heartbeat.DataKey])
	}
	b.ReportMetric(float64(used.Microseconds())/1000/float64(n), "cp-cpu-ms/digest-write")
	b.ReportMetric(float64(used.Microseconds())/1000/float64(n*perInterval), "cp-cpu-ms/heartbeat")
	b.ReportMetric(float64(size), "digest-bytes")
	b.ReportMetric(float64(len(list.Items)), "shards")
}
