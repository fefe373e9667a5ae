package config_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/config"
	"tugboat.dev/tugboat/e2e/harness"
)

// maximalHubValues turns every optional part of the hub chart on.
func maximalHubValues() map[string]any {
	return map[string]any{
		"image":            map[string]any{"repository": "registry.example.com/tugboat/tugboat", "digest": "sha256:" + sixtyFourHex, "pullPolicy": "Always"},
		"imagePullSecrets": []any{map[string]any{"name": "registry"}},
		"replicas":         3,
		"spokeNamespaces":  []any{"fleet", "teams"},
		"receiver": map[string]any{
			"service": map[string]any{"type": "LoadBalancer", "port": 8443, "annotations": map[string]any{"example.com/lb": "internal"}},
			"tls": map[string]any{"mode": "certManager", "secretName": "hub-tls", "dnsNames": []any{"tugboat.example.com"},
				"certManager": map[string]any{"issuerRef": map[string]any{"name": "letsencrypt", "kind": "ClusterIssuer"}}},
		},
		"agentBootstrap":      map[string]any{"allowedValues": []any{"replicas", "helmStrategy.enabled"}},
		"extraArgs":           []any{"--promotion-timeout=1h"},
		"logLevel":            "debug",
		"metrics":             map[string]any{"serviceMonitor": map[string]any{"enabled": true, "interval": "15s", "labels": map[string]any{"release": "prometheus"}}},
		"networkPolicy":       map[string]any{"enabled": true, "metricsFrom": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"name": "monitoring"}}}}},
		"podDisruptionBudget": map[string]any{"enabled": true, "minAvailable": 2},
		"podAnnotations":      map[string]any{"example.com/team": "platform"},
		"podLabels":           map[string]any{"team": "platform"},
		"nodeSelector":        map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":         []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"}},
		"priorityClassName":   "system-cluster-critical",
	}
}

// maximalAgentValues turns every optional part of the agent chart on.
func maximalAgentValues() map[string]any {
	return agentValues(map[string]any{
		"hub":             map[string]any{"url": "https://tugboat.example.com:8443", "keySecretName": "hub-key", "caSecretName": "hub-ca"},
		"image":           map[string]any{"repository": "registry.example.com/tugboat/tugboat-agent", "tag": "v1.2.3"},
		"replicas":        2,
		"watchNamespaces": []any{"apps", "web"},
		"webhook":         map[string]any{"certificate": "certManager"},
		"backfill":        map[string]any{"enabled": true, "namespaces": []any{"apps", "web"}},
		"helmStrategy": map[string]any{"enabled": true, "allowedNamespaces": []any{"apps"}, "allowedChartSources": []any{"oci://ghcr.io/org"},
			"allowDowngrades": true, "installMissing": true, "credentialsSecret": "tugboat-system/chart-creds"},
		"extraArgs":           []any{"--backfill-interval=10m"},
		"metrics":             map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
		"networkPolicy":       map[string]any{"enabled": true, "metricsFrom": []any{map[string]any{"podSelector": map[string]any{}}}},
		"podDisruptionBudget": map[string]any{"enabled": true},
	})
}

const sixtyFourHex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestCharts_lint runs Helm's own linter (helm lint, strict) on both charts
// with their values.
func TestCharts_lint(t *testing.T) {
	for _, tc := range []struct {
		chart  string
		values map[string]any
	}{
		{config.HubChart, nil}, {config.HubChart, maximalHubValues()},
		{config.AgentChart, agentValues(nil)}, {config.AgentChart, maximalAgentValues()},
	} {
		t.Run(tc.chart, func(t *testing.T) {
			dir := extractChart(t, tc.chart)
			result := lint.AllWithKubeVersion(dir, tc.values, "tugboat-system", &chartutil.KubeVersion{Version: "v1.36.0", Major: "1", Minor: "36"})
			for _, m := range result.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint %s: %s", tc.chart, m)
				}
			}
		})
	}
}

