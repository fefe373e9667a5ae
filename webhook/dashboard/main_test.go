package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/identity"
	"tugboat.dev/tugboat/webhook/dashboard"
)

var (
	// hub is a real API server (etcd and kube-apiserver) with tugboat's
	// CRDs and the approval policy of the hub chart.
	hub *harness.Cluster
	// hubc acts as the hub's ServiceAccount: it writes statuses as the
	// controllers would.
	hubc client.Client
	// chromium is the path of the browser the browser tests drive.
	chromium string
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	var err error
	if chromium, err = ensureChromium(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(harness.Main(harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true}, func(c *harness.Cluster) int {
		hub = c
		if err := identity.Install(context.Background(), c.Client); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if hubc, err = client.New(identity.HubConfig(c.RESTConfig), client.Options{Scheme: c.Client.Scheme()}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}))
}

// ensureChromium returns the Chromium the browser tests drive: $CHROMIUM,
// else Debian's /usr/bin/chromium, which it installs with apt-get when
// missing (CI runs make test as root on a fresh Debian machine).
func ensureChromium() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p, nil
	}
	const path = "/usr/bin/chromium"
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if os.Geteuid() != 0 {
		return "", errors.New("the dashboard's browser tests need Chromium: run `sudo apt-get install -y chromium`, or set CHROMIUM to a Chromium or Chrome binary")
	}
	fmt.Fprintln(os.Stderr, "dashboard tests: installing Chromium from Debian's packages (apt-get install chromium)")
	install := func() error {
		cmd := exec.Command("apt-get", "install", "-y", "--no-install-recommends", "chromium")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get install chromium: %w\n%s", err, out)
		}
		return nil
	}
	if err := install(); err != nil {
		// A fresh machine may have no package lists yet.
		if out, uerr := exec.Command("apt-get", "update").CombinedOutput(); uerr != nil {
			return "", fmt.Errorf("%w; apt-get update: %w\n%s", err, uerr, out)
		}
		if err := install(); err != nil {
			return "", err
		}
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("apt-get installed chromium, but %s is missing: %w", path, err)
	}
	return path, nil
}

// dash is a running dashboard acting as one user.
type dash struct {
	URL    string
	Server *dashboard.Server
	User   string
}

// serve starts a dashboard for namespace ns acting as user (impersonated
// by the cluster's administrator), on a loopback port, until the test
// ends.
func serve(t *testing.T, ns, user string, readOnly bool) *dash {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := identity.Config(hub.RESTConfig, user)
	s, err := dashboard.New(cfg, hub.Client.Scheme(), dashboard.Options{Namespace: ns, ReadOnly: readOnly, AllowedHosts: []string{ln.Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Start(ctx)
	}()
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}}
	srv.Start()
	t.Cleanup(func() {
		cancel()
		srv.CloseClientConnections()
		srv.Close()
		<-done
	})
	return &dash{URL: srv.URL, Server: s, User: user}
}

// newNamespace creates a namespace of its own for t.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fleet-"}}
	if err := hub.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// grantView lets user read every kind the dashboard shows in ns.
func grantView(t *testing.T, ns, user string) {
	t.Helper()
	ctx := context.Background()
	name := "view-" + user
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"tugboat.dev"}, Resources: []string{"pipelines", "promotions", "promotiontargets", "releasehistories", "spokes"}, Verbs: []string{"get", "list", "watch"}},
	}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := hub.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// people grants, in ns: alice may read everything and approve into
// web/production; bob may read everything and write promotions/status but
// has no verb approve; dave may approve every environment of web (he
// requests promotions in some tests).
func people(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	for user, envs := range map[string][]string{"alice": {"web/production"}, "bob": nil, "dave": {"web/*"}} {
		grantView(t, ns, user)
		if err := identity.Grant(ctx, hub.Client, ns, user, envs...); err != nil {
			t.Fatal(err)
		}
	}
}

func ago(d time.Duration) *metav1.Time {
	t := metav1.NewTime(time.Now().Add(-d).Truncate(time.Second))
	return &t
}

// fixture is what seed creates.
type fixture struct {
	NS string
	// Waiting is web-production-1.4.0, WaitingApproval.
	Waiting string
	// Done is web-staging-1.4.0, Succeeded, with a full record.
	Done string
}

const secretValue = "s3cr3t-key-never-shown"

// Values digests of the seeded releases: dev and staging share digestA.
var (
	digestA = "sha256:1111aaaa" + strings.Repeat("0", 56)
	digestB = "sha256:9999ffff" + strings.Repeat("0", 56)
)

