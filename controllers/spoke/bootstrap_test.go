package spoke_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
)

// bootWait bounds what the bootstrap tests wait for: a reconcile, or an
// install of the agent's chart into a harness cluster.
const bootWait = 90 * time.Second

// bootstrapEnv is a namespace on the hub and a workload cluster (a harness
// control plane) whose admin kubeconfig is the Secret workload-kubeconfig
// there, as Cluster API would write it.
type bootstrapEnv struct {
	t        *testing.T
	g        Gomega
	ns       string
	workload *harness.Cluster
}

func newBootstrapEnv(t *testing.T, ns string) *bootstrapEnv {
	g := NewWithT(t)
	w := harness.StartT(t, harness.Options{Name: ns, ControlPlaneOnly: true})
	kubeconfig, err := os.ReadFile(w.KubeconfigPath)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	g.Expect(cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(cluster.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workload-kubeconfig"},
		Data: map[string][]byte{"value": kubeconfig}})).To(Succeed())
	return &bootstrapEnv{t: t, g: g, ns: ns, workload: w}
}

// spoke returns a Spoke of name whose agent the hub installs into the
// workload cluster with values.
func (e *bootstrapEnv) spoke(name string, values map[string]any) *tugboatv1alpha1.Spoke {
	raw, err := json.Marshal(values)
	e.g.Expect(err).NotTo(HaveOccurred())
	return &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: tugboatv1alpha1.SpokeSpec{
			KeySecretRef:        tugboatv1alpha1.LocalSecretReference{Name: name + "-key"},
			KubeConfigSecretRef: &tugboatv1alpha1.SecretKeyReference{Name: "workload-kubeconfig", Key: "value"},
			AgentBootstrap:      &tugboatv1alpha1.AgentBootstrap{HubURL: "https://hub.example.com", Values: &apiextensionsv1.JSON{Raw: raw}},
		},
	}
}

func (e *bootstrapEnv) get(sp *tugboatv1alpha1.Spoke) *tugboatv1alpha1.Spoke {
	got := &tugboatv1alpha1.Spoke{}
	e.g.Expect(cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(sp), got)).To(Succeed())
	return got
}

// condition returns a poll of sp's condition t.
func (e *bootstrapEnv) condition(sp *tugboatv1alpha1.Spoke, t tugboatv1alpha1.ConditionType) func() *metav1.Condition {
	return func() *metav1.Condition {
		return apimeta.FindStatusCondition(e.get(sp).Status.Conditions, t.String())
	}
}

