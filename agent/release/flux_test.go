package release

import (
	"slices"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestShortenReleaseName(t *testing.T) {
	g := NewWithT(t)
	// helm-controller's own test vectors (internal/release/name_test.go).
	g.Expect(ShortenReleaseName("release-name")).To(Equal("release-name"))
	g.Expect(ShortenReleaseName("release-name-with-very-long-name-which-is-longer-than-53-characters")).
		To(Equal("release-name-with-very-long-name-which-i-788ca0d0d7b0"))
	g.Expect(ShortenReleaseName("another-release-name-with-very-long-name-which-is-longer-than-53-characters")).
		To(Equal("another-release-name-with-very-long-name-7e72150d5a36"))
	g.Expect(ShortenReleaseName("")).To(Equal(""))
	g.Expect(ShortenReleaseName(strings.Repeat("a", 53))).To(Equal(strings.Repeat("a", 53)))
	g.Expect(ShortenReleaseName(strings.Repeat("a", 54))).To(HaveLen(53))
}

func TestHelmReleaseTarget(t *testing.T) {
	hr := func(mutate func(*helmv2.HelmRelease)) *helmv2.HelmRelease {
		obj := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-apps", Name: "web"}}
		if mutate != nil {
			mutate(obj)
		}
		return obj
	}
	tests := []struct {
		name        string
		hr          *helmv2.HelmRelease
		wantStorage string
		wantRelease string
	}{
		{"defaults", hr(nil), "flux-apps", "web"},
		{"target namespace prefixes the name", hr(func(o *helmv2.HelmRelease) { o.Spec.TargetNamespace = "prod" }), "flux-apps", "prod-web"},
		{"release name and storage namespace", hr(func(o *helmv2.HelmRelease) {
			o.Spec.TargetNamespace, o.Spec.ReleaseName, o.Spec.StorageNamespace = "prod", "frontend", "helm-storage"
		}), "helm-storage", "frontend"},
		{"long derived names are shortened like helm-controller does", hr(func(o *helmv2.HelmRelease) {
			o.Name = "with-very-long-name-which-is-longer-than-53-characters"
			o.Spec.TargetNamespace = "release-name"
		}), "flux-apps", "release-name-with-very-long-name-which-i-788ca0d0d7b0"},
		{"status history wins over the spec", hr(func(o *helmv2.HelmRelease) {
			o.Spec.ReleaseName, o.Spec.StorageNamespace = "renamed", "new-storage"
			o.Status.StorageNamespace = "old-storage"
			o.Status.History = helmv2.Snapshots{
				{Name: "web-old", Version: 3},
				nil,
				{Name: "web", Version: 4},
			}
		}), "old-storage", "web"},
		{"empty history falls back to the spec", hr(func(o *helmv2.HelmRelease) {
			o.Status.History = helmv2.Snapshots{}
		}), "flux-apps", "web"},
		{"nil", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var before helmv2.Snapshots
			if tt.hr != nil {
				before = slices.Clone(tt.hr.Status.History)
			}
			storage, release := HelmReleaseTarget(tt.hr)
			g.Expect(storage).To(Equal(tt.wantStorage))
			g.Expect(release).To(Equal(tt.wantRelease))
			if tt.hr != nil {
				g.Expect(tt.hr.Status.History).To(Equal(before), "the HelmRelease is not modified")
			}
		})
	}
}
