package harness_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/e2e/harness"
)

// TestHarness_twoClustersRunDeploymentsAndStopClean starts two clusters side
// by side, rolls out a Deployment in each (pods run to Ready by kwok) and
// checks that Stop leaves none of their processes behind.
func TestHarness_twoClustersRunDeploymentsAndStopClean(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	clusters := make([]*harness.Cluster, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clusters[i], errs[i] = harness.Start(ctx, harness.Options{Name: fmt.Sprintf("side-%d", i)})
		}()
	}
	wg.Wait()
	for i, c := range clusters {
		if c != nil {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("cluster %s: logs kept in %s", c.Name, c.LogDir)
				}
				_ = c.StopKeepLogs()
			})
		}
		g.Expect(errs[i]).NotTo(HaveOccurred())
	}
	g.Expect(clusters[0].APIServerURL).NotTo(Equal(clusters[1].APIServerURL))

	for _, c := range clusters {
		// Each client reaches its own API server: a namespace created in
		// one cluster does not exist in the other.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-" + c.Name}}
		g.Expect(c.Client.Create(ctx, ns)).To(Succeed())
	}
	err := clusters[1].Client.Get(ctx, client.ObjectKey{Name: "only-in-" + clusters[0].Name}, &corev1.Namespace{})
	g.Expect(err).To(HaveOccurred())

	for _, c := range clusters {
		g.Expect(c.Client.Create(ctx, testDeployment("web", 2))).To(Succeed())
	}
	for _, c := range clusters {
		g.Eventually(func(g Gomega) {
			var d appsv1.Deployment
			g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, &d)).To(Succeed())
			g.Expect(d.Status.AvailableReplicas).To(Equal(int32(2)))
			available := false
			for _, cond := range d.Status.Conditions {
				if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
					available = true
				}
			}
			g.Expect(available).To(BeTrue(), "Deployment Available condition")
		}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		var pods corev1.PodList
		g.Expect(c.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "web"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(2))
		for _, p := range pods.Items {
			g.Expect(p.Spec.NodeName).To(Equal(c.NodeName), "scheduled onto the kwok node")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}
	}

	for _, c := range clusters {
		pids := c.PIDs()
		g.Expect(pids).To(HaveLen(5), "etcd, apiserver, controller-manager, scheduler, kwok")
		for _, pid := range pids {
			g.Expect(harness.ProcessAlive(pid)).To(BeTrue())
		}
		g.Expect(c.Stop()).To(Succeed())
		for _, pid := range pids {
			g.Expect(harness.ProcessAlive(pid)).To(BeFalse(), "pid %d of %s after Stop", pid, c.Name)
		}
		g.Expect(c.Dir).NotTo(BeADirectory())
	}
}

// TestHarness_controlPlaneOnly starts just etcd and the API server.
func TestHarness_controlPlaneOnly(t *testing.T) {
	g := NewWithT(t)
	c := harness.StartT(t, harness.Options{Name: "cp", ControlPlaneOnly: true})
	g.Expect(c.PIDs()).To(HaveLen(2))
	g.Expect(c.KubeconfigPath).To(BeAnExistingFile())
	var nodes corev1.NodeList
	g.Expect(c.Client.List(context.Background(), &nodes)).To(Succeed())
	g.Expect(nodes.Items).To(BeEmpty())
}

// TestHarness_restartPauseResume crashes and restarts the API server and
// etcd, and pauses etcd: writes fail while etcd is paused, requests succeed
// after Resume, and what was written survives each restart.
func TestHarness_restartPauseResume(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := harness.StartT(t, harness.Options{Name: "faults", ControlPlaneOnly: true})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}
	g.Expect(c.Client.Create(ctx, ns)).To(Succeed())
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return c.Client.Get(ctx, client.ObjectKey{Name: "kept"}, &corev1.Namespace{})
	}

	g.Expect(c.Pause(harness.ProcessEtcd)).To(Succeed())
	// A write, which must reach etcd: the API server may answer a read
	// from its watch cache (CI saw one succeed with etcd paused). The stop
	// signal is delivered asynchronously, so a write racing it may still
	// land (CI saw that too, on a loaded machine): the writes fail within
	// a bound, each under its own name.
	attempt := 0
	g.Eventually(func() error {
		attempt++
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
		defer wcancel()
		return c.Client.Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kept", Name: fmt.Sprintf("while-paused-%d", attempt)}})
	}).WithTimeout(20*time.Second).Should(HaveOccurred(), "a write while etcd is paused")
	g.Expect(c.Resume(harness.ProcessEtcd)).To(Succeed())
	g.Eventually(func() error { return get(5 * time.Second) }).WithTimeout(60 * time.Second).Should(Succeed())

	for _, name := range []string{harness.ProcessKubeAPIServer, harness.ProcessEtcd} {
		before := c.PIDs()
		rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		g.Expect(c.Restart(rctx, name, 0)).To(Succeed(), name)
		cancel()
		g.Expect(c.PIDs()).NotTo(Equal(before), name)
		g.Expect(c.PIDs()).To(HaveLen(2))
		g.Eventually(func() error { return get(5 * time.Second) }).WithTimeout(60*time.Second).Should(Succeed(), "after restarting %s", name)
	}
	g.Expect(c.Restart(ctx, "no-such-process", 0)).To(MatchError(ContainSubstring("no process")))
}

func testDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1.0.0"}},
				},
			},
		},
	}
}
