package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/agent"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/spokeclass"
	"tugboat.dev/tugboat/e2e/harness"
)

// clusterAPICRD is the path of Cluster API's own Cluster CRD, from the
// pinned module (go.mod) in the module cache.
func clusterAPICRD(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		t.Fatalf("locating the sigs.k8s.io/cluster-api module: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "core", "config", "crd", "bases", "cluster.x-k8s.io_clusters.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSpokeClass_clustersBecomeSpokesAndGetTheirAgent runs the hub (as its
// chart's ServiceAccount) on a hub cluster with Cluster API's real Cluster
// CRD. Cluster objects are made by the test, with <name>-kubeconfig Secrets
// pointing at a harness spoke cluster, and their status set as Cluster API's
// controllers would (they cannot run here without an infrastructure
// provider). A SpokeClass selects them by label: a Spoke appears for the
// matching Cluster only, waits for its control plane, the hub installs the
// agent's chart through the kubeconfig with the spoke's key, an agent
// running as that chart's ServiceAccount with that key reports, a new hub
// version upgrades it, and deleting the Cluster removes the Spoke.
func TestSpokeClass_clustersBecomeSpokesAndGetTheirAgent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme := harness.DefaultScheme()
	g.Expect(clusterv1.AddToScheme(scheme)).To(Succeed())
	hubCluster := harness.StartT(t, harness.Options{Name: "hub", ControlPlaneOnly: true, Scheme: scheme,
		TugboatCRDs: true, CRDPaths: []string{clusterAPICRD(t)}})
	workload := harness.StartT(t, harness.Options{Name: "edge-1", ControlPlaneOnly: true})
	available, err := spokeclass.Available(hubCluster.RESTConfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(available).To(BeTrue(), "the hub serves Cluster API's Clusters")

	var hubVersion atomic.Value
	hubVersion.Store("v0.9.0")
	f := newFleetWith(t, hubCluster, func(o *hub.Options) { o.Version = hubVersion.Load().(string) })
	c := hubCluster.Client
	const other = "other-tenant"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}})).To(Succeed())

	kubeconfig, err := os.ReadFile(workload.KubeconfigPath)
	g.Expect(err).NotTo(HaveOccurred())
	newCluster := func(ns, name string, labels map[string]string) *clusterv1.Cluster {
		g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig"},
			Data: map[string][]byte{"value": kubeconfig}})).To(Succeed())
		cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: clusterv1.ClusterSpec{Paused: ptr.To(false)}}
		g.Expect(c.Create(ctx, cl)).To(Succeed())
		return cl
	}
	edge := newCluster(f.ns, "edge-1", map[string]string{"env": "production", "region": "eu"})
	newCluster(f.ns, "lab-1", map[string]string{"env": "lab"})
	newCluster(other, "edge-2", map[string]string{"env": "production"})

	class := &tugboatv1alpha1.SpokeClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "production"},
		Spec: tugboatv1alpha1.SpokeClassSpec{
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}},
			SpokeLabels:     map[string]string{"tier": "edge"},
			Agent: &tugboatv1alpha1.AgentBootstrap{
				HubURL: "https://tugboat.example.com",
				// No Pod (the test runs the agent), no webhooks (the harness
				// cannot route to their Service).
				Values: jsonValue(t, map[string]any{"replicas": 0, "webhook": map[string]any{"enabled": false}}),
			},
		},
	}
	g.Expect(c.Create(ctx, class)).To(Succeed())

	spoke := func(g Gomega) *tugboatv1alpha1.Spoke {
		sp := &tugboatv1alpha1.Spoke{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "edge-1"}, sp)).To(Succeed())
		return sp
	}
	installed := func(g Gomega) *metav1.Condition {
		return apimeta.FindStatusCondition(spoke(g).Status.Conditions, tugboatv1alpha1.AgentInstalledCondition.String())
	}

	// The matching Cluster of the class's namespace becomes a Spoke, owned
	// by the Cluster, with its labels; the others do not.
	g.Eventually(spoke).WithTimeout(hubWait).Should(And(
		HaveField("Labels", And(HaveKeyWithValue("env", "production"), HaveKeyWithValue("region", "eu"),
			HaveKeyWithValue("tier", "edge"), HaveKeyWithValue(tugboatv1alpha1.LabelSpokeClass, "production"))),
		HaveField("Spec.ClusterRef.Name", "edge-1"),
		HaveField("Spec.KeySecretRef.Name", "edge-1"+spokeclass.KeySecretSuffix)))
	g.Expect(metav1.GetControllerOf(spoke(g))).To(HaveField("UID", edge.UID))
	g.Eventually(func(g Gomega) []string {
		var cl tugboatv1alpha1.SpokeClass
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(class), &cl)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(cl.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())).To(BeTrue())
		return cl.Status.Spokes
	}).WithTimeout(hubWait).Should(Equal([]string{"edge-1"}))
	for _, key := range []client.ObjectKey{{Namespace: f.ns, Name: "lab-1"}, {Namespace: other, Name: "edge-2"}} {
		err := c.Get(ctx, key, &tugboatv1alpha1.Spoke{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Spoke for %s: %v", key, err)
	}

	// A class whose agent values the hub does not allow (here another
	// image: the install runs with the workload cluster's admin
	// credential) is not Ready, and its Spoke is Stalled, installing
	// nothing (issue 23 Medium 6).
	lab := &tugboatv1alpha1.SpokeClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "lab"},
		Spec: tugboatv1alpha1.SpokeClassSpec{
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "lab"}},
			Agent: &tugboatv1alpha1.AgentBootstrap{HubURL: "https://tugboat.example.com",
				Values: jsonValue(t, map[string]any{"replicas": 0, "image": map[string]any{"repository": "evil.example/agent"}})},
		},
	}
	g.Expect(c.Create(ctx, lab)).To(Succeed())
	g.Eventually(func(g Gomega) *metav1.Condition {
		var cl tugboatv1alpha1.SpokeClass
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(lab), &cl)).To(Succeed())
		return apimeta.FindStatusCondition(cl.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
	}).WithTimeout(hubWait).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", tugboatv1alpha1.ValuesNotAllowedReason.String()),
		HaveField("Message", HavePrefix("spec.agent.values sets image.repository, which the hub does not allow"))))
	g.Eventually(func(g Gomega) *metav1.Condition {
		sp := &tugboatv1alpha1.Spoke{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "lab-1"}, sp)).To(Succeed())
		return apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.StalledCondition.String())
	}).WithTimeout(hubWait).Should(And(HaveField("Reason", tugboatv1alpha1.ValuesNotAllowedReason.String()),
		HaveField("Message", HavePrefix("spec.agentBootstrap.values sets image.repository, which the hub does not allow"))))

	// Nothing is written to the workload cluster until its control plane is
	// initialized.
	g.Eventually(installed).WithTimeout(hubWait).Should(And(
		HaveField("Status", metav1.ConditionFalse), HaveField("Reason", tugboatv1alpha1.WaitingForControlPlaneReason.String())))
	err = workload.Client.Get(ctx, client.ObjectKey{Name: "tugboat-system"}, &corev1.Namespace{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)

	edge.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	edge.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterAvailableCondition, Status: metav1.ConditionTrue, Reason: "Available", LastTransitionTime: metav1.Now()}}
	g.Expect(c.Status().Update(ctx, edge)).To(Succeed())

	// The agent's chart is installed through the kubeconfig, at the hub's
	// version, with the spoke's own key.
	g.Eventually(installed).WithTimeout(2 * hubWait).Should(And(
		HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("agent v0.9.0 installed"))))
	agentImage := func(g Gomega) string {
		var d appsv1.Deployment
		g.Expect(workload.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-agent"}, &d)).To(Succeed())
		return d.Spec.Template.Spec.Containers[0].Image
	}
	g.Expect(agentImage(g)).To(Equal("ghcr.io/tugboat-dev/tugboat-agent:v0.9.0"))
	var hubKey, spokeKey corev1.Secret
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "edge-1" + spokeclass.KeySecretSuffix}, &hubKey)).To(Succeed())
	g.Expect(workload.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-agent-hub-key"}, &spokeKey)).To(Succeed())
	g.Expect(spokeKey.Data["key"]).To(Equal(hubKey.Data[tugboatv1alpha1.SpokeKeySecretKey]))

	// An agent with that key, as that chart's ServiceAccount, reports.
	keyFile := filepath.Join(t.TempDir(), "key")
	g.Expect(os.WriteFile(keyFile, spokeKey.Data["key"], 0o600)).To(Succeed())
	f.agentWith("edge-1", f.agentConfig(workload), keyFile, testr.New(t), func(o *agent.Options) { o.Webhook.Disabled = true })
	g.Eventually(func(g Gomega) bool {
		return apimeta.IsStatusConditionTrue(spoke(g).Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
	}).WithTimeout(hubWait).Should(BeTrue())

	// The hub's version moves: it upgrades the agent.
	f.killHub()
	hubVersion.Store("v0.9.1")
	f.startHub()
	g.Eventually(agentImage).WithTimeout(2 * hubWait).Should(Equal("ghcr.io/tugboat-dev/tugboat-agent:v0.9.1"))
	g.Eventually(spoke).WithTimeout(hubWait).Should(HaveField("Status.AgentBootstrap.Version", "v0.9.1"))

	// A label the Cluster loses is lost by its Spoke; the Cluster deleted,
	// its Spoke goes.
	edge.Labels = map[string]string{"env": "production"}
	g.Expect(c.Update(ctx, edge)).To(Succeed())
	g.Eventually(spoke).WithTimeout(hubWait).Should(HaveField("Labels", Not(HaveKey("region"))))
	g.Expect(c.Delete(ctx, edge)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "edge-1"}, &tugboatv1alpha1.Spoke{}))
	}).WithTimeout(hubWait).Should(BeTrue())
}

// jsonValue encodes v as a CRD's free-form JSON field.
func jsonValue(t *testing.T, v any) *apiextensionsv1.JSON {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &apiextensionsv1.JSON{Raw: raw}
}