// seed creates, in a new namespace, three Spokes (with a key Secret), a
// ReleaseHistory per target, Pipeline web (dev → staging → production,
// production requires approval) with its status, a Succeeded Promotion
// into staging and one into production waiting for approval. Statuses are
// written as the hub's ServiceAccount.
func seed(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	ns := newNamespace(t)
	f := fixture{NS: ns, Waiting: "web-production-1.4.0", Done: "web-staging-1.4.0"}
	people(t, ns)

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(hub.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spoke-keys"}, StringData: map[string]string{"key": secretValue}}))

	type rel struct {
		spoke, version, app, digest string
		health                      tugboatv1alpha1.Health
		deployed                    time.Duration
	}
	releases := []rel{
		{"dev-1", "1.5.0", "2.3.0", digestA, tugboatv1alpha1.HealthCurrent, 12 * time.Minute},
		{"staging-1", "1.4.0", "2.2.0", digestA, tugboatv1alpha1.HealthCurrent, 3 * time.Hour},
		{"prod-1", "1.3.0", "2.1.0", digestB, tugboatv1alpha1.HealthCurrent, 50 * time.Hour},
	}
	for i, r := range releases {
		sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.spoke},
			Spec: tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: "spoke-keys"}}}
		must(hub.Client.Create(ctx, sp))
		sp.Status = tugboatv1alpha1.SpokeStatus{LastSeen: ago(time.Duration(i+2) * time.Second), AgentVersion: "v0.4.1", KubernetesVersion: "v1.36.3", ReleaseCount: int32(3 + i),
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "HeartbeatReceived", Message: "heartbeats arrive", LastTransitionTime: *ago(time.Hour)}}}
		must(hubc.Status().Update(ctx, sp))

		h := &tugboatv1alpha1.ReleaseHistory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName(r.spoke, "apps", "web")},
			Spec: tugboatv1alpha1.ReleaseHistorySpec{Spoke: r.spoke, Namespace: "apps", Release: "web"}}
		must(hub.Client.Create(ctx, h))
		cur := tugboatv1alpha1.RevisionSummary{Revision: 7, Chart: "web", ChartVersion: r.version, AppVersion: r.app, ValuesDigest: r.digest,
			Status: tugboatv1alpha1.ReleaseStatusDeployed, Health: r.health, FirstDeployed: ago(30 * 24 * time.Hour), LastDeployed: ago(r.deployed)}
		prev := cur
		prev.Revision, prev.ChartVersion, prev.Status, prev.LastDeployed = 6, "1.2.0", tugboatv1alpha1.ReleaseStatusSuperseded, ago(r.deployed+24*time.Hour)
		h.Status = tugboatv1alpha1.ReleaseHistoryStatus{Current: &cur, Revisions: []tugboatv1alpha1.Revision{
			{RevisionSummary: cur, Events: []tugboatv1alpha1.ReleaseEvent{
				{ID: "e1", Time: *ago(r.deployed), Type: tugboatv1alpha1.EventTypeNormal, Reason: "Upgraded", Message: "helm upgrade to " + r.version, Count: 1},
				{ID: "e2", Time: *ago(r.deployed - time.Second), Type: tugboatv1alpha1.EventTypeNormal, Reason: "Created", Object: &tugboatv1alpha1.EventObjectReference{Kind: "Pod", Namespace: "apps", Name: "web-7d9f-x"}, Message: "Pod web-7d9f-x created", Count: 2},
				{ID: "e3", Time: *ago(r.deployed - 3*time.Second), Type: tugboatv1alpha1.EventTypeNormal, Reason: "RolloutComplete", Object: &tugboatv1alpha1.EventObjectReference{Kind: "Deployment", Namespace: "apps", Name: "web"}, Message: "rollout complete", Count: 1},
			}},
			{RevisionSummary: prev},
		}, LastEventTime: ago(r.deployed - 3*time.Second)}
		must(hubc.Status().Update(ctx, h))
	}

	target := func(spoke string) []tugboatv1alpha1.Target {
		return []tugboatv1alpha1.Target{{Spoke: spoke, Namespace: "apps"}}
	}
	pl := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
			Environments: []tugboatv1alpha1.Environment{
				{Name: "dev", Targets: target("dev-1"), Gates: tugboatv1alpha1.Gates{SoakTime: &metav1.Duration{Duration: time.Hour}}},
				{Name: "staging", Targets: target("staging-1"), Gates: tugboatv1alpha1.Gates{SoakTime: &metav1.Duration{Duration: 10 * time.Minute}}},
				{Name: "production", Targets: target("prod-1"), Gates: tugboatv1alpha1.Gates{RequireApproval: true}},
			},
		},
	}
	must(hub.Client.Create(ctx, pl))
	envStatus := func(name string, r rel, healthySince *metav1.Time, active string) tugboatv1alpha1.EnvironmentStatus {
		return tugboatv1alpha1.EnvironmentStatus{Name: name, Versions: []string{r.version}, HealthySince: healthySince, ActivePromotion: active,
			Targets: []tugboatv1alpha1.TargetStatus{{Spoke: r.spoke, Namespace: "apps", Release: "web", Revision: 7, Version: r.version, Health: r.health, LastDeployed: ago(r.deployed)}}}
	}
	pl.Status = tugboatv1alpha1.PipelineStatus{
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Waiting", Message: "promotion web-production-1.4.0 waits for approval", LastTransitionTime: *ago(time.Minute)}},
		Environments: []tugboatv1alpha1.EnvironmentStatus{
			envStatus("dev", releases[0], ago(10*time.Minute), ""),
			envStatus("staging", releases[1], ago(3*time.Hour), ""),
			envStatus("production", releases[2], ago(50*time.Hour), f.Waiting),
		},
	}
	must(hubc.Status().Update(ctx, pl))

	done := newPromotion(t, ns, f.Done, "dev", "staging", tugboatv1alpha1.RequestedByAuto, "")
	started, completed := ago(3*time.Hour+2*time.Minute), ago(3*time.Hour)
	done.Status = tugboatv1alpha1.PromotionStatus{
		Phase: tugboatv1alpha1.PromotionSucceeded, Attempts: 1, StartedAt: started, CompletedAt: completed,
		Strategy:       &tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
		StrategyResult: &tugboatv1alpha1.StrategyResult{URL: "https://git.example.com/fleet/web/pulls/42", Reference: "tugboat/web/staging/1.4.0", Message: "opened pull request #42"},
		Notifications: []tugboatv1alpha1.NotificationDelivery{
			{Notifier: "slack", Event: tugboatv1alpha1.EventPromotionRunning, DeliveryState: tugboatv1alpha1.DeliveryState{Phase: tugboatv1alpha1.NotificationDelivered, Attempts: 1, LastAttemptAt: started, DeliveredAt: started}},
			{Notifier: "email", Event: tugboatv1alpha1.EventPromotionSucceeded, DeliveryState: tugboatv1alpha1.DeliveryState{Phase: tugboatv1alpha1.NotificationDelivered, Attempts: 2, LastAttemptAt: completed, DeliveredAt: completed}},
		},
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "staging runs 1.4.0, healthy", LastTransitionTime: *completed}},
	}
	must(hubc.Status().Update(ctx, done))
	pt := &tugboatv1alpha1.PromotionTarget{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: tugboatv1alpha1.PromotionTargetName(done.Name, "staging-1", "apps", "web"),
			Labels:          map[string]string{tugboatv1alpha1.LabelPromotion: tugboatv1alpha1.PromotionLabelValue(done.Name), tugboatv1alpha1.LabelSpoke: "staging-1"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(done, tugboatv1alpha1.GroupVersion.WithKind("Promotion"))},
		},
		Spec: tugboatv1alpha1.PromotionTargetSpec{Promotion: done.Name, Spoke: "staging-1", Namespace: "apps", Release: "web"},
	}
	must(hubc.Create(ctx, pt))
	pt.Status = tugboatv1alpha1.PromotionTargetStatus{Version: "1.4.0", Revision: 7, Health: tugboatv1alpha1.HealthCurrent, Done: true, LastTransitionTime: completed}
	must(hubc.Status().Update(ctx, pt))

	newPromotion(t, ns, f.Waiting, "staging", "production", tugboatv1alpha1.RequestedByAuto, "")
	setPhase(t, ns, f.Waiting, tugboatv1alpha1.PromotionWaitingApproval, "promotion of 1.4.0 into production has 0 of 1 approval; waiting for 1 more approval (tugboat approve web-production-1.4.0)")
	return f
}