// update changes sp's spec with change, retrying on conflicts.
func (e *bootstrapEnv) update(sp *tugboatv1alpha1.Spoke, change func(*tugboatv1alpha1.Spoke)) {
	e.g.Eventually(func() error {
		cur := e.get(sp)
		change(cur)
		return cluster.Client.Update(context.Background(), cur)
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

// notInstalled returns a poll of sp's condition t that stops at once,
// failing, when the hub installed sp's agent (AgentInstalled True).
func (e *bootstrapEnv) notInstalled(sp *tugboatv1alpha1.Spoke, t tugboatv1alpha1.ConditionType) func() *metav1.Condition {
	return func() *metav1.Condition {
		got := e.get(sp)
		if c := apimeta.FindStatusCondition(got.Status.Conditions, tugboatv1alpha1.AgentInstalledCondition.String()); c != nil && c.Status == metav1.ConditionTrue {
			StopTrying("the hub installed the agent: " + c.Message).Now()
		}
		return apimeta.FindStatusCondition(got.Status.Conditions, t.String())
	}
}

// nothingInstalled asserts that the hub wrote nothing to the workload
// cluster: the bootstrap's first write is the namespace tugboat-system.
func (e *bootstrapEnv) nothingInstalled() {
	err := e.workload.Client.Get(context.Background(), client.ObjectKey{Name: "tugboat-system"}, &corev1.Namespace{})
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing is written to the workload cluster: %v", err)
}

// installedKey returns the key the bootstrap wrote on the workload cluster.
func (e *bootstrapEnv) installedKey() []byte {
	s := &corev1.Secret{}
	e.g.Expect(e.workload.Client.Get(context.Background(), client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-agent-hub-key"}, s)).To(Succeed())
	return s.Data[tugboatv1alpha1.SpokeKeySecretKey]
}

// quiet are values that install the agent's chart without a Pod or
// webhooks (the harness runs no kubelet, and cannot route to a Service),
// both allowed by default.
var quiet = map[string]any{"replicas": 0, "webhook": map[string]any{"enabled": false}}

// TestBootstrap_refusesValuesTheHubDoesNotAllow is issue 23 Medium 6: the
// bootstrap installs with the workload cluster's admin credential, so a
// Spoke's author may set only the chart values the hub allows
// (--bootstrap-allowed-values). A Spoke asking for another image, extra
// arguments, the helm strategy, no protected namespaces, another hub, or
// the agent's rights in kube-system is Stalled (ValuesNotAllowed) with a
// message naming the values, and nothing is written to the cluster; once
// its values are allowed, the agent is installed. Before the fix every one
// of them was installed as asked.
func TestBootstrap_refusesValuesTheHubDoesNotAllow(t *testing.T) {
	e := newBootstrapEnv(t, "boot-values")
	g := e.g
	ctx := context.Background()
	rows := []struct {
		name   string
		values map[string]any
		says   string
	}{
		{"image", map[string]any{"image": map[string]any{"repository": "evil.example/agent"}, "replicas": 0},
			"sets image.repository, which the hub does not allow (its --bootstrap-allowed-values: replicas,resources,logLevel,watchNamespaces,webhook.enabled,backfill.enabled,backfill.namespaces,networkPolicy)"},
		{"extra-args", map[string]any{"extraArgs": []string{"--actions-enabled=true"}, "webhook": map[string]any{"enabled": false, "certificate": "certManager"}},
			"sets extraArgs, webhook.certificate, which the hub does not allow"},
		{"helm-strategy", map[string]any{"helmStrategy": map[string]any{"enabled": true, "allowedNamespaces": []string{"kube-system"}, "allowedChartSources": []string{"oci://evil.example"}}},
			"sets helmStrategy.allowedChartSources, helmStrategy.allowedNamespaces, helmStrategy.enabled, which"},
		{"unprotected", map[string]any{"backfill": map[string]any{"protectedNamespaces": nil}},
			"sets backfill.protectedNamespaces, which"},
		{"other-hub", map[string]any{"hub": map[string]any{"url": "https://evil.example"}, "spoke": "victim"},
			"sets hub.url, spoke, which"},
		{"kube-system", map[string]any{"watchNamespaces": []string{"apps", "kube-system"}, "backfill": map[string]any{"namespaces": []string{"kube-public"}}},
			"watchNamespaces names kube-system: a bootstrap never binds the agent's rights in kube-system, kube-node-lease, kube-public; backfill.namespaces names kube-public"},
	}
	spokes := map[string]*tugboatv1alpha1.Spoke{}
	for _, row := range rows {
		sp := e.spoke("values-"+row.name, row.values)
		spokes[row.name] = sp
		g.Expect(cluster.Client.Create(ctx, sp)).To(Succeed())
	}
	for _, row := range rows {
		sp := spokes[row.name]
		g.Eventually(e.notInstalled(sp, tugboatv1alpha1.StalledCondition)).WithTimeout(bootWait).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", tugboatv1alpha1.ValuesNotAllowedReason.String()),
			HaveField("Message", And(HavePrefix("spec.agentBootstrap.values "), ContainSubstring(row.says)))), row.name)
		g.Expect(e.condition(sp, tugboatv1alpha1.AgentInstalledCondition)()).To(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", tugboatv1alpha1.ValuesNotAllowedReason.String())), row.name)
		g.Expect(e.get(sp).Status.ObservedGeneration).To(Equal(e.get(sp).Generation), "a terminal state: %s", row.name)
	}
	e.nothingInstalled()

	// Allowed values: the same Spoke installs.
	sp := spokes["image"]
	e.update(sp, func(s *tugboatv1alpha1.Spoke) {
		raw, _ := json.Marshal(quiet)
		s.Spec.AgentBootstrap.Values = &apiextensionsv1.JSON{Raw: raw}
	})
	g.Eventually(e.condition(sp, tugboatv1alpha1.AgentInstalledCondition)).WithTimeout(bootWait).Should(And(
		HaveField("Status", metav1.ConditionTrue), HaveField("Reason", tugboatv1alpha1.AgentInstalledReason.String())))
	g.Expect(e.condition(sp, tugboatv1alpha1.StalledCondition)()).To(BeNil())
}

// TestBootstrap_copiesOnlyTheKeyTheHubGeneratedForTheSpoke is issue 23
// Medium 6: the bootstrap copies the Spoke's key Secret to a cluster its
// author may control, so it copies only the key Secret the hub generated
// for that Spoke (labeled tugboat.dev/spoke=<name>, controlled by the
// Spoke). Another Spoke's key, a CI token of the namespace, or a Secret
// that carries the label but not the owner are refused
// (KeySecretNotGenerated, Stalled) and nothing reaches the cluster, as is
// a caSecretRef whose ca.crt is not certificates; the Spoke's own
// generated key is installed. Before the fix the other Spoke's
// key was copied to the thief's cluster.
func TestBootstrap_copiesOnlyTheKeyTheHubGeneratedForTheSpoke(t *testing.T) {
	e := newBootstrapEnv(t, "boot-keys")
	g := e.g
	ctx := context.Background()

	victim := &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "victim"},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: "victim-key"}},
	}
	g.Expect(cluster.Client.Create(ctx, victim)).To(Succeed())
	victimKey := &corev1.Secret{}
	g.Eventually(func() error {
		return cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "victim-key"}, victimKey)
	}).WithTimeout(bootWait).Should(Succeed(), "the hub generates the victim's key")
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "ci-token"}, Data: map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: validKey}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "labeled-only", Labels: map[string]string{tugboatv1alpha1.LabelSpoke: "thief"}},
			Data: map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: validKey}},
	} {
		g.Expect(cluster.Client.Create(ctx, s)).To(Succeed())
	}

	thief := e.spoke("thief", quiet)
	thief.Spec.KeySecretRef.Name = "victim-key"
	g.Expect(cluster.Client.Create(ctx, thief)).To(Succeed())
	for i, secret := range []string{"victim-key", "ci-token", "labeled-only"} {
		if i > 0 {
			e.update(thief, func(s *tugboatv1alpha1.Spoke) { s.Spec.KeySecretRef.Name = secret })
		}
		g.Eventually(e.notInstalled(thief, tugboatv1alpha1.StalledCondition)).WithTimeout(bootWait).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", tugboatv1alpha1.KeySecretNotGeneratedReason.String()),
			HaveField("Message", HavePrefix("secret "+secret+" (spec.keySecretRef) is not a key the hub generated for this Spoke (labeled tugboat.dev/spoke=thief and controlled by the Spoke)"))), secret)
		g.Expect(e.condition(thief, tugboatv1alpha1.AgentInstalledCondition)()).To(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", tugboatv1alpha1.KeySecretNotGeneratedReason.String())), secret)
		e.nothingInstalled()
	}

	// Its own key, but a "CA" that is not a certificate (the private key of
	// a TLS Secret): refused too, nothing written.
	g.Expect(cluster.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "not-a-ca"},
		Data: map[string][]byte{"ca.crt": []byte("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIDfXMVj1ZLmFdeS6kdKFjqtqbGD0N8aGA7kZYTPL6fWN\n-----END PRIVATE KEY-----\n")}})).To(Succeed())
	e.update(thief, func(s *tugboatv1alpha1.Spoke) {
		s.Spec.KeySecretRef.Name = "thief-key"
		s.Spec.AgentBootstrap.CASecretRef = &tugboatv1alpha1.LocalSecretReference{Name: "not-a-ca"}
	})
	g.Eventually(e.notInstalled(thief, tugboatv1alpha1.StalledCondition)).WithTimeout(bootWait).Should(And(
		HaveField("Reason", tugboatv1alpha1.InvalidSpecReason.String()),
		HaveField("Message", ContainSubstring("the hub's CA Secret not-a-ca (spec.agentBootstrap.caSecretRef): ca.crt holds a PEM PRIVATE KEY, not only certificates"))))
	e.nothingInstalled()

	// Its own key, which the hub generates: installed, and it is not the
	// victim's.
	e.update(thief, func(s *tugboatv1alpha1.Spoke) { s.Spec.AgentBootstrap.CASecretRef = nil })
	g.Eventually(e.condition(thief, tugboatv1alpha1.AgentInstalledCondition)).WithTimeout(bootWait).Should(HaveField("Status", metav1.ConditionTrue))
	own := &corev1.Secret{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "thief-key"}, own)).To(Succeed())
	g.Expect(e.installedKey()).To(Equal(own.Data[tugboatv1alpha1.SpokeKeySecretKey]))
	g.Expect(e.installedKey()).NotTo(Equal(victimKey.Data[tugboatv1alpha1.SpokeKeySecretKey]))
}

