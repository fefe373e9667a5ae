package e2e_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"tugboat.dev/tugboat/agent"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/notify"
	"tugboat.dev/tugboat/controllers/notify/deliver"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/identity"
)

// previewChart is a chart with a Secret fed by a value. From 1.0.0 to
// 1.1.0 the Deployment gains the toleration its new default value adds
// and an annotation of the value region (default "global"), the ConfigMap
// a log level, and the Secret a key. 2.0.0 is 1.1.0 without the ConfigMap
// and with a Service: one object more and one less.
func previewChart(version string) *chart.Chart {
	values := map[string]any{"logLevel": "info", "db": map[string]any{"password": "chart-default-password"}}
	if version != "1.0.0" {
		values["logLevel"] = "debug"
		values["tolerations"] = []any{map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}}
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
`,
		"configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  level: {{ .Values.logLevel | quote }}
`,
		"deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
{{- if ne .Chart.Version "1.0.0" }}
  annotations:
    region: {{ .Values.region | default "global" | quote }}
{{- end }}
spec:
  replicas: 1
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
        - name: app
          image: registry.example/vault-app:{{ .Chart.AppVersion }}
{{- with .Values.tolerations }}
      tolerations:
{{ toYaml . | indent 8 }}
{{- end }}
`,
	}
	if version == "2.0.0" {
		delete(templates, "configmap.yaml")
		templates["service.yaml"] = `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
spec:
  selector: {app: {{ .Release.Name }}}
  ports:
    - port: 80
`
	}
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "vault-app", Version: version, AppVersion: version}, Values: values}
	raw, _ := yaml.Marshal(values)
	ch.Raw = []*chart.File{{Name: chartutil.ValuesfileName, Data: raw}}
	for name, data := range templates {
		ch.Templates = append(ch.Templates, &chart.File{Name: "templates/" + name, Data: []byte(data)})
	}
	return ch
}

// TestPreview_anApproverSeesTheRealChangeBeforeApproving (issue 26): a hub
// and a production spoke whose real agent previews. A helm Promotion into
// production, which requires approval, is previewed before it waits for
// approval: the agent renders 1.1.0 with the release's live values
// (reset-then-reuse) by a server-side dry run and answers the changed
// Deployment (the new toleration), the values diff, and the changed
// Secret only as changed. Nothing changes on the spoke, and no stored
// object holds the Secret's data or the live password.
func TestPreview_anApproverSeesTheRealChangeBeforeApproving(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, v := range []string{"1.0.0", "1.1.0"} {
		_, err := chartutil.Save(previewChart(v), dir)
		g.Expect(err).NotTo(HaveOccurred())
	}
	idx, err := repo.IndexDirectory(dir, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644)).To(Succeed())
	charts := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(charts.Close)

	hubCluster, clusters := startClusters(t, 1)
	prod := clusters[0]
	f := newFleetWith(t, hubCluster, func(o *hub.Options) {
		o.Receiver.ActionPollTimeout = 2 * time.Second
		o.Promotion.PreviewTimeout = 90 * time.Second
	})
	keyFile := filepath.Join(t.TempDir(), "prod.key")
	g.Expect(os.WriteFile(keyFile, f.registerSpoke("prod-preview"), 0o600)).To(Succeed())
	f.agentWith("prod-preview", f.agentConfig(prod, "apps"), keyFile, testr.New(t).WithName("prod-preview"), func(o *agent.Options) {
		o.Actions.Limits.Namespaces = []string{"apps"}
		o.Actions.Limits.ChartSources = []string{charts.URL}
	})

	const livePassword = "e2e-live-password-5d1e"
	in := action.NewInstall(newHelm(t, prod, "apps").cfg)
	in.ReleaseName, in.Namespace, in.Timeout = "vault", "apps", 30*time.Second
	_, err = in.RunWithContext(ctx, previewChart("1.0.0"), map[string]any{"db": map[string]any{"password": livePassword}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.current("prod-preview", "apps", "vault")).WithTimeout(60 * time.Second).Should(HaveField("Revision", int32(1)))

	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "vault"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release: "vault",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm, Helm: &tugboatv1alpha1.HelmStrategy{
				Repository: charts.URL, Chart: "vault-app", ValuesPolicy: tugboatv1alpha1.ValuesPolicyResetThenReuse}},
			Environments: []tugboatv1alpha1.Environment{{
				Name: "production", Targets: []tugboatv1alpha1.Target{{Spoke: "prod-preview", Namespace: "apps"}},
				Gates: tugboatv1alpha1.Gates{RequireApproval: true},
			}},
		},
	}
	g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())
	pr, err := request.Create(ctx, hubCluster.Client, p, "production", "1.1.0", tugboatv1alpha1.RequestedByUser, "test")
	g.Expect(err).NotTo(HaveOccurred())

	g.Eventually(f.phase(pr.Name)).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).
		Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))
	got := f.promotion(g, pr.Name)
	sum := got.Status.Preview
	g.Expect(sum).NotTo(BeNil())
	g.Expect(sum.Phase).To(Equal(tugboatv1alpha1.PreviewReady), sum.Reason)
	g.Expect(sum.ObjectsChanged).To(BeEquivalentTo(3))
	g.Expect(sum.TargetsPreviewed).To(BeEquivalentTo(1))

	pp := &tugboatv1alpha1.PromotionPreview{}
	g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: pr.Name}, pp)).To(Succeed())
	g.Expect(pp.Status.Groups).To(HaveLen(1))
	grp := pp.Status.Groups[0]
	g.Expect(grp.DryRun).To(Equal("server"))
	g.Expect(grp.Spokes).To(Equal([]string{"prod-preview"}))
	changes := map[string]tugboatv1alpha1.PreviewObject{}
	for _, o := range grp.Objects {
		changes[o.Kind+"/"+o.Name] = o
	}
	g.Expect(changes).To(HaveKey("Deployment/vault"))
	g.Expect(changes["Deployment/vault"].Change).To(Equal(tugboatv1alpha1.PreviewChanged))
	g.Expect(changes["Deployment/vault"].Diff).To(ContainSubstring("+      - effect: NoSchedule"))
	g.Expect(changes["Deployment/vault"].Diff).To(ContainSubstring("+      - image: registry.example/vault-app:1.1.0"))
	g.Expect(changes["Deployment/vault"].Diff).To(ContainSubstring("+        key: dedicated"))
	g.Expect(changes).To(HaveKey("Secret/vault-db"))
	g.Expect(changes["Secret/vault-db"].Secret).To(BeTrue())
	g.Expect(changes["Secret/vault-db"].Diff).To(BeEmpty())
	g.Expect(grp.ValuesDiff).To(ContainSubstring("-logLevel: info"))
	g.Expect(grp.ValuesDiff).To(ContainSubstring("+logLevel: debug"))
	g.Expect(grp.ValuesDiff).To(ContainSubstring("password: <redacted>"))

	// No stored object holds the Secret's data or the live password.
	for _, obj := range []any{got, pp} {
		b, err := json.Marshal(obj)
		g.Expect(err).NotTo(HaveOccurred())
		for _, s := range []string{livePassword, "app-user-1.1.0", "chart-default-password"} {
			g.Expect(string(b)).NotTo(ContainSubstring(s))
			g.Expect(string(b)).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString([]byte(s))))
		}
	}
	// Nothing changed on the spoke: no new revision.
	rel, err := newHelm(t, prod, "apps").get("vault")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Version).To(Equal(1))
	g.Expect(rel.Chart.Metadata.Version).To(Equal("1.0.0"))
}

// noticeRecorder records every notice the hub delivers, for every
// notifier of every Pipeline (hub.Options.NotifyBuilder): the delivery
// controller is the hub's own; only the hosted service is left out.
type noticeRecorder struct {
	mu  sync.Mutex
	got []notify.Notice
}

func (r *noticeRecorder) Notify(_ context.Context, n notify.Notice, _ string) (notify.Delivered, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, n)
	return notify.Delivered{}, nil
}

// events returns the events of the notices about promotion.
func (r *noticeRecorder) events(promotion string) []tugboatv1alpha1.NotifyEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []tugboatv1alpha1.NotifyEvent
	for _, n := range r.got {
		if n.Promotion != nil && n.Promotion.Name == promotion {
			out = append(out, n.Event)
		}
	}
	return out
}

// notice returns the last notice of event e about promotion.
func (r *noticeRecorder) notice(promotion string, e tugboatv1alpha1.NotifyEvent) *notify.Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.got) - 1; i >= 0; i-- {
		if n := r.got[i]; n.Promotion != nil && n.Promotion.Name == promotion && n.Event == e {
			return &n
		}
	}
	return nil
}

// TestPreview_aReleaseThatMovesAfterThePreviewIsPreviewedAgainBeforeActing
// (issue 26, drift on the way): two releases on a production spoke with a
// real agent, each promoted 1.0.0 -> 1.1.0 by its own Pipeline into
// production, which requires approval. Both are previewed; then someone
// upgrades both releases on the spoke by hand (a new revision each):
// "vault" with another log level (the change the promotion makes is no
// longer the one previewed), "steady" with the same chart and values
// (the same change). Both previews go Stale. Once approved, the hub asks
// the agent again before the strategy acts: for "vault" the new digest
// differs from the approved one, so status.preview.changedSinceApproval
// is set, the notifier is told (PromotionPreviewChanged, with the new
// summary) and an Event PreviewChanged is emitted; "steady" is computed
// again, found unchanged, and nobody is told anything more. Both proceed.
func TestPreview_aReleaseThatMovesAfterThePreviewIsPreviewedAgainBeforeActing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, v := range []string{"1.0.0", "1.1.0"} {
		_, err := chartutil.Save(previewChart(v), dir)
		g.Expect(err).NotTo(HaveOccurred())
	}
	idx, err := repo.IndexDirectory(dir, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644)).To(Succeed())
	charts := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(charts.Close)

	notices := &noticeRecorder{}
	hubCluster, clusters := startClusters(t, 1)
	prod := clusters[0]
	f := newFleetWith(t, hubCluster, func(o *hub.Options) {
		o.Receiver.ActionPollTimeout = 2 * time.Second
		o.Promotion.PreviewTimeout = 90 * time.Second
		o.NotifyBuilder = deliver.BuilderFunc(func(context.Context, *tugboatv1alpha1.Pipeline, *tugboatv1alpha1.Notifier) (notify.Notifier, error) {
			return notices, nil
		})
	})
	keyFile := filepath.Join(t.TempDir(), "prod.key")
	g.Expect(os.WriteFile(keyFile, f.registerSpoke("prod-drift"), 0o600)).To(Succeed())
	f.agentWith("prod-drift", f.agentConfig(prod, "apps"), keyFile, testr.New(t).WithName("prod-drift"), func(o *agent.Options) {
		o.Actions.Limits.Namespaces = []string{"apps"}
		o.Actions.Limits.ChartSources = []string{charts.URL}
	})

	h := newHelm(t, prod, "apps")
	values := map[string]any{"db": map[string]any{"password": "e2e-live-password-77c2"}}
	promotions := map[string]string{}
	for _, rel := range []string{"vault", "steady"} {
		_, err := h.tryInstall(ctx, rel, previewChart("1.0.0"), values)
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(f.current("prod-drift", "apps", rel)).WithTimeout(60 * time.Second).Should(HaveField("Revision", int32(1)))
		p := &tugboatv1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: rel},
			Spec: tugboatv1alpha1.PipelineSpec{
				Release: rel,
				Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm, Helm: &tugboatv1alpha1.HelmStrategy{
					Repository: charts.URL, Chart: "vault-app", ValuesPolicy: tugboatv1alpha1.ValuesPolicyResetThenReuse}},
				Environments: []tugboatv1alpha1.Environment{{
					Name: "production", Targets: []tugboatv1alpha1.Target{{Spoke: "prod-drift", Namespace: "apps"}},
					Gates: tugboatv1alpha1.Gates{RequireApproval: true},
				}},
				Notify: []tugboatv1alpha1.Notifier{{Name: "hook", Type: tugboatv1alpha1.NotifierWebhook,
					Webhook: &tugboatv1alpha1.WebhookNotifier{URL: "https://hooks.example/tugboat", SecretRef: &tugboatv1alpha1.LocalSecretReference{Name: "hook"}}}},
			},
		}
		g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())
		pr, err := request.Create(ctx, hubCluster.Client, p, "production", "1.1.0", tugboatv1alpha1.RequestedByUser, "test")
		g.Expect(err).NotTo(HaveOccurred())
		promotions[rel] = pr.Name
	}
	approved := map[string]string{}
	for rel, name := range promotions {
		g.Eventually(f.phase(name)).WithTimeout(90*time.Second).WithPolling(200*time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionWaitingApproval), rel)
		sum := f.promotion(g, name).Status.Preview
		g.Expect(sum).NotTo(BeNil())
		g.Expect(sum.Phase).To(Equal(tugboatv1alpha1.PreviewReady), sum.Reason)
		approved[rel] = sum.Digest
	}

	// Someone upgrades both releases by hand: "vault" with another log
	// level, "steady" with exactly what it runs.
	_, err = h.tryUpgrade(ctx, "vault", previewChart("1.0.0"), map[string]any{"db": values["db"], "logLevel": "warn"})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = h.tryUpgrade(ctx, "steady", previewChart("1.0.0"), values)
	g.Expect(err).NotTo(HaveOccurred())
	for rel, name := range promotions {
		g.Eventually(func(g Gomega) tugboatv1alpha1.PreviewPhase {
			pr := f.promotion(g, name)
			g.Expect(pr).NotTo(BeNil())
			g.Expect(pr.Status.Preview).NotTo(BeNil())
			return pr.Status.Preview.Phase
		}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Equal(tugboatv1alpha1.PreviewStale), rel)
		f.setApproval(g, name, true, "alice")
	}

	// Computed again, then the strategy acts.
	for rel, name := range promotions {
		g.Eventually(f.phase(name)).WithTimeout(120*time.Second).WithPolling(200*time.Millisecond).
			Should(BeElementOf(tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.PromotionVerifying, tugboatv1alpha1.PromotionSucceeded), rel)
		sum := f.promotion(g, name).Status.Preview
		g.Expect(sum.RecomputedAt).NotTo(BeNil(), rel)
		g.Expect(sum.Name).To(Equal(name+"-recheck"), rel)
		g.Expect(sum.Phase).To(Equal(tugboatv1alpha1.PreviewReady), sum.Reason)
		g.Expect(sum.ApprovedPhase).To(Equal(tugboatv1alpha1.PreviewStale), rel)
		g.Expect(sum.ApprovedDigest).To(Equal(approved[rel]), rel)
		pp := &tugboatv1alpha1.PromotionPreview{}
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: sum.Name}, pp)).To(Succeed())
		g.Expect(pp.Status.Targets).To(HaveLen(1))
		g.Expect(pp.Status.Targets[0].Revision).To(BeEquivalentTo(2), "compared against the revision made by hand")
	}

	vault, steady := promotions["vault"], promotions["steady"]
	sum := f.promotion(g, vault).Status.Preview
	g.Expect(sum.ChangedSinceApproval).To(BeTrue())
	g.Expect(sum.Digest).NotTo(Equal(approved["vault"]))
	g.Eventually(func() []tugboatv1alpha1.NotifyEvent { return notices.events(vault) }).WithTimeout(30 * time.Second).
		Should(ContainElement(tugboatv1alpha1.EventPromotionPreviewChanged))
	n := notices.notice(vault, tugboatv1alpha1.EventPromotionPreviewChanged)
	g.Expect(n.Promotion.Preview).To(HavePrefix("Ready: changed since approval: "))
	g.Expect(n.Promotion.Preview).To(ContainSubstring("not the change approved (digest " + approved["vault"][:12]))
	g.Expect(eventsAbout(g, hubCluster.Client, f.ns, "Promotion", vault)).To(ContainElements(
		HavePrefix("Normal PreviewRecomputing: "), HavePrefix("Warning PreviewChanged: the change differs from what was approved")))

	sum = f.promotion(g, steady).Status.Preview
	g.Expect(sum.ChangedSinceApproval).To(BeFalse())
	g.Expect(sum.Digest).To(Equal(approved["steady"]))
	g.Eventually(func() []tugboatv1alpha1.NotifyEvent { return notices.events(steady) }).WithTimeout(30 * time.Second).
		Should(ContainElement(tugboatv1alpha1.EventPromotionWaitingApproval))
	g.Consistently(func() []tugboatv1alpha1.NotifyEvent { return notices.events(steady) }).WithTimeout(3 * time.Second).
		ShouldNot(ContainElement(tugboatv1alpha1.EventPromotionPreviewChanged))
	g.Expect(eventsAbout(g, hubCluster.Client, f.ns, "Promotion", steady)).NotTo(ContainElement(HavePrefix("Warning PreviewChanged")))
	g.Expect(eventsAbout(g, hubCluster.Client, f.ns, "Promotion", steady)).To(ContainElement(HavePrefix("Normal PreviewRecomputing: ")))
}

// personKubeconfig writes a kubeconfig of the hub that impersonates user,
// bound in f.ns to the hub chart's ClusterRole tugboat-approver.
func (f *fleet) personKubeconfig(user string) string {
	f.t.Helper()
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "approver-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: identity.ApproverRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := f.hub.Client.Create(context.Background(), binding); err != nil {
		f.t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(f.hub.KubeconfigPath)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, auth := range kc.AuthInfos {
		auth.Impersonate, auth.ImpersonateGroups = user, []string{"system:authenticated"}
	}
	path := filepath.Join(f.t.TempDir(), user+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// TestPreview_onDemandWithoutAPromotion (issue 26): staging runs vault
// 1.1.0 and production 1.0.0, on one spoke whose real agent previews.
// carol, with the chart's ClusterRole tugboat-approver, runs `tugboat diff
// vault --from staging --to production`: the hub resolves the version
// staging runs and production's target, the agent renders 1.1.0 with
// production's live values, and the CLI prints the change (the changed
// Deployment, the Secret only as changed) as for a Promotion, plain and
// as JSON. The preview belongs to no Promotion; nothing changes on the
// spoke.
func TestPreview_onDemandWithoutAPromotion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, v := range []string{"1.0.0", "1.1.0"} {
		_, err := chartutil.Save(previewChart(v), dir)
		g.Expect(err).NotTo(HaveOccurred())
	}
	idx, err := repo.IndexDirectory(dir, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644)).To(Succeed())
	charts := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(charts.Close)

	hubCluster, clusters := startClusters(t, 1)
	spoke := clusters[0]
	f := newFleetWith(t, hubCluster, func(o *hub.Options) {
		o.Receiver.ActionPollTimeout = 2 * time.Second
		o.Promotion.PreviewTimeout = 90 * time.Second
	})
	keyFile := filepath.Join(t.TempDir(), "spoke.key")
	g.Expect(os.WriteFile(keyFile, f.registerSpoke("both"), 0o600)).To(Succeed())
	f.agentWith("both", f.agentConfig(spoke, "apps", "stage"), keyFile, testr.New(t).WithName("both"), func(o *agent.Options) {
		o.Actions.Limits.Namespaces = []string{"apps", "stage"}
		o.Actions.Limits.ChartSources = []string{charts.URL}
	})
	const livePassword = "e2e-live-password-0d3a"
	for ns, version := range map[string]string{"stage": "1.1.0", "apps": "1.0.0"} {
		_, err := newHelm(t, spoke, ns).tryInstall(ctx, "vault", previewChart(version), map[string]any{"db": map[string]any{"password": livePassword}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(f.current("both", ns, "vault")).WithTimeout(60 * time.Second).Should(HaveField("Revision", int32(1)))
	}
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "vault"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release: "vault",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm, Helm: &tugboatv1alpha1.HelmStrategy{
				Repository: charts.URL, Chart: "vault-app", ValuesPolicy: tugboatv1alpha1.ValuesPolicyResetThenReuse}},
			Environments: []tugboatv1alpha1.Environment{
				{Name: "staging", Targets: []tugboatv1alpha1.Target{{Spoke: "both", Namespace: "stage"}}},
				{Name: "production", Targets: []tugboatv1alpha1.Target{{Spoke: "both", Namespace: "apps"}}, Gates: tugboatv1alpha1.Gates{RequireApproval: true}},
			},
		},
	}
	g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())

	kc := f.personKubeconfig("carol")
	var out string
	g.Eventually(func() error {
		out, err = tugboatCLI("diff", "vault", "--from", "staging", "--to", "production", "-n", f.ns, "--kubeconfig", kc, "--timeout", "2m")
		return err
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "RBAC in effect")
	g.Expect(out).To(ContainSubstring("Pipeline vault: 1.1.0 from staging into production (on demand: promotionpreview vault-production-"))
	g.Expect(out).To(ContainSubstring("Preview Ready: 3 objects and"))
	g.Expect(out).To(ContainSubstring("Changed  Deployment apps/vault"))
	g.Expect(out).To(ContainSubstring("+      - effect: NoSchedule"))
	g.Expect(out).To(ContainSubstring("Secret apps/vault-db (a Secret: its data is never shown)"))
	g.Expect(out).NotTo(ContainSubstring(livePassword))

	jsonOut, err := tugboatCLI("diff", "vault", "--from", "staging", "--to", "production", "-n", f.ns, "--kubeconfig", kc, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), jsonOut)
	start := strings.Index(jsonOut, "{") // after the progress line (stderr, here the same buffer)
	g.Expect(start).To(BeNumerically(">=", 0), jsonOut)
	jsonOut = jsonOut[start:]
	var v struct {
		Pipeline, From, To, Version, PreviewName string
		Preview                                  tugboatv1alpha1.PreviewSummary
		Groups                                   []tugboatv1alpha1.PreviewGroup
	}
	g.Expect(json.Unmarshal([]byte(jsonOut), &v)).To(Succeed(), jsonOut)
	g.Expect(v.Version).To(Equal("1.1.0"))
	g.Expect(v.Preview.Phase).To(Equal(tugboatv1alpha1.PreviewReady))
	g.Expect(v.Groups).To(HaveLen(1))
	g.Expect(v.Groups[0].FromVersion).To(Equal("1.0.0"))
	g.Expect(v.Groups[0].Spokes).To(Equal([]string{"both"}))

	// The preview is the on-demand one, owned by nobody (the Pipeline's
	// own promotion into production, which waits for approval, has its
	// own).
	od := &tugboatv1alpha1.PromotionPreview{}
	g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: v.PreviewName}, od)).To(Succeed())
	g.Expect(od.Spec.Promotion).To(BeEmpty())
	g.Expect(od.OwnerReferences).To(BeEmpty())
	g.Expect(od.Spec.Version).To(Equal("1.1.0"))
	rel, err := newHelm(t, spoke, "apps").get("vault")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Version).To(Equal(1))
}