// TestCharts_everyObjectIsAcceptedByARealAPIServer renders both charts with
// default and with maximal values and server-side dry-run applies every
// object on a real API server (which validates it against its schema).
// cert-manager's and the Prometheus Operator's kinds are served by stand-in
// CRDs that accept any content: their schemas are not in reach here.
func TestCharts_everyObjectIsAcceptedByARealAPIServer(t *testing.T) {
	c := harness.StartT(t, harness.Options{Name: "charts", ControlPlaneOnly: true})
	ctx := context.Background()
	g := NewWithT(t)
	for _, crd := range []struct{ group, kind, plural string }{
		{"cert-manager.io", "Certificate", "certificates"},
		{"cert-manager.io", "Issuer", "issuers"},
		{"monitoring.coreos.com", "ServiceMonitor", "servicemonitors"},
	} {
		g.Expect(c.Client.Create(ctx, openCRD(crd.group, crd.kind, crd.plural))).To(Succeed())
	}
	for _, ns := range []string{"tugboat-system", "fleet", "teams", "apps", "web"} {
		g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	for _, tc := range []struct {
		name   string
		chart  string
		values map[string]any
	}{
		{"hub defaults", config.HubChart, nil},
		{"hub maximal", config.HubChart, maximalHubValues()},
		{"agent defaults", config.AgentChart, agentValues(nil)},
		{"agent maximal", config.AgentChart, maximalAgentValues()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			objs, err := config.Render(tc.chart, "tugboat-system", tc.values)
			g.Expect(err).NotTo(HaveOccurred())
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					// Applied for real (dry run or not, the kinds it defines
					// are checked below only once it is served).
					continue
				}
				g.Eventually(func() error {
					return c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("charts-test"), client.ForceOwnership, client.DryRunAll)
				}).WithTimeout(30*time.Second).Should(Succeed(), "%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
			}
		})
	}
}

// TestHubChart_upgradesInPlaceAndKeepsEverySpokeAndHistory installs the hub
// chart as its previous version would be (the same chart, version 0.0.1),
// records a Spoke, a ReleaseHistory and a Pipeline, upgrades to this
// version with `tugboat install`'s code, and checks that all of them are
// still there; then uninstalls, and the CRDs and every object stay.
func TestHubChart_upgradesInPlaceAndKeepsEverySpokeAndHistory(t *testing.T) {
	c := harness.StartT(t, harness.Options{Name: "upgrade", ControlPlaneOnly: true})
	ctx := context.Background()
	g := NewWithT(t)
	target := config.Target{Kubeconfig: c.KubeconfigPath, Namespace: "tugboat-system"}

	previous, err := config.Chart(config.HubChart)
	g.Expect(err).NotTo(HaveOccurred())
	previous.Metadata.Version, previous.Metadata.AppVersion = "0.0.1", "0.0.1"
	cfg := new(action.Configuration)
	g.Expect(cfg.Init(target.Getter(), target.Namespace, "secret", func(string, ...any) {})).To(Succeed())
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = config.HubChart, target.Namespace, true
	_, err = install.RunWithContext(ctx, previous, map[string]any{"replicas": 1})
	g.Expect(err).NotTo(HaveOccurred())

	g.Eventually(func() error {
		return c.Client.List(ctx, &tugboatv1alpha1.SpokeList{})
	}).WithTimeout(30 * time.Second).Should(Succeed())
	spoke := &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tugboat-system", Name: "staging-1"},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: "staging-1-key"}},
	}
	g.Expect(c.Client.Create(ctx, spoke)).To(Succeed())
	rh := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tugboat-system", Name: tugboatv1alpha1.ReleaseHistoryName("staging-1", "apps", "web")},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: "staging-1", Namespace: "apps", Release: "web"},
	}
	g.Expect(c.Client.Create(ctx, rh)).To(Succeed())

	rel, err := config.Apply(ctx, target, config.HubChart, map[string]any{"replicas": 2}, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Version).To(Equal(2))
	g.Expect(rel.Chart.Metadata.Version).NotTo(Equal("0.0.1"))

	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(spoke), &tugboatv1alpha1.Spoke{})).To(Succeed())
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(rh), &tugboatv1alpha1.ReleaseHistory{})).To(Succeed())
	dep := &unstructured.Unstructured{}
	dep.SetAPIVersion("apps/v1")
	dep.SetKind("Deployment")
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-hub"}, dep)).To(Succeed())
	replicas, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas")
	g.Expect(replicas).To(Equal(int64(2)))

	removed, err := config.Uninstall(target, config.HubChart, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(BeTrue())
	err = c.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-hub"}, dep)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Deployment goes: %v", err)
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: "spokes.tugboat.dev"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed(), "the CRDs stay")
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(spoke), &tugboatv1alpha1.Spoke{})).To(Succeed(), "and the Spokes")
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(rh), &tugboatv1alpha1.ReleaseHistory{})).To(Succeed(), "and the histories")
	removed, err = config.Uninstall(target, config.HubChart, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(BeFalse(), "nothing left to uninstall")
}