// TestBootstrap_suspendedSpokeGetsNoInstallUntilResumed is issue 23 Medium
// 7 (the bootstrap's half): a suspended Spoke's agent is neither installed
// nor upgraded, AgentInstalled says so (reason Suspended), and it is once
// spec.suspend is false again. Before the fix the hub installed and
// upgraded suspended spokes as any other.
func TestBootstrap_suspendedSpokeGetsNoInstallUntilResumed(t *testing.T) {
	e := newBootstrapEnv(t, "boot-suspend")
	g := e.g
	ctx := context.Background()
	sp := e.spoke("paused", quiet)
	sp.Spec.Suspend = true
	g.Expect(cluster.Client.Create(ctx, sp)).To(Succeed())

	g.Eventually(e.notInstalled(sp, tugboatv1alpha1.AgentInstalledCondition)).WithTimeout(bootWait).Should(And(
		HaveField("Status", metav1.ConditionFalse), HaveField("Reason", tugboatv1alpha1.SuspendedReason.String()),
		HaveField("Message", HavePrefix("spec.suspend is true: the hub installs and upgrades no agent on a suspended spoke"))))
	g.Consistently(func() bool {
		return apierrors.IsNotFound(e.workload.Client.Get(ctx, client.ObjectKey{Name: "tugboat-system"}, &corev1.Namespace{}))
	}).WithTimeout(2*time.Second).WithPolling(200*time.Millisecond).Should(BeTrue(), "nothing is written to a suspended spoke")

	// Resumed: installed.
	e.update(sp, func(s *tugboatv1alpha1.Spoke) { s.Spec.Suspend = false })
	g.Eventually(e.condition(sp, tugboatv1alpha1.AgentInstalledCondition)).WithTimeout(bootWait).Should(HaveField("Status", metav1.ConditionTrue))
	g.Expect(e.get(sp).Status.AgentBootstrap).To(HaveField("Revision", BeEquivalentTo(1)))
	g.Expect(e.installedKey()).NotTo(BeEmpty())

	// Suspended again, with new values: no upgrade until resumed.
	e.update(sp, func(s *tugboatv1alpha1.Spoke) {
		s.Spec.Suspend = true
		s.Spec.AgentBootstrap.Values = &apiextensionsv1.JSON{Raw: []byte(`{"replicas":0,"webhook":{"enabled":false},"logLevel":"debug"}`)}
	})
	g.Eventually(e.condition(sp, tugboatv1alpha1.AgentInstalledCondition)).WithTimeout(bootWait).Should(And(
		HaveField("Reason", tugboatv1alpha1.SuspendedReason.String()),
		HaveField("Message", ContainSubstring("(installed: agent (the chart's default image), release revision 1, left as it is)"))))
	g.Expect(e.get(sp).Status.AgentBootstrap).To(HaveField("Revision", BeEquivalentTo(1)), "not upgraded")
	e.update(sp, func(s *tugboatv1alpha1.Spoke) { s.Spec.Suspend = false })
	g.Eventually(func() int32 { return e.get(sp).Status.AgentBootstrap.Revision }).WithTimeout(bootWait).Should(BeEquivalentTo(2), "upgraded once resumed")
	g.Expect(e.condition(sp, tugboatv1alpha1.AgentInstalledCondition)()).To(HaveField("Status", metav1.ConditionTrue))
}
