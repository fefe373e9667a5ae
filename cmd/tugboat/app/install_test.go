//go:build !agentonly

package app_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/config"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/e2e/harness"
)

// run runs the CLI in-process with exactly args (no kubeconfig added).
func run(args ...string) (stdout, stderr string, err error) {
	cmd := app.NewRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// parseYAML decodes a YAML stream into objects; it fails the test on
// anything that is not a Kubernetes object.
func parseYAML(g Gomega, stream string) []*unstructured.Unstructured {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		g.Expect(err).NotTo(HaveOccurred(), stream)
		if len(u.Object) == 0 {
			continue
		}
		g.Expect(u.GetKind()).NotTo(BeEmpty())
		g.Expect(u.GetName()).NotTo(BeEmpty())
		objs = append(objs, u)
	}
}

func newObject(apiVersion, kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (o.GetName() == name || strings.HasPrefix(o.GetName(), name+"-") && kind == "ConfigMap") {
			return o
		}
	}
	return nil
}

// versions reads the resourceVersion of every object of objs on c.
func versions(g Gomega, c client.Client, objs []*unstructured.Unstructured) map[string]string {
	rv := map[string]string{}
	for _, o := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(o), got)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
		rv[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = got.GetResourceVersion()
	}
	return rv
}

// kubeconfigVariant writes a copy of the kubeconfig at path with change
// applied to it.
func kubeconfigVariant(t *testing.T, path string, change func(*clientcmdapi.Config)) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	change(cfg)
	out := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestInstall installs the hub into a fresh cluster (the "spoke" one), then
