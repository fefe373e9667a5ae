package release

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestParseStorageName(t *testing.T) {
	tests := []struct {
		in       string
		release  string
		revision int
		ok       bool
	}{
		{"sh.helm.release.v1.web.v7", "web", 7, true},
		{"sh.helm.release.v1.web.v123", "web", 123, true},
		{"sh.helm.release.v1.my.app.v12", "my.app", 12, true},
		{"sh.helm.release.v1.web.v2.v3", "web.v2", 3, true},
		{"sh.helm.release.v1.a.v2147483647", "a", 2147483647, true},
		{"sh.helm.release.v1.a.v2147483648", "", 0, false},
		{"sh.helm.release.v1.web.v0", "", 0, false},
		{"sh.helm.release.v1.web.v", "", 0, false},
		{"sh.helm.release.v1.web.v+7", "", 0, false},
		{"sh.helm.release.v1.web.v-7", "", 0, false},
		{"sh.helm.release.v1.web.v7a", "", 0, false},
		{"sh.helm.release.v1.web", "", 0, false},
		{"sh.helm.release.v1..v7", "", 0, false},
		{"sh.helm.release.v1.v7", "", 0, false},
		{"sh.helm.release.v2.web.v7", "", 0, false},
		{"web.v7", "", 0, false},
		{"", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g := NewWithT(t)
			release, revision, ok := ParseStorageName(tt.in)
			g.Expect(ok).To(Equal(tt.ok))
			g.Expect(release).To(Equal(tt.release))
			g.Expect(revision).To(Equal(tt.revision))
			if ok {
				g.Expect(StorageName(release, revision)).To(Equal(tt.in))
			}
		})
	}
}

func TestIsReleaseSecret(t *testing.T) {
	g := NewWithT(t)
	meta := metav1.ObjectMeta{Namespace: "apps", Name: "sh.helm.release.v1.web.v7", Labels: map[string]string{"owner": "helm"}}
	helmSecret := &corev1.Secret{ObjectMeta: meta, Type: SecretType}
	g.Expect(IsReleaseSecret(helmSecret)).To(BeTrue())
	g.Expect(IsReleaseSecret(cache.DeletedFinalStateUnknown{Key: "apps/x", Obj: helmSecret})).To(BeTrue())
	g.Expect(IsReleaseSecret(&cache.DeletedFinalStateUnknown{Key: "apps/x", Obj: helmSecret})).To(BeTrue())
	g.Expect(IsReleaseSecret(&metav1.PartialObjectMetadata{ObjectMeta: meta})).To(BeTrue())
	g.Expect(IsReleaseSecret(&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "Secret"}, ObjectMeta: meta})).To(BeTrue())

	g.Expect(IsReleaseSecret(&corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque})).To(BeFalse())
	g.Expect(IsReleaseSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: meta.Name}, Type: SecretType})).To(BeFalse(), "no owner label")
	g.Expect(IsReleaseSecret(&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap"}, ObjectMeta: meta})).To(BeFalse())
	g.Expect(IsReleaseSecret(&corev1.ConfigMap{ObjectMeta: meta})).To(BeFalse())
	g.Expect(IsReleaseSecret((*corev1.Secret)(nil))).To(BeFalse())
	g.Expect(IsReleaseSecret(nil)).To(BeFalse())
	g.Expect(IsReleaseSecret("sh.helm.release.v1.web.v7")).To(BeFalse())
}

func TestIsReleaseConfigMap(t *testing.T) {
	g := NewWithT(t)
	meta := metav1.ObjectMeta{Namespace: "apps", Name: "sh.helm.release.v1.web.v7", Labels: map[string]string{"owner": "helm"}}
	g.Expect(IsReleaseConfigMap(&corev1.ConfigMap{ObjectMeta: meta})).To(BeTrue())
	g.Expect(IsReleaseConfigMap(cache.DeletedFinalStateUnknown{Obj: &corev1.ConfigMap{ObjectMeta: meta}})).To(BeTrue())
	g.Expect(IsReleaseConfigMap(&metav1.PartialObjectMetadata{ObjectMeta: meta})).To(BeTrue())

	other := meta
	other.Name = "web-config"
	g.Expect(IsReleaseConfigMap(&corev1.ConfigMap{ObjectMeta: other})).To(BeFalse(), "not a storage name")
	g.Expect(IsReleaseConfigMap(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: meta.Name}})).To(BeFalse(), "no owner label")
	g.Expect(IsReleaseConfigMap(&corev1.Secret{ObjectMeta: meta, Type: SecretType})).To(BeFalse())
	g.Expect(IsReleaseConfigMap((*corev1.ConfigMap)(nil))).To(BeFalse())
}
