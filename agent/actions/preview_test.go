package actions

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"tugboat.dev/tugboat/agent/actions/preview"
	"tugboat.dev/tugboat/api/wire"
)

// vaultChart is a chart with a Secret fed by values, served by the test
// repository at 1.0.0 and 1.1.0. From 1.0.0 to 1.1.0 the Deployment gains
// a toleration and a new image, the ConfigMap (which embeds the database
// password) a new level, the Secret a key, a Service is added and the
// legacy ConfigMap removed; the defaults change logLevel and metricsAuthKey.
const vaultChart = "vault-app"

func vaultChartAt(version string) *chart.Chart {
	v11 := version != "1.0.0"
	values := map[string]any{
		"replicaCount":   1,
		"logLevel":       "info",
		"metricsAuthKey": "metrics-key-default-one",
		"db":             map[string]any{"host": "db.internal", "password": "default-db-password"},
		"apiToken":       "default-api-token",
	}
	templates := map[string]string{
		"secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-db
stringData:
  password: {{ .Values.db.password | quote }}
{{- if ne .Chart.Version "1.0.0" }}
  user: app-user-{{ .Chart.Version }}
{{- end }}
data:
  token: {{ .Values.apiToken | b64enc }}
`,
		"configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  dsn: "postgres://app:{{ .Values.db.password }}@{{ .Values.db.host }}/app"
  level: {{ .Values.logLevel | quote }}
`,
		"deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicaCount }}
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
        - name: app
          image: registry.example/app:{{ .Chart.AppVersion }}
{{- with .Values.tolerations }}
      tolerations:
{{ toYaml . | indent 8 }}
{{- end }}
`,
	}
	if v11 {
		values["logLevel"] = "debug"
		values["metricsAuthKey"] = "metrics-key-rotated-two"
		values["tolerations"] = []any{map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}}
		templates["service.yaml"] = `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
spec:
  selector: {app: {{ .Release.Name }}}
  ports:
    - port: 80
`
	} else {
		templates["legacy.yaml"] = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-legacy
data:
  old: "yes"
`
	}
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: vaultChart, Version: version, AppVersion: version}, Values: values}
	raw, _ := yaml.Marshal(values)
	ch.Raw = []*chart.File{{Name: chartutil.ValuesfileName, Data: raw}}
	for name, data := range templates {
		ch.Templates = append(ch.Templates, &chart.File{Name: "templates/" + name, Data: []byte(data)})
	}
	return ch
}

// lookupChart is a chart whose template looks up the cluster's Nodes
// (Helm's lookup function), which a namespaced role cannot list.
const lookupChart = "lookup-app"

