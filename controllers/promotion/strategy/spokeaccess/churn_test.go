package spokeaccess_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/egress"
	"tugboat.dev/tugboat/controllers/promotion/strategy/spokeaccess"
)

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Issue 13, bug 4 (hub half): 10,000 Spokes come and go; the cache keeps
// at most its limit of clients, and the heap returns near its baseline.
func TestCache_boundedUnderChurn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(g)
	secret(g, ns, "kc", map[string][]byte{"value": kubeconfig(g)})
	cache := spokeaccess.NewCache(func(cfg *rest.Config) (client.Client, error) {
		return client.New(cfg, client.Options{})
	}).WithEgress(egress.Policy{AllowLoopback: true})
	// Warm up the shared transport and the client packages.
	_, err := cache.Client(ctx, cluster.Client, spoke(ns, tugboatv1alpha1.SpokeSpec{KubeConfigSecretRef: &tugboatv1alpha1.SecretKeyReference{Name: "kc"}}))
	g.Expect(err).NotTo(HaveOccurred())
	baseline := heapAfterGC()

	for i := 0; i < 10000; i++ {
		sp := &tugboatv1alpha1.Spoke{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("edge-%d", i)},
			Spec:       tugboatv1alpha1.SpokeSpec{KubeConfigSecretRef: &tugboatv1alpha1.SecretKeyReference{Name: "kc"}},
		}
		_, err := cache.Client(ctx, cluster.Client, sp)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cache.Len()).To(BeNumerically("<=", spokeaccess.DefaultMaxClients))
	}
	g.Expect(cache.Len()).To(Equal(spokeaccess.DefaultMaxClients))
	grown := int64(heapAfterGC()) - int64(baseline)
	t.Logf("heap after 10,000 spokes: %+d KiB from baseline", grown/1024)
	g.Expect(grown).To(BeNumerically("<", 16<<20), "the heap returns near its baseline")

	// A smaller limit evicts at once; the most recently used stays.
	cache.WithMaxClients(2)
	g.Expect(cache.Len()).To(Equal(2))
}
