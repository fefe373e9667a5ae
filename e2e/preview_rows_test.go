package e2e_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	netmail "net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/agent"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/notify/deliver"
	"tugboat.dev/tugboat/controllers/notify/notifytest"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// previewRepo serves a chart repository of previewChart's versions.
func previewRepo(t *testing.T, versions ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, v := range versions {
		if _, err := chartutil.Save(previewChart(v), dir); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := repo.IndexDirectory(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	charts := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(charts.Close)
	return charts.URL
}

// bodies is an HTTP endpoint that records every request body (a Slack
// incoming webhook, a signed webhook receiver).
type bodies struct {
	mu     sync.Mutex
	got    []string
	header []http.Header
}

func (b *bodies) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.got = append(b.got, string(data))
	b.header = append(b.header, r.Header.Clone())
	b.mu.Unlock()
	_, _ = w.Write([]byte("ok"))
}

func (b *bodies) headers() []http.Header {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]http.Header(nil), b.header...)
}

func (b *bodies) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.got...)
}

// mailText is a received message as a mail client shows it: the decoded
// subject and every part, decoded (quoted-printable or base64).
func mailText(g Gomega, data []byte) string {
	m, err := netmail.ReadMessage(bytes.NewReader(data))
	g.Expect(err).NotTo(HaveOccurred())
	subject, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	var b strings.Builder
	b.WriteString(subject + "\n")
	_, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	g.Expect(err).NotTo(HaveOccurred())
	var walk func(r *multipart.Reader)
	walk = func(r *multipart.Reader) {
		for {
			p, err := r.NextPart()
			if errors.Is(err, io.EOF) {
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			pt, pp, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
			if strings.HasPrefix(pt, "multipart/") {
				walk(multipart.NewReader(p, pp["boundary"]))
				continue
			}
			var body io.Reader = p // quoted-printable: decoded by the reader
			if strings.EqualFold(p.Header.Get("Content-Transfer-Encoding"), "base64") {
				body = base64.NewDecoder(base64.StdEncoding, p)
			}
			data, err := io.ReadAll(body)
			g.Expect(err).NotTo(HaveOccurred())
			b.Write(data)
			b.WriteString("\n")
		}
	}
	walk(multipart.NewReader(m.Body, params["boundary"]))
	return b.String()
}

// TestPreview_perEnvironmentValuesAddedAndRemovedObjectsAndNoSecretAnywhere
// (issue 26): one spoke with a real agent runs release vault in namespace
// stage (staging) and in apps (production, with a production-only value
// region: eu-prod-only), and release shape in apps. Promotions of vault
// 1.1.0 into staging and into production, and of shape 2.0.0 into
// production, all behind approval, are previewed by the agent with each
// release's live values:
//
//   - production's preview of vault shows its own region
//     (eu-prod-only), staging's the chart's default (global) and nothing of
//     production's override: two distinct changes;
//   - shape's upgrade to 2.0.0 lists the ConfigMap removed and the Service
//     added;
//   - every preview shows the chart's Secret only as changed, and neither
//     the Secret's data (plaintext or base64) nor the live password is in
//     any stored object (the PromotionPreviews, the Promotions, the Events)
//     nor in any notice payload: Slack (an incoming webhook), email
//     (through a real SMTP server, STARTTLS and AUTH) and the signed
//     webhook, each of which carried the preview's summary.
func TestPreview_perEnvironmentValuesAddedAndRemovedObjectsAndNoSecretAnywhere(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	charts := previewRepo(t, "1.0.0", "1.1.0", "2.0.0")

	slackHook, hook := &bodies{}, &bodies{}
	slackSrv, hookSrv := httptest.NewServer(slackHook), httptest.NewServer(hook)
	t.Cleanup(slackSrv.Close)
	t.Cleanup(hookSrv.Close)
	ca := notifytest.NewTestCA(t)
	mail := notifytest.StartMailServer(t, ca.ServerTLS(), true)

	hubCluster, clusters := startClusters(t, 1)
	spoke := clusters[0]
	f := newFleetWith(t, hubCluster, func(o *hub.Options) {
		o.Receiver.ActionPollTimeout = 2 * time.Second
		o.Promotion.PreviewTimeout = 90 * time.Second
	})
	keyFile := filepath.Join(t.TempDir(), "spoke.key")
	g.Expect(os.WriteFile(keyFile, f.registerSpoke("rows"), 0o600)).To(Succeed())
	f.agentWith("rows", f.agentConfig(spoke, "apps", "stage"), keyFile, testr.New(t).WithName("rows"), func(o *agent.Options) {
		o.Actions.Limits.Namespaces = []string{"apps", "stage"}
		o.Actions.Limits.ChartSources = []string{charts}
	})

	const livePassword = "e2e-live-password-3b9f"
	db := map[string]any{"password": livePassword}
	for _, r := range []struct {
		ns, release string
		values      map[string]any
	}{
		{"stage", "vault", map[string]any{"db": db}},
		{"apps", "vault", map[string]any{"db": db, "region": "eu-prod-only"}},
		{"apps", "shape", map[string]any{"db": db}},
	} {
		_, err := newHelm(t, spoke, r.ns).tryInstall(ctx, r.release, previewChart("1.0.0"), r.values)
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(f.current("rows", r.ns, r.release)).WithTimeout(60*time.Second).Should(HaveField("Revision", int32(1)), r.ns+"/"+r.release)
	}

	for name, data := range map[string]map[string][]byte{
		"slack": {deliver.SlackAddressKey: []byte(slackSrv.URL + "/services/T0/B0/x")},
		"mail":  {deliver.EmailUsernameKey: []byte(notifytest.MailUser), deliver.EmailPasswordKey: []byte(notifytest.MailPassword), deliver.EmailCAKey: ca.PEM},
		"hook":  {deliver.WebhookKeyKey: []byte("e2e-webhook-signing-key-0123456789abcdef")},
	} {
		g.Expect(hubCluster.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Data: data})).To(Succeed())
	}
	notifiers := []tugboatv1alpha1.Notifier{
		{Name: "slack", Type: tugboatv1alpha1.NotifierSlack, Slack: &tugboatv1alpha1.SlackNotifier{SecretRef: tugboatv1alpha1.LocalSecretReference{Name: "slack"}}},
		{Name: "mail", Type: tugboatv1alpha1.NotifierEmail, Mode: tugboatv1alpha1.NotifyInstant, Email: &tugboatv1alpha1.EmailNotifier{
			Server: mail.Addr, From: "tugboat@example.com", To: []string{"approvers@example.com"}, SecretRef: &tugboatv1alpha1.LocalSecretReference{Name: "mail"}}},
		{Name: "hook", Type: tugboatv1alpha1.NotifierWebhook, Webhook: &tugboatv1alpha1.WebhookNotifier{
			URL: hookSrv.URL + "/tugboat", SecretRef: &tugboatv1alpha1.LocalSecretReference{Name: "hook"}}},
	}
	helmStrategy := tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm, Helm: &tugboatv1alpha1.HelmStrategy{
		Repository: charts, Chart: "vault-app", ValuesPolicy: tugboatv1alpha1.ValuesPolicyResetThenReuse}}
	approval := tugboatv1alpha1.Gates{RequireApproval: true}
	vault := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "vault"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release: "vault", Promotion: helmStrategy, Notify: notifiers,
			Environments: []tugboatv1alpha1.Environment{
				{Name: "staging", Targets: []tugboatv1alpha1.Target{{Spoke: "rows", Namespace: "stage"}}, Gates: approval},
				{Name: "production", Targets: []tugboatv1alpha1.Target{{Spoke: "rows", Namespace: "apps"}}, Gates: approval},
			},
		},
	}
	shape := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "shape"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release: "shape", Promotion: helmStrategy, Notify: notifiers,
			Environments: []tugboatv1alpha1.Environment{
				{Name: "production", Targets: []tugboatv1alpha1.Target{{Spoke: "rows", Namespace: "apps"}}, Gates: approval},
			},
		},
	}
	g.Expect(hubCluster.Client.Create(ctx, vault)).To(Succeed())
	g.Expect(hubCluster.Client.Create(ctx, shape)).To(Succeed())
	previews := map[string]*tugboatv1alpha1.PromotionPreview{}
	var names []string
	for _, ask := range []struct {
		key, env, version string
		p                 *tugboatv1alpha1.Pipeline
	}{
		{"staging", "staging", "1.1.0", vault},
		{"production", "production", "1.1.0", vault},
		{"shape", "production", "2.0.0", shape},
	} {
		pr, err := request.Create(ctx, hubCluster.Client, ask.p, ask.env, ask.version, tugboatv1alpha1.RequestedByUser, "test")
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(f.phase(pr.Name)).WithTimeout(90*time.Second).WithPolling(200*time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionWaitingApproval), ask.key)
		sum := f.promotion(g, pr.Name).Status.Preview
		g.Expect(sum).NotTo(BeNil(), ask.key)
		g.Expect(sum.Phase).To(Equal(tugboatv1alpha1.PreviewReady), ask.key+": "+sum.Reason)
		pp := &tugboatv1alpha1.PromotionPreview{}
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: sum.Name}, pp)).To(Succeed())
		g.Expect(pp.Status.Groups).To(HaveLen(1), ask.key)
		previews[ask.key] = pp
		names = append(names, pr.Name)
	}
	objects := func(key string) map[string]tugboatv1alpha1.PreviewObject {
		out := map[string]tugboatv1alpha1.PreviewObject{}
		for _, o := range previews[key].Status.Groups[0].Objects {
			out[o.Kind+"/"+o.Namespace+"/"+o.Name] = o
		}
		return out
	}
	jsonOf := func(obj any) string {
		b, err := json.Marshal(obj)
		g.Expect(err).NotTo(HaveOccurred())
		return string(b)
	}

	// A production-only value shows in production's preview, not in
	// staging's.
	prod, stage := objects("production"), objects("staging")
	g.Expect(prod).To(HaveKey("Deployment/apps/vault"))
	g.Expect(prod["Deployment/apps/vault"].Diff).To(ContainSubstring("+    region: eu-prod-only"))
	g.Expect(prod["Deployment/apps/vault"].Diff).NotTo(ContainSubstring("region: global"))
	g.Expect(stage).To(HaveKey("Deployment/stage/vault"))
	g.Expect(stage["Deployment/stage/vault"].Diff).To(ContainSubstring("+    region: global"))
	g.Expect(jsonOf(previews["staging"])).NotTo(ContainSubstring("eu-prod-only"))
	g.Expect(previews["production"].Status.Groups[0].Digest).NotTo(Equal(previews["staging"].Status.Groups[0].Digest))

	// An upgrade that adds and removes objects lists them.
	sh := objects("shape")
	g.Expect(sh).To(HaveKeyWithValue("ConfigMap/apps/shape", HaveField("Change", tugboatv1alpha1.PreviewRemoved)))
	g.Expect(sh).To(HaveKeyWithValue("Service/apps/shape", HaveField("Change", tugboatv1alpha1.PreviewAdded)))
	g.Expect(sh["Service/apps/shape"].Diff).To(ContainSubstring("+kind: Service"))
	g.Expect(sh["ConfigMap/apps/shape"].Diff).To(ContainSubstring("-kind: ConfigMap"))
	g.Expect(sh).To(HaveKeyWithValue("Deployment/apps/shape", HaveField("Change", tugboatv1alpha1.PreviewChanged)))

	// The Secret: only "changed", never its data.
	for key, secret := range map[string]string{"staging": "Secret/stage/vault-db", "production": "Secret/apps/vault-db", "shape": "Secret/apps/shape-db"} {
		objs := objects(key)
		g.Expect(objs).To(HaveKey(secret), key)
		g.Expect(objs[secret].Change).To(Equal(tugboatv1alpha1.PreviewChanged), key)
		g.Expect(objs[secret].Secret).To(BeTrue(), key)
		g.Expect(objs[secret].Diff).To(BeEmpty(), key)
	}

	// Every notice carried the preview's summary: the approval notices of
	// the three promotions, through each notifier.
	carried := func(payloads []string) []string {
		var out []string
		for _, n := range names {
			for _, p := range payloads {
				if strings.Contains(p, "tugboat diff "+n) {
					out = append(out, n)
					break
				}
			}
		}
		return out
	}
	mails := func(g Gomega) []string {
		var out []string
		for _, m := range mail.Messages() {
			out = append(out, mailText(g, m.Data))
		}
		return out
	}
	g.Eventually(func() []string { return carried(slackHook.all()) }).WithTimeout(60*time.Second).Should(ConsistOf(names), func() string { return "Slack got:\n" + strings.Join(slackHook.all(), "\n") })
	g.Eventually(func() []string { return carried(hook.all()) }).WithTimeout(60*time.Second).Should(ConsistOf(names), func() string {
		return "the webhook got:\n" + strings.Join(hook.all(), "\n") + "\nnotifications: " + jsonOf(f.promotion(g, names[0]).Status.Notifications)
	})
	g.Eventually(func(g Gomega) []string { return carried(mails(g)) }).WithTimeout(60*time.Second).Should(ConsistOf(names), func() string { return "email got:\n" + strings.Join(mails(g), "\n") })
	for _, h := range hook.headers() {
		g.Expect(h.Get("X-Tugboat-Signature")).To(HavePrefix("v1="), "the webhook is signed")
	}

	// Nowhere: not in any stored object, not in any notice.
	var prs tugboatv1alpha1.PromotionList
	g.Expect(hubCluster.Client.List(ctx, &prs, client.InNamespace(f.ns))).To(Succeed())
	g.Expect(prs.Items).To(HaveLen(3))
	var pps tugboatv1alpha1.PromotionPreviewList
	g.Expect(hubCluster.Client.List(ctx, &pps, client.InNamespace(f.ns))).To(Succeed())
	g.Expect(pps.Items).To(HaveLen(3))
	var events corev1.EventList
	g.Expect(hubCluster.Client.List(ctx, &events, client.InNamespace(f.ns))).To(Succeed())
	stored := []string{jsonOf(prs), jsonOf(pps), jsonOf(events)}
	payloads := append(append(slackHook.all(), hook.all()...), mails(g)...)
	g.Expect(payloads).To(HaveLen(len(slackHook.all()) + len(hook.all()) + len(mail.Messages())))
	for _, s := range []string{livePassword, "chart-default-password", "app-user-1.1.0", "app-user-2.0.0"} {
		for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s))} {
			for i, text := range append(stored, payloads...) {
				g.Expect(text).NotTo(ContainSubstring(form), "stored object or payload %d", i)
			}
		}
	}
}