// newPromotion creates a Promotion of web 1.4.0 as the hub would.
func newPromotion(t *testing.T, ns, name, from, to string, by tugboatv1alpha1.Requester, requester string) *tugboatv1alpha1.Promotion {
	t.Helper()
	pr := &tugboatv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"tugboat.dev/pipeline": "web", "tugboat.dev/environment": to}},
		Spec: tugboatv1alpha1.PromotionSpec{Pipeline: "web", From: from, To: to, Version: "1.4.0",
			RequestedBy: by, Requester: requester},
	}
	if err := hubc.Create(context.Background(), pr); err != nil {
		t.Fatal(err)
	}
	return pr
}

// setPhase writes a Promotion's phase and Ready message as the hub's
// controller would.
func setPhase(t *testing.T, ns, name string, phase tugboatv1alpha1.PromotionPhase, message string) {
	t.Helper()
	ctx := context.Background()
	pr := &tugboatv1alpha1.Promotion{}
	if err := hubc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pr); err != nil {
		t.Fatal(err)
	}
	orig := pr.DeepCopy()
	pr.Status.Phase = phase
	if phase == tugboatv1alpha1.PromotionRunning && pr.Status.StartedAt == nil {
		pr.Status.StartedAt = ago(0)
	}
	pr.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: string(phase), Message: message, LastTransitionTime: *ago(0)}}
	if err := hubc.Status().Patch(ctx, pr, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

// approvals reads a Promotion's votes.
func approvals(t *testing.T, ns, name string) []tugboatv1alpha1.ApprovalVote {
	t.Helper()
	pr := &tugboatv1alpha1.Promotion{}
	if err := hub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pr); err != nil {
		t.Fatal(err)
	}
	return pr.Status.Approvals
}
