package spoke_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/egress"
	"tugboat.dev/tugboat/controllers/releasehistory"
	"tugboat.dev/tugboat/controllers/spoke"
	"tugboat.dev/tugboat/e2e/harness"
)

// The Spoke controller runs against a real API server; its APIReader counts
// the key Secret GETs it makes, and its clock can be moved ahead.
var (
	cluster *harness.Cluster
	reads   = harness.CountGets[*corev1.Secret](nil)
	clk     = &clock{}
)

const recheck = time.Hour

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(harness.Main(harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true}, func(c *harness.Cluster) int {
		cluster = c
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		mgr, err := ctrl.NewManager(c.RESTConfig, ctrl.Options{Scheme: harness.DefaultScheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
		if err != nil {
			panic(err)
		}
		if err := releasehistory.IndexSpokeNames(ctx, mgr); err != nil {
			panic(err)
		}
		reads.Reader = mgr.GetAPIReader()
		if err := (&spoke.Reconciler{
			Client: mgr.GetClient(), APIReader: reads, Now: clk.now, Recorder: mgr.GetEventRecorder("tugboat-hub"),
			Options: spoke.Options{HeartbeatTimeout: 90 * time.Second, KeySecretRecheck: recheck},
			// Workload clusters of the bootstrap tests are harness clusters
			// on loopback.
			Bootstrap: spoke.BootstrapOptions{Version: "dev", Timeout: time.Minute, Egress: egress.Policy{AllowLoopback: true},
				AllowedValues: spoke.DefaultAllowedValues()},
		}).SetupWithManager(mgr); err != nil {
			panic(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = mgr.Start(ctx) }()
		defer func() { cancel(); <-done }()
		return m.Run()
	}))
}

// clock is the real time plus an offset tests move ahead.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.offset) }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

var validKey = []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")

// TestReconciler_readsTheKeySecretOnlyWhenSomethingChanged: heartbeats
// (status-only updates of the Spoke, each reconciled) read no key Secret;
// a spec change, the keys annotation, or the recheck bound passing make
// the next reconcile read it once. A Secret deleted meanwhile is
// regenerated, and a broken one reported, after the bound.
func TestReconciler_readsTheKeySecretOnlyWhenSomethingChanged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns, name = "keyreads", "edge-1"
	secretKey := types.NamespacedName{Namespace: ns, Name: name + "-key"}
	sp := &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{tugboatv1alpha1.KeysUpdatedAtAnnotation: "t0"}},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: secretKey.Name}},
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretKey.Name}, Data: map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: validKey}},
		sp,
	} {
		g.Expect(cluster.Client.Create(ctx, o)).To(Succeed())
	}

	get := func() *tugboatv1alpha1.Spoke {
		got := &tugboatv1alpha1.Spoke{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(sp), got)).To(Succeed())
		return got
	}
	ready := func() string {
		c := apimeta.FindStatusCondition(get().Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
		if c == nil {
			return ""
		}
		return c.Message
	}
	// heartbeat writes what the recorder writes on a heartbeat and waits
	// until the controller reconciled it (Ready names the agent version).
	heartbeat := func(version string) {
		patch := []byte(`{"status":{"lastSeen":"` + clk.now().UTC().Format(time.RFC3339) + `","agentVersion":"` + version + `","agentProtocolVersion":1}}`)
		g.Expect(cluster.Client.Status().Patch(ctx, get(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		g.Eventually(ready).WithTimeout(10*time.Second).Should(ContainSubstring("agent "+version+" is sending heartbeats"), "reconciled")
	}
	annotate := func(value string) {
		patch := []byte(`{"metadata":{"annotations":{"` + tugboatv1alpha1.KeysUpdatedAtAnnotation + `":"` + value + `"}}}`)
		g.Expect(cluster.Client.Patch(ctx, get(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	}
	g.Eventually(func() int64 { return get().Status.ObservedGeneration }).WithTimeout(10 * time.Second).Should(BeEquivalentTo(1))
	g.Expect(reads.Of(secretKey)).To(Equal(1), "the first reconcile checks the Secret")

	for _, v := range []string{"v1", "v2", "v3", "v4", "v5"} {
		heartbeat(v)
	}
	g.Expect(reads.Of(secretKey)).To(Equal(1), "heartbeats read no Secret")

	// A spec change: one read.
	obj := get()
	obj.Spec.Suspend = true
	g.Expect(cluster.Client.Update(ctx, obj)).To(Succeed())
	g.Eventually(func() int64 { return get().Status.ObservedGeneration }).WithTimeout(10 * time.Second).Should(BeEquivalentTo(2))
	g.Expect(reads.Of(secretKey)).To(Equal(2), "a spec change reads the Secret")
	heartbeat("v6")
	g.Expect(reads.Of(secretKey)).To(Equal(2))

	// The keys annotation: one read.
	annotate("t1")
	g.Eventually(func() int { return reads.Of(secretKey) }).WithTimeout(10 * time.Second).Should(Equal(3))
	heartbeat("v7")
	g.Expect(reads.Of(secretKey)).To(Equal(3))

	// A Secret deleted behind the controller's back is regenerated once
	// the recheck bound passed (here at the next heartbeat).
	g.Expect(cluster.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretKey.Name}})).To(Succeed())
	heartbeat("v8")
	g.Expect(reads.Of(secretKey)).To(Equal(3), "within the bound, not read")
	clk.add(recheck)
	heartbeat("v9")
	g.Eventually(func() error { return cluster.Client.Get(ctx, secretKey, &corev1.Secret{}) }).WithTimeout(10 * time.Second).Should(Succeed())
	g.Eventually(func() string { return get().Annotations[tugboatv1alpha1.KeysUpdatedAtAnnotation] }).WithTimeout(10*time.Second).
		ShouldNot(Equal("t1"), "generating the key sets the annotation")

	// A broken Secret is reported, and stays reported at every reconcile
	// (a problem is not remembered as fine).
	broken := &corev1.Secret{}
	g.Expect(cluster.Client.Get(ctx, secretKey, broken)).To(Succeed())
	broken.Data = map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: []byte("short")}
	g.Expect(cluster.Client.Update(ctx, broken)).To(Succeed())
	annotate("t2")
	stalled := func() string {
		c := apimeta.FindStatusCondition(get().Status.Conditions, tugboatv1alpha1.StalledCondition.String())
		if c == nil {
			return ""
		}
		return c.Message
	}
	g.Eventually(stalled).WithTimeout(10 * time.Second).Should(ContainSubstring(`key "key" holds 5 bytes`))
	before := reads.Of(secretKey)
	patch := []byte(`{"status":{"lastSeen":"` + clk.now().UTC().Format(time.RFC3339) + `","agentVersion":"v10"}}`)
	g.Expect(cluster.Client.Status().Patch(ctx, get(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	g.Eventually(func() int { return reads.Of(secretKey) }).WithTimeout(10*time.Second).Should(BeNumerically(">", before), "a broken Secret is read again")
	g.Expect(stalled()).To(ContainSubstring(`key "key" holds 5 bytes`))
}

// TestReconciler_aFluxKeyEqualToAnAgentKeyIsAConfigurationError is issue
// 23 Low 9 on the Spoke's side: any Flux key (fluxKey or previousFluxKey)
// equal to any agent key (key or previousKey) stalls the Spoke with a
// message that names both keys and says why, as the receiver refuses it.
func TestReconciler_aFluxKeyEqualToAnAgentKeyIsAConfigurationError(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "fluxkeys"
	g.Expect(cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	other := []byte("fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210")
	flux := []byte("0011223344556677889900112233445566778899001122334455667788990011")
	for i, tc := range []struct {
		data       map[string][]byte
		flux, with string
	}{
		{map[string][]byte{"key": validKey, "fluxKey": validKey}, "fluxKey", "key"},
		{map[string][]byte{"key": validKey, "previousKey": other, "fluxKey": other}, "fluxKey", "previousKey"},
		{map[string][]byte{"key": validKey, "fluxKey": flux, "previousFluxKey": validKey}, "previousFluxKey", "key"},
	} {
		name := fmt.Sprintf("flux-%d", i)
		sp := &tugboatv1alpha1.Spoke{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}},
		}
		g.Expect(cluster.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-key"}, Data: tc.data})).To(Succeed())
		g.Expect(cluster.Client.Create(ctx, sp)).To(Succeed())
		g.Eventually(func() *metav1.Condition {
			got := &tugboatv1alpha1.Spoke{}
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(sp), got)).To(Succeed())
			return apimeta.FindStatusCondition(got.Status.Conditions, tugboatv1alpha1.StalledCondition.String())
		}).WithTimeout(10*time.Second).Should(And(
			HaveField("Reason", tugboatv1alpha1.InvalidSpecReason.String()),
			HaveField("Message", ContainSubstring(fmt.Sprintf("key %q must differ from %q: whoever can read the Flux Provider's Secret on the spoke could act as its agent", tc.flux, tc.with))),
		), name)
	}
}