// registers a spoke on the shared hub cluster and installs its agent into
// that spoke cluster, with the real hub running in-process to generate the
// spoke's key. The subtests run in order and build on each other.
func TestInstall(t *testing.T) {
	spoke := harness.StartT(t, harness.Options{Name: "spoke", ControlPlaneOnly: true})
	ctx := context.Background()
	const image = "registry.example.com/tugboat/tugboat:v1.2.3"

	var hubObjs []*unstructured.Unstructured
	t.Run("hub --dry-run prints the YAML and touches nothing", func(t *testing.T) {
		g := NewWithT(t)
		// A kubeconfig whose cluster does not answer: dry run never asks.
		dead := kubeconfigVariant(t, spoke.KubeconfigPath, func(c *clientcmdapi.Config) { c.Clusters["spoke"].Server = "https://127.0.0.1:1" })
		out, _, err := run("install", "hub", "--kubeconfig", dead, "--dry-run", "--image", image)
		g.Expect(err).NotTo(HaveOccurred())
		hubObjs = parseYAML(g, out)
		for _, crd := range []string{"pipelines", "promotions", "releasehistories", "spokes"} {
			g.Expect(find(hubObjs, "CustomResourceDefinition", crd+".tugboat.dev")).NotTo(BeNil(), crd)
		}
		dep := find(hubObjs, "Deployment", "tugboat-hub")
		g.Expect(dep).NotTo(BeNil())
		containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		g.Expect(containers[0].(map[string]any)["image"]).To(Equal(image))
		g.Expect(find(hubObjs, "Service", "tugboat-hub")).NotTo(BeNil())
		g.Expect(find(hubObjs, "ClusterRole", "tugboat-hub")).NotTo(BeNil())

		var crds apiextensionsv1.CustomResourceDefinitionList
		g.Expect(spoke.Client.List(ctx, &crds)).To(Succeed())
		g.Expect(crds.Items).To(BeEmpty())
	})

	t.Run("hub installs into a fresh cluster, and again changes nothing", func(t *testing.T) {
		g := NewWithT(t)
		out, _, err := run("install", "hub", "--kubeconfig", spoke.KubeconfigPath, "--image", image, "--timeout", "60s")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("Release tugboat-system/tugboat-hub installed (chart tugboat-hub-"))
		g.Expect(out).To(ContainSubstring("CustomResourceDefinition spokes.tugboat.dev"))
		g.Expect(out).To(ContainSubstring("Deployment tugboat-system/tugboat-hub"))

		for _, name := range []string{"pipelines", "promotions", "releasehistories", "spokes"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(spoke.Client.Get(ctx, client.ObjectKey{Name: name + ".tugboat.dev"}, crd)).To(Succeed())
			established := false
			for _, c := range crd.Status.Conditions {
				established = established || c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}
			g.Expect(established).To(BeTrue(), "install waited until %s was Established", crd.Name)
		}
		dep := &appsv1.Deployment{}
		g.Expect(spoke.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-hub"}, dep)).To(Succeed())
		g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
		g.Expect(dep.Spec.Template.Spec.Containers[0].Args[0]).To(Equal("hub"))
		// A Helm release, which helm itself reads.
		g.Expect(spoke.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "sh.helm.release.v1.tugboat-hub.v1"}, &corev1.Secret{})).To(Succeed())

		// Again: an upgrade in place that changes no object (the receiver's
		// self-signed certificate included).
		before := versions(g, spoke.Client, hubObjs)
		// -o json: the result on stdout, the progress on stderr.
		out, progress, err := run("install", "hub", "--kubeconfig", spoke.KubeconfigPath, "--image", image, "-o", "json")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(progress).To(ContainSubstring("Release tugboat-system/tugboat-hub upgraded in place"))
		g.Expect(progress).To(ContainSubstring("revision 2"))
		var result struct {
			Release, Namespace, Chart, Action string
			Revision                          int
			Objects                           []string
		}
		g.Expect(json.Unmarshal([]byte(out), &result)).To(Succeed(), out)
		g.Expect(result.Release).To(Equal("tugboat-hub"))
		g.Expect(result.Namespace).To(Equal("tugboat-system"))
		g.Expect(result.Action).To(Equal("upgraded"))
		g.Expect(result.Revision).To(Equal(2))
		g.Expect(result.Objects).To(ContainElement("CustomResourceDefinition spokes.tugboat.dev"))
		g.Expect(versions(g, spoke.Client, hubObjs)).To(Equal(before))
	})

	t.Run("hub errors name the problem", func(t *testing.T) {
		g := NewWithT(t)
		dead := kubeconfigVariant(t, spoke.KubeconfigPath, func(c *clientcmdapi.Config) { c.Clusters["spoke"].Server = "https://127.0.0.1:1" })
		_, _, err := run("install", "hub", "--kubeconfig", dead)
		g.Expect(err).To(MatchError(ContainSubstring("cannot reach the hub cluster (https://127.0.0.1:1)")))

		jane := kubeconfigVariant(t, spoke.KubeconfigPath, func(c *clientcmdapi.Config) { c.AuthInfos["spoke-admin"].Impersonate = "jane" })
		_, _, err = run("install", "hub", "--kubeconfig", jane)
		g.Expect(err).To(MatchError(And(
			ContainSubstring("installing the chart tugboat-hub into the hub cluster"),
			ContainSubstring("forbidden"), ContainSubstring(`User "jane" cannot`))))

		_, _, err = run("install", "hub", "--kubeconfig", spoke.KubeconfigPath, "--context", "nope")
		g.Expect(err).To(MatchError(ContainSubstring(`loading the hub cluster's kubeconfig: context "nope" does not exist`)))
		_, _, err = run("install", "hub", "--dry-run", "--image", "not an image")
		g.Expect(err).To(MatchError(ContainSubstring(`--image "not an image" is not an image reference`)))
	})

	t.Run("agent: bad input is refused before anything is done", func(t *testing.T) {
		g := NewWithT(t)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--hub-url", "https://hub.example.com"}, `required flag(s) "spoke" not set`},
			{[]string{"--spoke", "staging-1"}, `required flag(s) "hub-url" not set`},
			{[]string{"--spoke", "Staging_1", "--hub-url", "https://hub.example.com"}, `--spoke "Staging_1" is not a valid spoke name (an RFC 1123 label)`},
			{[]string{"--spoke", "staging-1", "--hub-url", "hub.example.com"}, `--hub-url "hub.example.com" must be an absolute http(s) URL`},
			{[]string{"--spoke", "staging-1", "--hub-url", "https://hub.example.com"}, "set --spoke-context or --spoke-kubeconfig"},
			{[]string{"--spoke", "staging-1", "--hub-url", "https://hub.example.com", "--spoke-context", "x", "-n", "Fleet"}, `--namespace "Fleet" is not a valid namespace`},
		} {
			args := append([]string{"install", "agent", "--kubeconfig", cluster.KubeconfigPath}, tc.args...)
			_, _, err := run(args...)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)), "%v", tc.args)
		}
		var spokes tugboatv1alpha1.SpokeList
		g.Expect(cluster.Client.List(ctx, &spokes)).To(Succeed())
		g.Expect(spokes.Items).To(BeEmpty())
	})

	t.Run("agent --dry-run prints the spoke's YAML and touches nothing", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, err := run("install", "agent", "--spoke", "staging-1", "--hub-url", "https://hub.example.com:8443",
			"--kubeconfig", cluster.KubeconfigPath, "--spoke-kubeconfig", spoke.KubeconfigPath, "-n", "fleet", "--cert-manager", "--dry-run")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(errOut).To(ContainSubstring("Spoke fleet/staging-1"))
		objs := parseYAML(g, out)
		dep := find(objs, "Deployment", "tugboat-agent")
		g.Expect(dep).NotTo(BeNil(), out)
		containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		g.Expect(containers[0].(map[string]any)["args"]).To(ContainElements("--spoke=staging-1", "--hub-url=https://hub.example.com:8443", "--webhook-cert-rotation=false"))
		g.Expect(find(objs, "Certificate", "tugboat-agent-webhook")).NotTo(BeNil(), "cert-manager keeps the certificate")
		g.Expect(find(objs, "Secret", "tugboat-agent-hub-key")).To(BeNil(), "the key is not printed")

		var spokes tugboatv1alpha1.SpokeList
		g.Expect(cluster.Client.List(ctx, &spokes)).To(Succeed())
		g.Expect(spokes.Items).To(BeEmpty())
		err = spoke.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-agent"}, &appsv1.Deployment{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	})

	t.Run("agent: a hub that never generates the key is named", func(t *testing.T) {
		g := NewWithT(t)
		// No hub runs yet.
		_, _, err := run("install", "agent", "--spoke", "lonely-1", "--hub-url", "https://hub.example.com",
			"--kubeconfig", cluster.KubeconfigPath, "--spoke-kubeconfig", spoke.KubeconfigPath, "-n", "default", "--timeout", "1s")
		g.Expect(err).To(MatchError(And(ContainSubstring("the hub did not generate the key Secret default/lonely-1-key of Spoke default/lonely-1 within 1s"),
			ContainSubstring("is the hub running"))))
		err = spoke.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-agent-hub-key"}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing on the spoke: %v", err)
		g.Expect(cluster.Client.Delete(ctx, &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lonely-1"}})).To(Succeed())
	})

	t.Run("agent --cert-manager without cert-manager on the spoke is refused before anything is done", func(t *testing.T) {
		g := NewWithT(t)
		_, _, err := run("install", "agent", "--spoke", "cm-1", "--hub-url", "https://hub.example.com", "--cert-manager",
			"--kubeconfig", cluster.KubeconfigPath, "--spoke-kubeconfig", spoke.KubeconfigPath, "-n", "default")
		g.Expect(err).To(MatchError(And(ContainSubstring("cert-manager.io/v1 Certificate"), ContainSubstring("spoke cluster"),
			ContainSubstring("is cert-manager installed there?"))))
		err = cluster.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "cm-1"}, &tugboatv1alpha1.Spoke{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Spoke on the hub: %v", err)
		err = spoke.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-agent"}, &appsv1.Deployment{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing on the spoke: %v", err)
	})

	t.Run("agent: registers the spoke, waits for the hub's key, installs; twice changes nothing", func(t *testing.T) {
		g := NewWithT(t)
		const ns = "fleet-install" // does not exist yet: install creates it
		args := []string{"install", "agent", "--spoke", "staging-1", "--hub-url", "https://hub.example.com:8443",
			"--kubeconfig", cluster.KubeconfigPath, "--spoke-kubeconfig", spoke.KubeconfigPath, "-n", ns, "--image", image, "--timeout", "90s"}
		type result struct {
			out, errOut string
			err         error
		}
		done := make(chan result, 1)
		go func() {
			out, errOut, err := run(args...)
			done <- result{out, errOut, err}
		}()

		// install creates the Spoke and waits: only then does the hub start,
		// so the key is generated while install waits for it.
		sp := &tugboatv1alpha1.Spoke{}
		g.Eventually(func() error {
			return cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "staging-1"}, sp)
		}, 30*time.Second, 50*time.Millisecond).Should(Succeed())
		g.Expect(sp.Spec.KeySecretRef.Name).To(Equal("staging-1-key"))
		err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "staging-1-key"}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no key before the hub runs: %v", err)
		g.Consistently(done, 300*time.Millisecond, 50*time.Millisecond).ShouldNot(Receive(), "install waits for the key")
		startHub(t)

		var r result
		g.Eventually(done, 90*time.Second, 100*time.Millisecond).Should(Receive(&r))
		g.Expect(r.err).NotTo(HaveOccurred(), r.out+r.errOut)
		g.Expect(r.out).To(ContainSubstring("Spoke " + ns + "/staging-1 created"))
		g.Expect(r.out).To(ContainSubstring("Secret tugboat-system/tugboat-agent-hub-key created"))

		hubKey := &corev1.Secret{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "staging-1-key"}, hubKey)).To(Succeed())
		key := hubKey.Data[tugboatv1alpha1.SpokeKeySecretKey]
		g.Expect(len(key)).To(BeNumerically(">=", 16))
		spokeKey := &corev1.Secret{}
		g.Expect(spoke.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-agent-hub-key"}, spokeKey)).To(Succeed())
		g.Expect(spokeKey.Data).To(Equal(map[string][]byte{"key": key}))
		noKey := func(text string) {
			g.Expect(text).NotTo(ContainSubstring(string(key)))
			g.Expect(text).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString(key)))
		}
		noKey(r.out)
		noKey(r.errOut)

		dep := &appsv1.Deployment{}
		g.Expect(spoke.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-agent"}, dep)).To(Succeed())
		c := dep.Spec.Template.Spec.Containers[0]
		g.Expect(c.Image).To(Equal(image))
		g.Expect(c.Args).To(ContainElements("agent", "--spoke=staging-1", "--hub-url=https://hub.example.com:8443",
			"--hub-key-file=/etc/tugboat/key/key", "--webhook-cert-rotation=true", "--actions-enabled=false"))
		g.Expect(spoke.Client.Get(ctx, client.ObjectKey{Name: "tugboat-agent"}, newObject("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"))).To(Succeed())
		// The agent's objects are on the spoke only, the Spoke on the hub only.
		err = cluster.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-agent"}, &appsv1.Deployment{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		var onSpoke tugboatv1alpha1.SpokeList
		g.Expect(spoke.Client.List(ctx, &onSpoke)).To(Succeed())
		g.Expect(onSpoke.Items).To(BeEmpty())

		// Again: the Spoke exists, so does its key; nothing changes.
		dry, _, err := run(append(args, "--dry-run")...)
		g.Expect(err).NotTo(HaveOccurred())
		objs := append(parseYAML(g, dry), newObject("v1", "Secret"))
		objs[len(objs)-1].SetNamespace("tugboat-system")
		objs[len(objs)-1].SetName("tugboat-agent-hub-key")
		before := versions(g, spoke.Client, objs)
		out, errOut, err := run(args...)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("Spoke " + ns + "/staging-1 exists"))
		g.Expect(out).To(ContainSubstring("Secret tugboat-system/tugboat-agent-hub-key unchanged"))
		g.Expect(out).To(ContainSubstring("Release tugboat-system/tugboat-agent upgraded in place"))
		g.Expect(versions(g, spoke.Client, objs)).To(Equal(before))
		noKey(out)
		noKey(errOut)
	})
}

