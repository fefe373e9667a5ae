package e2e_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/agent"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/config"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/identity"
)

// fleet is one hub cluster with the hub process in-process, and spoke
// clusters with an agent each, all on loopback.
type fleet struct {
	t       *testing.T
	hub     *harness.Cluster
	hubAddr string
	ns      string

	// mutate, when set, adjusts the hub's options each time it starts.
	mutate func(*hub.Options)

	mu      sync.Mutex
	stopHub func()

	// agentCharts records, per spoke cluster, the namespaces the agent
	// chart installed there lets the helm strategy write (agentConfig).
	agentCharts map[string][]string
}

// startClusters starts a hub control plane and n full spoke clusters side
// by side.
func startClusters(t *testing.T, n int) (*harness.Cluster, []*harness.Cluster) {
	t.Helper()
	var wg sync.WaitGroup
	var hubCluster *harness.Cluster
	spokes := make([]*harness.Cluster, n)
	wg.Add(n + 1)
	go func() {
		defer wg.Done()
		hubCluster = harness.StartT(t, harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true})
	}()
	for i := range spokes {
		go func() {
			defer wg.Done()
			spokes[i] = harness.StartT(t, harness.Options{Name: fmt.Sprintf("spoke-%d", i+1)})
		}()
	}
	wg.Wait()
	if hubCluster == nil {
		t.FailNow()
	}
	for _, s := range spokes {
		if s == nil {
			t.FailNow()
		}
	}
	return hubCluster, spokes
}

func newFleet(t *testing.T, hubCluster *harness.Cluster) *fleet {
	t.Helper()
	return newFleetWith(t, hubCluster, nil)
}

// newFleetWith is newFleet with the hub's options adjusted by mutate (when
// not nil) on every start.
func newFleetWith(t *testing.T, hubCluster *harness.Cluster, mutate func(*hub.Options)) *fleet {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	f := &fleet{t: t, hub: hubCluster, hubAddr: addr, ns: "fleet", mutate: mutate}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}
	if err := hubCluster.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	installHubChart(t, hubCluster, f.ns)
	f.startHub()
	t.Cleanup(f.killHub)
	return f
}

// installHubChart installs the hub's chart on c as `tugboat install hub`
// does (release tugboat-hub in tugboat-system), serving the namespaces
// spokeNamespaces (again: an upgrade to these), with no hub Pod (replicas 0)
// and without the CRDs (the harness installed the same files): tests run
// the hub in-process as the chart's ServiceAccount, with the chart's RBAC.
// The approval policy is left out: these tests act out people as the
// cluster's administrator, and the policy is tested where people are acted
// out by their own identities (e2e/identity, controllers/promotion/request,
// webhook/dashboard).
func installHubChart(t *testing.T, c *harness.Cluster, spokeNamespaces ...string) {
	t.Helper()
	namespaces := make([]any, 0, len(spokeNamespaces))
	for _, ns := range spokeNamespaces {
		namespaces = append(namespaces, ns)
	}
	target := config.Target{Kubeconfig: c.KubeconfigPath, Namespace: hubReleaseNamespace}
	_, err := config.Apply(context.Background(), target, config.HubChart, map[string]any{
		"replicas": 0, "crds": map[string]any{"install": false}, "spokeNamespaces": namespaces,
		"approvals": map[string]any{"policy": false},
	}, time.Minute)
	if err != nil {
		t.Fatalf("installing the hub chart on %s: %v", c.Name, err)
	}
}

// startHub runs the hub process (receiver, recorder, Spoke controller)
// in-process against the hub cluster, as the hub chart's ServiceAccount
// (installHubChart): a right the chart's RBAC lacks fails the test.
func (f *fleet) startHub() {
	f.t.Helper()
	opts := hubtest.Options()
	opts.Receiver.BindAddress = f.hubAddr
	opts.Spoke.HeartbeatTimeout = 5 * time.Second
	if f.mutate != nil {
		f.mutate(&opts)
	}
	_, stop := hubtest.Start(f.t, identity.HubConfig(f.hub.RESTConfig), opts)
	f.mu.Lock()
	f.stopHub = stop
	f.mu.Unlock()
}

// killHub stops the hub process.
func (f *fleet) killHub() {
	f.mu.Lock()
	stop := f.stopHub
	f.stopHub = nil
	f.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// addSpoke registers a Spoke on the hub, waits for its generated key and
// starts an agent for it against c. It returns a function that stops the
// agent.
func (f *fleet) addSpoke(name string, c *harness.Cluster, log logr.Logger) (stop func()) {
	f.t.Helper()
	key := f.registerSpoke(name)
	keyFile := filepath.Join(f.t.TempDir(), name+".key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		f.t.Fatal(err)
	}
	return f.startAgent(name, c, keyFile, log)
}

// registerSpoke creates a Spoke on the hub and returns the key the hub
// generated for it. The key Secret exists only once the hub's Spoke
// controller saw the Spoke, so the receiver knows the spoke by then.
func (f *fleet) registerSpoke(name string) []byte {
	f.t.Helper()
	g := NewWithT(f.t)
	ctx := context.Background()
	sp := &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}},
	}
	g.Expect(f.hub.Client.Create(ctx, sp)).To(Succeed())
	var key corev1.Secret
	g.Eventually(func() error {
		return f.hub.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name + "-key"}, &key)
	}).WithTimeout(20 * time.Second).Should(Succeed())
	g.Expect(key.Data[tugboatv1alpha1.SpokeKeySecretKey]).NotTo(BeEmpty())
	return key.Data[tugboatv1alpha1.SpokeKeySecretKey]
}

