package harness_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/e2e/harness"
)

// TestHarness_kwokFinishesHelmTestPods: kwok runs a Pod to Ready and keeps
// it Running, which would keep `helm test` waiting forever. The harness's
// kwok stages (kwok-stages.yaml) finish the Pod of a Helm test hook:
// Succeeded, or Failed when annotated tugboat.dev/test-result: fail. Any
// other Pod still runs to Ready and stays Running.
func TestHarness_kwokFinishesHelmTestPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, err := harness.Start(ctx, harness.Options{Name: "kwok-stages"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs kept in %s", c.LogDir)
		}
		_ = c.StopKeepLogs()
	})
	pod := func(name string, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/test:1"}}},
		}
	}
	for _, p := range []*corev1.Pod{
		pod("app", nil),
		pod("test-pass", map[string]string{"helm.sh/hook": "test"}),
		pod("test-success", map[string]string{"helm.sh/hook": "test-success"}),
		pod("test-fail", map[string]string{"helm.sh/hook": "test", "tugboat.dev/test-result": "fail"}),
	} {
		g.Expect(c.Client.Create(ctx, p)).To(Succeed())
	}
	phases := func(g Gomega) map[string]corev1.PodPhase {
		var list corev1.PodList
		g.Expect(c.Client.List(ctx, &list, client.InNamespace("default"))).To(Succeed())
		out := map[string]corev1.PodPhase{}
		for _, p := range list.Items {
			out[p.Name] = p.Status.Phase
		}
		return out
	}
	want := map[string]corev1.PodPhase{
		"app": corev1.PodRunning, "test-pass": corev1.PodSucceeded, "test-success": corev1.PodSucceeded, "test-fail": corev1.PodFailed,
	}
	g.Eventually(phases).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Equal(want))
	g.Consistently(phases).WithTimeout(2*time.Second).WithPolling(200*time.Millisecond).Should(Equal(want), "the phases stay")
	var failed corev1.Pod
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "test-fail"}, &failed)).To(Succeed())
	g.Expect(failed.Status.ContainerStatuses).To(HaveLen(1))
	g.Expect(failed.Status.ContainerStatuses[0].State.Terminated).NotTo(BeNil())
	g.Expect(failed.Status.ContainerStatuses[0].State.Terminated.ExitCode).To(Equal(int32(1)))
}

// TestHarness_kwokServesPodLogs: a Pod's log, read through the API server
// (pods/log, as kubectl logs and Helm do), is KwokPodLog, served by kwok as
// the node's kubelet.
func TestHarness_kwokServesPodLogs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, err := harness.Start(ctx, harness.Options{Name: "kwok-logs"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs kept in %s", c.LogDir)
		}
		_ = c.StopKeepLogs()
	})
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "talker"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/talker:1"}}},
	}
	g.Expect(c.Client.Create(ctx, p)).To(Succeed())
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() (string, error) {
		b, err := cs.CoreV1().Pods("default").GetLogs("talker", &corev1.PodLogOptions{}).DoRaw(ctx)
		return string(b), err
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Equal(harness.KwokPodLog))
}