// TestUninstall_keepsDataUnlessPurged installs the hub and an agent on a
// fresh cluster: uninstall keeps the hub's CRDs and data and the agent's
// key; --purge removes them.
func TestUninstall_keepsDataUnlessPurged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := harness.StartT(t, harness.Options{Name: "uninstall", ControlPlaneOnly: true})
	kc := c.KubeconfigPath
	out, _, err := run("install", "hub", "--kubeconfig", kc, "--timeout", "60s")
	g.Expect(err).NotTo(HaveOccurred(), out)
	sp := &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tugboat-system", Name: "edge-1"},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: "edge-1-key"}},
	}
	g.Eventually(func() error { return c.Client.Create(ctx, sp) }).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(c.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tugboat-system", Name: "tugboat-agent-hub-key"}})).To(Succeed())
	// The agent's chart, as install agent installs it (without a hub to
	// generate the key, which the test wrote above).
	_, err = config.Apply(ctx, config.Target{Kubeconfig: kc, Namespace: "tugboat-system"}, config.AgentChart,
		map[string]any{"spoke": "edge-1", "hub": map[string]any{"url": "https://hub.example.com"}}, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())

	out, _, err = run("uninstall", "agent", "--kubeconfig", kc)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Release tugboat-system/tugboat-agent uninstalled"))
	err = c.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-agent"}, &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-agent-hub-key"}, &corev1.Secret{})).To(Succeed(), "the key stays")
	// -o json: the result on stdout, the progress on stderr.
	out, progress, err := run("uninstall", "agent", "--kubeconfig", kc, "--purge", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(progress).To(ContainSubstring("No release tugboat-system/tugboat-agent"))
	g.Expect(progress).To(ContainSubstring("Secret tugboat-system/tugboat-agent-hub-key deleted"))
	var result struct {
		Release string
		Removed bool
		Deleted []string
	}
	g.Expect(json.Unmarshal([]byte(out), &result)).To(Succeed(), out)
	g.Expect(result.Release).To(Equal("tugboat-agent"))
	g.Expect(result.Removed).To(BeFalse())
	g.Expect(result.Deleted).To(ContainElement("Secret tugboat-system/tugboat-agent-hub-key"))
	err = c.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-agent-hub-key"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)

	out, _, err = run("uninstall", "hub", "--kubeconfig", kc)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Release tugboat-system/tugboat-hub uninstalled"))
	err = c.Client.Get(ctx, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-hub"}, &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(sp), &tugboatv1alpha1.Spoke{})).To(Succeed(), "the data stays")

	out, _, err = run("uninstall", "hub", "--kubeconfig", kc, "--purge")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("CustomResourceDefinition spokes.tugboat.dev deleted"))
	g.Eventually(func() bool {
		err := c.Client.Get(ctx, client.ObjectKey{Name: "spokes.tugboat.dev"}, &apiextensionsv1.CustomResourceDefinition{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(30 * time.Second).Should(BeTrue())

	_, _, err = run("uninstall", "hub", "--kubeconfig", kc, "--timeout", "0s")
	g.Expect(err).To(MatchError(ContainSubstring("--timeout must be positive")))
}

// startHub runs the real hub in-process against the hub cluster until the
// test ends: its Spoke controller generates the spokes' keys.
func startHub(t *testing.T) {
	t.Helper()
	opts := hubtest.Options()
	opts.Strategies = strategy.Registry{}
	hubtest.Start(t, cluster.RESTConfig, opts)
}

// TestInstall_hubAdoptsCRDsAppliedOutsideHelm: CRDs applied with kubectl
// before (as a new user following another guide does) made the install fail
// with Helm's "invalid ownership metadata"; install hub adopts them into its
// release, and says so (security review 3, docs that misled).
func TestInstall_hubAdoptsCRDsAppliedOutsideHelm(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := harness.StartT(t, harness.Options{Name: "adopt", ControlPlaneOnly: true})
	files, err := config.CRDs()
	g.Expect(err).NotTo(HaveOccurred())
	crds, err := harness.ReadCRDFiles(files)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(harness.Install(ctx, c.Client, crds)).To(Succeed())

	out, _, err := run("install", "hub", "--kubeconfig", c.KubeconfigPath, "--image", "registry.example.com/tugboat/tugboat:v1.2.3", "--timeout", "60s")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("adopted CRD spokes.tugboat.dev (applied outside Helm) into release tugboat-system/tugboat-hub"))
	g.Expect(out).To(ContainSubstring("Release tugboat-system/tugboat-hub installed"))
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: "spokes.tugboat.dev"}, crd)).To(Succeed())
	g.Expect(crd.Annotations).To(HaveKeyWithValue("meta.helm.sh/release-name", "tugboat-hub"))
	g.Expect(crd.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"))
}
