package release

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	rspb "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

var (
	firstDeployed = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	lastDeployed  = time.Date(2026, 3, 4, 14, 30, 5, 0, time.UTC)
)

// testRelease is a release as `helm upgrade web` would record it: chart web
// 1.4.0 with a template, chart defaults and user-supplied values.
func testRelease(namespace, name string, revision int, status rspb.Status, manifest string) *rspb.Release {
	return &rspb.Release{
		Name:      name,
		Namespace: namespace,
		Version:   revision,
		Info: &rspb.Info{
			FirstDeployed: helmtime.Time{Time: firstDeployed},
			LastDeployed:  helmtime.Time{Time: lastDeployed},
			Description:   "Upgrade complete",
			Status:        status,
			Notes:         "Visit http://web.example.com",
		},
		Chart: &chart.Chart{
			Metadata: &chart.Metadata{
				APIVersion: chart.APIVersionV2,
				Name:       "web",
				Version:    "1.4.0",
				AppVersion: "2.3.1",
				Type:       "application",
			},
			Templates: []*chart.File{{Name: "templates/deployment.yaml", Data: []byte("apiVersion: apps/v1\nkind: Deployment\n")}},
			Values:    map[string]any{"replicaCount": 1, "image": map[string]any{"repository": "ghcr.io/acme/web", "tag": ""}},
		},
		Config: map[string]any{
			"replicaCount": 3,
			"image":        map[string]any{"tag": "2.3.1"},
			"ingress":      map[string]any{"enabled": true, "hosts": []any{"web.example.com"}},
		},
		Manifest: manifest,
	}
}

// testManifest renders n Deployment+Service pairs, about 1.2 KiB each.
func testManifest(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `---
# Source: web/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%[1]d
  labels:
    app.kubernetes.io/name: web
    app.kubernetes.io/instance: web
    app.kubernetes.io/version: "2.3.1"
    helm.sh/chart: web-1.4.0
spec:
  replicas: 3
  selector:
    matchLabels:
      app.kubernetes.io/name: web
      app.kubernetes.io/instance: web-%[1]d
  template:
    metadata:
      labels:
        app.kubernetes.io/name: web
        app.kubernetes.io/instance: web-%[1]d
    spec:
      containers:
        - name: web
          image: "ghcr.io/acme/web:2.3.1"
          ports:
            - name: http
              containerPort: 8080
          readinessProbe:
            httpGet:
              path: /healthz
              port: http
          resources:
            requests:
              cpu: 100m
              memory: 128Mi
---
# Source: web/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: web-%[1]d
  labels:
    app.kubernetes.io/name: web
    app.kubernetes.io/instance: web-%[1]d
spec:
  type: ClusterIP
  ports:
    - port: 80
      targetPort: http
      name: http
  selector:
    app.kubernetes.io/name: web
    app.kubernetes.io/instance: web-%[1]d
`, i)
	}
	return b.String()
}

// storeSecret stores rls with Helm's own secret driver and returns the
// Secret it wrote: Helm's real encoding (JSON, gzip, base64) and labels.
func storeSecret(t testing.TB, rls *rspb.Release) *corev1.Secret {
	t.Helper()
	cs := fake.NewClientset()
	key := StorageName(rls.Name, rls.Version)
	if err := driver.NewSecrets(cs.CoreV1().Secrets(rls.Namespace)).Create(key, rls); err != nil {
		t.Fatalf("helm secrets driver: %v", err)
	}
	s, err := cs.CoreV1().Secrets(rls.Namespace).Get(context.Background(), key, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get secret: %v", err)
	}
	return s
}

// storeConfigMap stores rls with Helm's configmap driver and returns the
// ConfigMap it wrote.
func storeConfigMap(t testing.TB, rls *rspb.Release) *corev1.ConfigMap {
	t.Helper()
	cs := fake.NewClientset()
	key := StorageName(rls.Name, rls.Version)
	if err := driver.NewConfigMaps(cs.CoreV1().ConfigMaps(rls.Namespace)).Create(key, rls); err != nil {
		t.Fatalf("helm configmaps driver: %v", err)
	}
	cm, err := cs.CoreV1().ConfigMaps(rls.Namespace).Get(context.Background(), key, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configmap: %v", err)
	}
	return cm
}

// legacyPayload encodes rls as Helm before v3.1 did: base64 of plain JSON,
// no gzip. Helm still reads it.
func legacyPayload(t testing.TB, rls *rspb.Release) []byte {
	t.Helper()
	b, err := json.Marshal(rls)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(base64.StdEncoding.EncodeToString(b))
}

// secretWith returns a Helm release Secret apps/sh.helm.release.v1.web.v7
// whose release key holds payload.
func secretWith(payload []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "apps",
			Name:      "sh.helm.release.v1.web.v7",
			Labels:    map[string]string{"owner": "helm", "name": "web", "version": "7", "status": "deployed"},
		},
		Type: SecretType,
		Data: map[string][]byte{"release": payload},
	}
}

func b64(b []byte) []byte { return []byte(base64.StdEncoding.EncodeToString(b)) }
