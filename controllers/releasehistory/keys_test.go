package releasehistory_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/ingest"
)

// TestRecorder_spokeKeysFollowTheKeysAnnotation: without a SpokeDirectory
// the recorder's SpokeKeys is the receiver's source of keys; it caches them
// like spokedir does, and re-reads them as soon as the Spoke's
// tugboat.dev/keys-updated-at annotation changes (a removed key is refused
// at once), not after the TTL.
func TestRecorder_spokeKeysFollowTheKeysAnnotation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sp := newSpoke(t, g, "annotated")
	key := types.NamespacedName{Namespace: sp.Namespace, Name: sp.Spec.KeySecretRef.Name}
	// The Spoke controller annotates the Spoke once it generated the key;
	// wait until the recorder's cache sees that, so that it is not what
	// this test observes below.
	g.Eventually(func() (string, error) {
		var got tugboatv1alpha1.Spoke
		err := manager.GetClient().Get(ctx, client.ObjectKeyFromObject(sp), &got)
		return got.Annotations[tugboatv1alpha1.KeysUpdatedAtAnnotation], err
	}).WithTimeout(10 * time.Second).ShouldNot(BeEmpty())
	generated, err := recorder.SpokeKeys(ctx, sp.Name)
	g.Expect(err).NotTo(HaveOccurred())

	newKey := []byte("annotated-new-key-0123456789abcdef01")
	var secret corev1.Secret
	g.Expect(hub.Client.Get(ctx, key, &secret)).To(Succeed())
	secret.Data[tugboatv1alpha1.SpokeKeySecretKey] = newKey
	g.Expect(hub.Client.Update(ctx, &secret)).To(Succeed())
	g.Expect(recorder.SpokeKeys(ctx, sp.Name)).To(Equal(generated), "cached until the annotation changes")

	patch := []byte(`{"metadata":{"annotations":{"` + tugboatv1alpha1.KeysUpdatedAtAnnotation + `":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}}}`)
	g.Expect(hub.Client.Patch(ctx, sp.DeepCopy(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	g.Eventually(func() (ingest.SpokeKeys, error) { return recorder.SpokeKeys(ctx, sp.Name) }).
		WithTimeout(5 * time.Second).Should(Equal(ingest.SpokeKeys{Current: newKey}))
}