// openCRD is a namespaced CRD for kind that accepts any content.
func openCRD(group, kind, plural string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: plural, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptrTrue(),
				}},
			}},
		},
	}
}

func ptrTrue() *bool { b := true; return &b }

// extractChart writes the embedded chart into a directory, for helm lint.
func extractChart(t *testing.T, name string) string {
	t.Helper()
	c, err := config.Chart(name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := chartutil.SaveDir(c, dir); err != nil {
		t.Fatal(err)
	}
	return dir + "/" + name
}

// TestHubChart_upgradeReissuesTheReceiverCertificateForNewNames: adding a
// name to receiver.tls.dnsNames on an upgrade issues a new serving
// certificate with it, signed by the same CA (the agents' --hub-ca-file
// keeps working); an upgrade with the same names keeps the certificate
// (security review 3: before, nothing changed until the Secret was
// deleted, as install.md did not say).
func TestHubChart_upgradeReissuesTheReceiverCertificateForNewNames(t *testing.T) {
	c := harness.StartT(t, harness.Options{Name: "tls-names", ControlPlaneOnly: true})
	ctx := context.Background()
	g := NewWithT(t)
	target := config.Target{Kubeconfig: c.KubeconfigPath, Namespace: "tugboat-system"}
	values := func(names ...any) map[string]any {
		return map[string]any{"replicas": 0, "receiver": map[string]any{"tls": map[string]any{"dnsNames": names}}}
	}
	served := func() (*x509.Certificate, []byte, []byte) {
		s := &corev1.Secret{}
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-hub-receiver-tls"}, s)).To(Succeed())
		block, _ := pem.Decode(s.Data["tls.crt"])
		g.Expect(block).NotTo(BeNil())
		cert, err := x509.ParseCertificate(block.Bytes)
		g.Expect(err).NotTo(HaveOccurred())
		return cert, s.Data["ca.crt"], s.Data["tls.crt"]
	}
	verifies := func(cert *x509.Certificate, ca []byte, name string) error {
		pool := x509.NewCertPool()
		g.Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
		_, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name})
		return err
	}

	_, err := config.Apply(ctx, target, config.HubChart, values("hub.example.com"), time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	first, ca, firstPEM := served()
	g.Expect(first.DNSNames).To(ContainElement("hub.example.com"))
	g.Expect(first.DNSNames).NotTo(ContainElement("hub2.example.com"))

	_, err = config.Apply(ctx, target, config.HubChart, values("hub.example.com"), time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	_, caAgain, samePEM := served()
	g.Expect(samePEM).To(Equal(firstPEM), "the same names keep the certificate")
	g.Expect(caAgain).To(Equal(ca))

	_, err = config.Apply(ctx, target, config.HubChart, values("hub.example.com", "hub2.example.com"), time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	second, caAfter, _ := served()
	g.Expect(second.DNSNames).To(ContainElements("hub.example.com", "hub2.example.com"))
	g.Expect(caAfter).To(Equal(ca), "the CA the agents trust stays")
	g.Expect(verifies(second, ca, "hub2.example.com")).To(Succeed())
}
