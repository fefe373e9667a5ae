package agent

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tugboat.dev/tugboat/agent/health"
	"tugboat.dev/tugboat/agent/release"
)

// The trimmed HelmRelease the cache keeps reads the same as the whole one.
func TestTransformHelmRelease_keepsWhatTheTrackerReads(t *testing.T) {
	g := NewWithT(t)
	whole := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{
		Namespace: "flux-apps", Name: "web", Generation: 4, ResourceVersion: "77", UID: "u1",
		Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kustomize-controller"}},
	}}
	whole.Spec = helmv2.HelmReleaseSpec{
		ReleaseName: "frontend", TargetNamespace: "apps", StorageNamespace: "helm-storage", Suspend: true,
		Values: &apiextensionsv1.JSON{Raw: []byte(`{"replicas": 3}`)},
		Chart:  &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "web", Version: "1.4.0"}},
	}
	whole.Status = helmv2.HelmReleaseStatus{
		ObservedGeneration: 3, LastAttemptedRevision: "1.4.0", StorageNamespace: "helm-storage",
		History:    helmv2.Snapshots{{Name: "frontend", Namespace: "apps", Version: 2, ChartName: "web", ChartVersion: "1.4.0"}},
		Conditions: []metav1.Condition{{Type: fluxmeta.StalledCondition, Status: metav1.ConditionTrue, Reason: "RetriesExceeded", Message: "Failed to upgrade after 1 attempt(s)"}},
		Inventory:  &helmv2.ResourceInventory{Entries: []helmv2.ResourceRef{{ID: "apps_web_apps_Deployment", Version: "v1"}}},
	}
	trimmed, err := transformHelmRelease(whole.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	hr := trimmed.(*helmv2.HelmRelease)
	g.Expect(hr.Spec.Values).To(BeNil())
	g.Expect(hr.Status.Inventory).To(BeNil())
	g.Expect(hr.ManagedFields).To(BeNil())
	ws, wn := release.HelmReleaseTarget(whole)
	ts, tn := release.HelmReleaseTarget(hr)
	g.Expect([]string{ts, tn}).To(Equal([]string{ws, wn}))
	g.Expect(health.HelmReleaseStatus(hr)).To(Equal(health.HelmReleaseStatus(whole)))
	g.Expect(health.HelmReleaseStatus(hr).Suspended).To(BeTrue())

	other, err := transformHelmRelease("not a HelmRelease")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other).To(Equal("not a HelmRelease"))
}