func lookupChartAt(version string) *chart.Chart {
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: lookupChart, Version: version, AppVersion: version}, Values: map[string]any{}}
	ch.Templates = []*chart.File{{Name: "templates/configmap.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  version: {{ .Chart.Version | quote }}
  nodes: {{ if (lookup "v1" "Node" "" "") }}"looked up"{{ else }}"not looked up"{{ end }}
`)}}
	return ch
}

// packagePreviewCharts packages vaultChart, lookupChart, manyChart and
// the sample chart (demo) at 1.0.0 and 1.1.0 into dir.
func packagePreviewCharts(dir string) error {
	for _, v := range []string{"1.0.0", "1.1.0"} {
		demo, err := loader.Load(demoChartDir)
		if err != nil {
			return err
		}
		demo.Metadata.Version, demo.Metadata.AppVersion = v, v
		for _, ch := range []*chart.Chart{vaultChartAt(v), lookupChartAt(v), manyChartAt(v), demo} {
			if _, err := chartutil.Save(ch, dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// The live values of the vault-app releases of these tests: secrets the
// answer must never carry.
var liveSecrets = map[string]any{
	"db":       map[string]any{"password": "live-db-password-7f3a"},
	"apiToken": "live-api-token-91c2",
}

func installVault(t *testing.T, ns, name string) {
	t.Helper()
	in := action.NewInstall(helmConfig(t, ns))
	in.ReleaseName, in.Namespace, in.Timeout = name, ns, 30*time.Second
	if _, err := in.RunWithContext(context.Background(), vaultChartAt("1.0.0"), liveSecrets); err != nil {
		t.Fatalf("helm install %s: %v", name, err)
	}
}

func previewAction(ns, name, chartName, version, policy string) wire.Action {
	return wire.Action{
		ID:        wire.NewActionID(randomHex(8), "spoke", ns, name),
		Type:      wire.ActionPreview,
		Promotion: "pipelines/" + name + "-" + version,
		Namespace: ns,
		Release:   name,
		Preview:   &wire.PreviewAction{Chart: wire.ChartSource{Repository: chartsURL, Name: chartName}, Version: version, ValuesPolicy: policy},
		Created:   time.Now(),
	}
}

// A preview renders the promoted version with the release's live values
// as the upgrade would apply them (reset-then-reuse: the new defaults and
// the live values), through a server-side dry run, and answers the objects
// added, removed and changed and the values diff; the spoke is not changed
// (no new revision), and a second preview answers the same.
func TestExecutor_previewAnswersTheChangeAndChangesNothing(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	installVault(t, ns, "vault")
	e := newExecutor(t, testOptions(allowAll()))

	a := previewAction(ns, "vault", vaultChart, "1.1.0", wire.ValuesResetThenReuse)
	out := execute(t, e, a)
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Revision).To(BeZero(), "a preview makes no revision")
	res := out.Preview
	g.Expect(res).NotTo(BeNil())
	g.Expect(res.DryRun).To(Equal(wire.DryRunServer))
	g.Expect(res.FromVersion).To(Equal("1.0.0"))
	g.Expect(res.Revision).To(Equal(1))
	changes := map[string]string{}
	for _, o := range res.Objects {
		changes[o.Kind+"/"+o.Name] = o.Change
	}
	g.Expect(changes).To(Equal(map[string]string{
		"ConfigMap/vault-config": wire.ChangeChanged,
		"ConfigMap/vault-legacy": wire.ChangeRemoved,
		"Deployment/vault":       wire.ChangeChanged,
		"Secret/vault-db":        wire.ChangeChanged,
		"Service/vault":          wire.ChangeAdded,
	}))
	for _, o := range res.Objects {
		switch o.Kind + "/" + o.Name {
		case "Deployment/vault":
			g.Expect(o.Diff).To(ContainSubstring("+      - effect: NoSchedule"))
			g.Expect(o.Diff).To(ContainSubstring("+      - image: registry.example/app:1.1.0"))
		case "Secret/vault-db":
			g.Expect(o.Secret).To(BeTrue())
			g.Expect(o.Diff).To(BeEmpty())
		}
	}
	g.Expect(res.ValuesDiff).To(ContainSubstring("-logLevel: info"))
	g.Expect(res.ValuesDiff).To(ContainSubstring("+logLevel: debug"))
	g.Expect(res.ValuesDiff).To(ContainSubstring("+tolerations:"))
	g.Expect(res.ValuesDiff).To(ContainSubstring("+metricsAuthKey: '" + preview.RedactedChanged + "'"))

	g.Expect(history(t, ns, "vault")).To(HaveLen(1), "a preview writes no revision")
	g.Expect(last(t, ns, "vault").Info.Status.String()).To(Equal("deployed"))

	again := execute(t, e, a)
	g.Expect(again.Preview).To(Equal(res), "the same preview answers the same")
	g.Expect(history(t, ns, "vault")).To(HaveLen(1))
}

// Issue 26: secrets are never sent. The outcome, as the agent posts it,
// holds no byte of any Secret's data (the chart's Secret, its base64), no
// live value under a sensitive key, and no value that feeds a Secret,
// though the ConfigMap embeds the password and the Secret changed.
func TestExecutor_previewNeverSendsSecretData(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	installVault(t, ns, "vault")
	e := newExecutor(t, testOptions(allowAll()))
	for _, policy := range []string{wire.ValuesReuse, wire.ValuesResetThenReuse} {
		out := execute(t, e, previewAction(ns, "vault", vaultChart, "1.1.0", policy))
		g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
		body, err := json.Marshal(out)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(body)).To(ContainSubstring(`"secret":true`))
		for _, s := range []string{
			"live-db-password-7f3a", "live-api-token-91c2", "app-user-1.1.0",
			"default-db-password", "default-api-token", "metrics-key-default-one", "metrics-key-rotated-two",
		} {
			g.Expect(string(body)).NotTo(ContainSubstring(s), policy)
			g.Expect(string(body)).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString([]byte(s))), policy)
		}
	}
}

// With reuse (helm upgrade --reuse-values) the new chart's defaults are
// not applied: the preview shows exactly that, no new toleration (the trap
// the sample falls into), and no values change.
func TestExecutor_previewWithReuseShowsWhatReuseApplies(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	installVault(t, ns, "vault")
	out := execute(t, newExecutor(t, testOptions(allowAll())), previewAction(ns, "vault", vaultChart, "1.1.0", wire.ValuesReuse))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Preview.ValuesDiff).To(BeEmpty())
	for _, o := range out.Preview.Objects {
		g.Expect(o.Diff).NotTo(ContainSubstring("tolerations"))
	}
}

// A preview is bound by the spoke's limits like an upgrade: a namespace,
// a chart source or a downgrade they do not allow is refused, and a
// release that is not there fails with the reason.
func TestExecutor_previewWithinTheSpokesLimits(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.1.0", nil)
	e := newExecutor(t, testOptions(Limits{Namespaces: []string{"elsewhere"}, ChartSources: []string{"http://" + chartsHost}}))
	out := execute(t, e, previewAction(ns, "web", "web", "1.2.0", ""))
	g.Expect(out.Result).To(Equal(wire.ActionRefused))
	g.Expect(out.Message).To(ContainSubstring("namespace " + ns))
	g.Expect(out.Preview).To(BeNil())

	e = newExecutor(t, testOptions(allowAll()))
	out = execute(t, e, previewAction(ns, "web", "web", "1.0.0", ""))
	g.Expect(out.Result).To(Equal(wire.ActionRefused))
	g.Expect(out.Message).To(ContainSubstring("downgrade"))

	out = execute(t, e, previewAction(ns, "web", otherChart, "1.1.0", ""))
	g.Expect(out.Result).To(Equal(wire.ActionRefused))
	g.Expect(out.Message).To(ContainSubstring("never the chart"))

	out = execute(t, e, previewAction(ns, "missing", "web", "1.2.0", ""))
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(ContainSubstring("no deployed revision"))

	bad := previewAction(ns, "web", "web", "1.2.0", "")
	bad.Version = "1.2.0"
	out = execute(t, e, bad)
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(ContainSubstring("a preview sets no version"))
	g.Expect(history(t, ns, "web")).To(HaveLen(1))

	// And the web chart's own preview: the image and greeting change.
	out = execute(t, e, previewAction(ns, "web", "web", "1.2.0", ""))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	var names []string
	for _, o := range out.Preview.Objects {
		names = append(names, o.Kind+"/"+o.Name+"/"+o.Change)
	}
	g.Expect(strings.Join(names, ",")).To(Equal("ConfigMap/web-config/Changed,Deployment/web/Changed"))
}

// A preview runs as the agent's ServiceAccount with the shipped opt-in role
// of the helm strategy: where the role is bound, the server-side dry run is
// allowed, and where the chart looks up what the role may not read, a
// client render answers instead; where the role is not bound, the agent
// cannot even read the release, and the preview fails saying so. None
// writes a revision.
func TestExecutor_previewAsTheAgentWithTheHelmStrategyRole(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	role := helmStrategyRole(t)
	role.Name += "-" + randomHex(3)
	g.Expect(cluster.Client.Create(ctx, &role)).To(Succeed())
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), &role) })
	saNS := newNamespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: saNS, Name: "tugboat-agent"}}
	g.Expect(cluster.Client.Create(ctx, sa)).To(Succeed())
	allowed, other := newNamespace(t), newNamespace(t)
	g.Expect(cluster.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: allowed, Name: "tugboat-agent-helm-strategy"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: sa.Name}},
	})).To(Succeed())
	installVault(t, allowed, "vault")
	installVault(t, other, "vault")

	cfg := rest.CopyConfig(cluster.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + saNS + ":" + sa.Name}
	e, err := NewExecutor(cfg, testOptions(allowAll()), testr.New(t))
	g.Expect(err).NotTo(HaveOccurred())

	out := execute(t, e, previewAction(allowed, "vault", vaultChart, "1.1.0", wire.ValuesResetThenReuse))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Preview.DryRun).To(Equal(wire.DryRunServer))
	g.Expect(out.Preview.ObjectsChanged).To(Equal(5))

	// A chart that looks up what the role may not read (the cluster's
	// Nodes): the server-side dry run is refused, a client render answers.
	in := action.NewInstall(helmConfig(t, allowed))
	in.ReleaseName, in.Namespace, in.Timeout = "lookup", allowed, 30*time.Second
	_, err = in.RunWithContext(ctx, lookupChartAt("1.0.0"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	out = execute(t, e, previewAction(allowed, "lookup", lookupChart, "1.1.0", ""))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Preview.DryRun).To(Equal(wire.DryRunClient))
	g.Expect(out.Preview.Objects).To(HaveLen(1))
	g.Expect(out.Preview.Objects[0].Diff).To(ContainSubstring(`-  nodes: looked up`))
	g.Expect(out.Preview.Objects[0].Diff).To(ContainSubstring(`+  nodes: not looked up`))
	g.Expect(history(t, allowed, "lookup")).To(HaveLen(1))

	out = execute(t, e, previewAction(other, "vault", vaultChart, "1.1.0", wire.ValuesResetThenReuse))
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(ContainSubstring("forbidden"))
	g.Expect(out.Preview).To(BeNil())
	g.Expect(history(t, allowed, "vault")).To(HaveLen(1))
	g.Expect(history(t, other, "vault")).To(HaveLen(1))
}
