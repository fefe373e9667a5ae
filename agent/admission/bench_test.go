package admission_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"tugboat.dev/tugboat/agent/admission"
	"tugboat.dev/tugboat/agent/ownership"
)

// benchPod is a Pod as a ReplicaSet creates it, with a realistic spec and
// managedFields, owned by the ReplicaSet with UID rs-uid.
func benchPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "web-7d9f5c6b8-",
			Namespace:    "apps",
			Labels: map[string]string{
				"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": "web", "pod-template-hash": "7d9f5c6b8",
			},
			OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "ReplicaSet", "web-7d9f5c6b8", "rs-uid")},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				Time: ptr.To(metav1.NewTime(time.Unix(1700000000, 0))), FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app.kubernetes.io/instance":{},"f:app.kubernetes.io/name":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"rs-uid\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`),
			}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "web", Image: "registry.example/web:1.0.0", ImagePullPolicy: corev1.PullIfNotPresent,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
				}},
				Env:                    []corev1.EnvVar{{Name: "GREETING", Value: "hello"}, {Name: "LOG_LEVEL", Value: "info"}},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
			TerminationGracePeriodSeconds: ptr.To[int64](30), SchedulerName: "default-scheduler",
			SecurityContext: &corev1.PodSecurityContext{}, EnableServiceLinks: ptr.To(true),
		},
	}
}

func benchWebhooks() *admission.Webhooks {
	ix := ownership.NewIndex(0)
	ix.Record("rs-uid", ownership.ObjectRef{Group: "apps", Kind: "ReplicaSet", Namespace: "apps", Name: "web-7d9f5c6b8"}, web)
	// A realistically full index: 100k other objects.
	for i := range 100_000 {
		ix.Record(benchUID(i), ownership.ObjectRef{}, ownership.Release{Name: "other", Namespace: "apps"})
	}
	return &admission.Webhooks{Index: ix}
}

func benchUID(i int) types.UID { return types.UID(fmt.Sprintf("uid-%08d", i)) }

// BenchmarkMutate measures the mutating decision for a Pod whose owner is
// indexed: decode the object's metadata, look the owner up, build the
// patch.
func BenchmarkMutate(b *testing.B) {
	w := benchWebhooks()
	req := request(admissionv1.Create, podKind, benchPod())
	ctx := context.Background()
	b.SetBytes(int64(len(req.Object.Raw)))
	b.ReportAllocs()
	cpu := processCPUTime()
	for b.Loop() {
		if d := w.Mutate(ctx, req); d.Result != admission.ResultLabeled {
			b.Fatalf("result %s: %v", d.Result, d.Err)
		}
	}
	reportCPU(b, cpu)
}

// reportCPU reports the process CPU time per operation since start (GC
// included): on a shared machine, ns/op also counts time spent waiting
// for a core.
func reportCPU(b *testing.B, start time.Duration) {
	if start > 0 && b.N > 0 {
		b.ReportMetric(float64(processCPUTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkMutateHTTP measures the same decision through the HTTP handler:
// the AdmissionReview decoded and the response encoded (TLS excluded).
func BenchmarkMutateHTTP(b *testing.B) {
	h := benchWebhooks().Handler()
	body := review(request(admissionv1.Create, podKind, benchPod()))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu := processCPUTime()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, admission.PathMutateOwnership, bytes.NewReader(body)))
		if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"patch"`)) {
			b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
	}
	reportCPU(b, cpu)
}