// agentUser is the agent chart's ServiceAccount, as the API server names it.
const agentUser = "system:serviceaccount:tugboat-system:tugboat-agent"

// agentConfig applies the agent's chart to c (again when helmNamespaces
// adds namespaces its helm strategy role is bound in) and returns a REST
// config acting as the chart's ServiceAccount: the fleet's agents run with
// the RBAC the chart ships. The chart's objects are applied as rendered,
// not as a Helm release (the agents would report that release among the
// spoke's, which tests count), without a Pod (the agents run in-process)
// and without its webhook configurations,
// which point at a Service the harness cannot route to; the agents register
// their own by URL (--webhook-register, as `tugboat dev up` does), with the
// one right the chart leaves out because it deploys them as manifests:
// writing webhook configurations (webhookRegistration).
func (f *fleet) agentConfig(c *harness.Cluster, helmNamespaces ...string) *rest.Config {
	f.t.Helper()
	g := NewWithT(f.t)
	ctx := context.Background()
	f.mu.Lock()
	if f.agentCharts == nil {
		f.agentCharts = map[string][]string{}
	}
	installed, ok := f.agentCharts[c.Name]
	namespaces := installed
	for _, ns := range helmNamespaces {
		if !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	f.agentCharts[c.Name] = namespaces
	f.mu.Unlock()
	if !ok || len(namespaces) > len(installed) {
		values := map[string]any{
			"spoke": "e2e", "hub": map[string]any{"url": "https://hub.invalid"}, "replicas": 0,
			"webhook": map[string]any{"enabled": false},
		}
		if len(namespaces) > 0 {
			allowed := make([]any, 0, len(namespaces))
			for _, ns := range namespaces {
				err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
				g.Expect(err == nil || apierrors.IsAlreadyExists(err)).To(BeTrue(), "%v", err)
				allowed = append(allowed, ns)
			}
			values["helmStrategy"] = map[string]any{"enabled": true, "allowedNamespaces": allowed, "allowedChartSources": []any{"*"}}
		}
		objs, err := config.Render(config.AgentChart, "tugboat-system", values)
		g.Expect(err).NotTo(HaveOccurred())
		err = c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tugboat-system"}})
		g.Expect(err == nil || apierrors.IsAlreadyExists(err)).To(BeTrue(), "%v", err)
		for _, o := range objs {
			g.Expect(c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("e2e"), client.ForceOwnership)).To(Succeed(),
				"applying %s %s of the agent chart on %s", o.GetKind(), o.GetName(), c.Name)
		}
		webhookRegistration(f.t, c)
	}
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: agentUser}
	// RBAC takes effect once the API server's informers have the bindings.
	cl, err := client.New(cfg, client.Options{Scheme: c.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		return cl.List(ctx, &corev1.SecretList{}, client.Limit(1))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	for _, ns := range helmNamespaces {
		g.Eventually(func() error {
			return cl.List(ctx, &corev1.SecretList{}, client.InNamespace(ns), client.Limit(1))
		}).WithTimeout(30*time.Second).Should(Succeed(), "the helm strategy's role in %s", ns)
	}
	return cfg
}

// agentKubeconfig is agentConfig as a kubeconfig file, for agent processes.
func (f *fleet) agentKubeconfig(c *harness.Cluster, helmNamespaces ...string) string {
	f.t.Helper()
	f.agentConfig(c, helmNamespaces...)
	kc, err := clientcmd.LoadFromFile(c.KubeconfigPath)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, auth := range kc.AuthInfos {
		auth.Impersonate = agentUser
	}
	path := filepath.Join(f.t.TempDir(), "agent.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// hubKubeconfig is a kubeconfig of the hub cluster acting as the hub
// chart's ServiceAccount (installHubChart), for hub processes.
func (f *fleet) hubKubeconfig() string {
	f.t.Helper()
	kc, err := clientcmd.LoadFromFile(f.hub.KubeconfigPath)
	if err != nil {
		f.t.Fatal(err)
	}
	hub := identity.HubConfig(f.hub.RESTConfig).Impersonate
	for _, auth := range kc.AuthInfos {
		auth.Impersonate, auth.ImpersonateGroups = hub.UserName, hub.Groups
	}
	path := filepath.Join(f.t.TempDir(), "hub.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// webhookRegistration grants the agent's ServiceAccount on c what
// --webhook-register needs (writing webhook configurations): a test-only
// right, the chart deploys the configurations instead.
func webhookRegistration(t *testing.T, c *harness.Cluster) {
	t.Helper()
	ctx := context.Background()
	const name = "e2e-agent-webhook-registration"
	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"admissionregistration.k8s.io"},
			Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
			Verbs:     []string{"get", "create", "patch", "update", "delete"},
		}}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "tugboat-system", Name: "tugboat-agent"}},
		},
	} {
		if err := c.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

func (f *fleet) startAgent(name string, c *harness.Cluster, keyFile string, log logr.Logger) (stop func()) {
	f.t.Helper()
	opts := agent.NewOptions()
	opts.Reporter.Spoke = name
	opts.Reporter.HubURL = "http://" + f.hubAddr
	opts.Reporter.HubInsecureHTTP = true
	opts.Reporter.KeyFile = keyFile
	opts.Reporter.StateInterval = 2 * time.Second
	opts.Reporter.BackoffMax = time.Second
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	opts.Webhook.BindAddress = "127.0.0.1:0"
	opts.Webhook.URLHost = "127.0.0.1"
	opts.Webhook.Name = "tugboat-agent-" + name
	a, err := agent.New(f.agentConfig(c), opts, log)
	if err != nil {
		f.t.Fatalf("assembling agent %s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Start(ctx); err != nil {
			f.t.Logf("agent %s stopped: %v", name, err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	f.t.Cleanup(stop)
	return stop
}

// history returns the ReleaseHistory of a release, or nil.
func (f *fleet) history(g Gomega, spoke, namespace, release string) *tugboatv1alpha1.ReleaseHistory {
	rh := &tugboatv1alpha1.ReleaseHistory{}
	err := f.hub.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: tugboatv1alpha1.ReleaseHistoryName(spoke, namespace, release)}, rh)
	if err != nil {
		return nil
	}
	return rh
}

// current is a comparable summary of a ReleaseHistory's current revision.
type current struct {
	Revision int32
	Version  string
	Status   tugboatv1alpha1.ReleaseStatus
	Health   tugboatv1alpha1.Health
}

func (f *fleet) current(spoke, namespace, release string) func(g Gomega) current {
	return func(g Gomega) current {
		rh := f.history(g, spoke, namespace, release)
		if rh == nil || rh.Status.Current == nil {
			return current{}
		}
		c := rh.Status.Current
		return current{c.Revision, c.ChartVersion, c.Status, c.Health}
	}
}

// TestAgentToHub_recordsInstallUpgradeRollbackAcrossAHubRestart runs a real
// agent on a spoke cluster reporting to the real hub: a Helm install, an
// upgrade and a rollback appear in the hub's ReleaseHistory with the right
// revisions, versions and health, and a hub restart in the middle loses
// nothing.
func TestAgentToHub_recordsInstallUpgradeRollbackAcrossAHubRestart(t *testing.T) {
	g := NewWithT(t)
	hubCluster, spokes := startClusters(t, 1)
	f := newFleet(t, hubCluster)
	f.addSpoke("spoke-a", spokes[0], testr.NewWithOptions(t, testr.Options{Verbosity: 0}))
	helm := newHelm(t, spokes[0], "apps")

	helm.install("web", "1.0.0")
	g.Eventually(f.current("spoke-a", "apps", "web")).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).
		Should(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

	// The Spoke is Ready from the agent's heartbeats.
	g.Eventually(func(g Gomega) {
		var sp tugboatv1alpha1.Spoke
		g.Expect(hubCluster.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "spoke-a"}, &sp)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(sp.Status.Conditions, "Ready")).To(BeTrue())
		g.Expect(sp.Status.ReleaseCount).To(Equal(int32(1)))
		g.Expect(sp.Status.KubernetesVersion).To(Equal("v1.36.3"))
	}).WithTimeout(20 * time.Second).Should(Succeed())

	helm.upgrade("web", "1.1.0", nil)
	g.Eventually(f.current("spoke-a", "apps", "web")).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).
		Should(Equal(current{2, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

	// The hub goes away; a rollback happens meanwhile; the hub comes back.
	f.killHub()
	helm.rollback("web", 1)
	f.startHub()
	g.Eventually(f.current("spoke-a", "apps", "web")).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).
		Should(Equal(current{3, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

	rh := f.history(g, "spoke-a", "apps", "web")
	g.Expect(rh.Status.Revisions).To(HaveLen(3))
	g.Expect(rh.Status.Revisions[1].ChartVersion).To(Equal("1.1.0"))
	g.Expect(rh.Status.Revisions[1].Status).To(Equal(tugboatv1alpha1.ReleaseStatusSuperseded))
	reasons := map[string]bool{}
	for _, e := range rh.Status.Revisions[2].Events { // revision 1
		reasons[e.Reason] = true
	}
	g.Expect(reasons).To(HaveKey("RolloutComplete"), "revision 1 events: %v", reasons)

	// Uninstall: the release is reported uninstalled.
	helm.uninstall("web")
	g.Eventually(func(g Gomega) tugboatv1alpha1.ReleaseStatus {
		return f.current("spoke-a", "apps", "web")(g).Status
	}).WithTimeout(30 * time.Second).Should(Equal(tugboatv1alpha1.ReleaseStatusUninstalled))
}
