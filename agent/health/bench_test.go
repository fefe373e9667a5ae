package health

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"tugboat.dev/tugboat/api/wire"
)

// BenchmarkCompute computes the health of a release of one Deployment and
// the 50 Pods it runs, all rolled out: every object goes through kstatus.
func BenchmarkCompute(b *testing.B) {
	d := rolledOut("web")
	d.Spec.Replicas = ptr.To[int32](50)
	d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = 50, 50, 50, 50
	objs := []*unstructured.Unstructured{toUnstructured(b, d)}
	for i := range 50 {
		objs = append(objs, toUnstructured(b, readyPod(fmt.Sprintf("web-7d9f-%02d", i))))
	}
	if res := Compute(objs); res.Health != wire.HealthCurrent || len(res.Objects) != 51 {
		b.Fatalf("unexpected result %s: %s (%d objects)", res.Health, res.Reason, len(res.Objects))
	}
	b.ReportAllocs()
	for b.Loop() {
		Compute(objs)
	}
}
