package secretcache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/webhook/secretcache"
)

// reader answers Gets of Secrets from a map, counting them, or with err.
type reader struct {
	client.Reader
	secrets map[string]*corev1.Secret
	err     error
	gets    int
}

func (r *reader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.gets++
	if r.err != nil {
		return r.err
	}
	s, ok := r.secrets[key.Name]
	if !ok {
		return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
	}
	s.DeepCopyInto(obj.(*corev1.Secret))
	return nil
}

func TestCache_keepsAnswersForTheTTL(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)
	r := &reader{secrets: map[string]*corev1.Secret{"slack": {ObjectMeta: metav1.ObjectMeta{Name: "slack"}, Data: map[string][]byte{"k": []byte("v1")}}}}
	c := secretcache.New(r, 10*time.Second, func() time.Time { return now })
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "ns", Name: "slack"}

	for range 5 {
		s, err := c.Get(ctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Data["k"]).To(Equal([]byte("v1")))
	}
	g.Expect(r.gets).To(Equal(1))

	// Absence is kept too.
	for range 5 {
		_, err := c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "missing"})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}
	g.Expect(r.gets).To(Equal(2))

	// After the TTL a rotated Secret is read again.
	r.secrets["slack"].Data["k"] = []byte("v2")
	now = now.Add(10 * time.Second)
	s, err := c.Get(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Data["k"]).To(Equal([]byte("v2")))
	g.Expect(r.gets).To(Equal(3))

	// Other errors are not kept.
	now = now.Add(10 * time.Second)
	r.err = errors.New("the API server is unavailable")
	_, err = c.Get(ctx, key)
	g.Expect(err).To(MatchError("the API server is unavailable"))
	r.err = nil
	_, err = c.Get(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.gets).To(Equal(5))
}
