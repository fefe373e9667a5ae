// Package config_test checks the kustomize bases in config/: that they
// build, and that the agent's Deployment passes flags the agent accepts.
package config_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"tugboat.dev/tugboat/agent"
	"tugboat.dev/tugboat/controllers/hub"
	"tugboat.dev/tugboat/webhook/admission"
)

// build runs kustomize on dir, as `kubectl kustomize dir` would.
func build(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out := map[string][]byte{}
	for _, r := range res.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		out[r.GetKind()+"/"+r.GetNamespace()+"/"+r.GetName()] = data
	}
	return out
}

func decode(t *testing.T, data []byte, into runtime.Object) {
	t.Helper()
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("decoding %T: %v\n%s", into, err, data)
	}
}

// agentFlags expands the container's $(VAR) references from its env (values
// from the ConfigMap) and parses the args with the agent's own flags.
func agentFlags(t *testing.T, objs map[string][]byte) agent.Options {
	t.Helper()
	g := NewWithT(t)
	var dep appsv1.Deployment
	var cm corev1.ConfigMap
	g.Expect(objs).To(HaveKey("Deployment/tugboat-system/tugboat-agent"))
	decode(t, objs["Deployment/tugboat-system/tugboat-agent"], &dep)
	for key, data := range objs {
		if strings.HasPrefix(key, "ConfigMap/tugboat-system/tugboat-agent") {
			decode(t, data, &cm)
		}
	}
	g.Expect(cm.Data).NotTo(BeEmpty(), "the generated ConfigMap tugboat-agent")
	c := dep.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			g.Expect(e.ValueFrom.ConfigMapKeyRef.Name).To(Equal(cm.Name), "env %s", e.Name)
			v, ok := cm.Data[e.ValueFrom.ConfigMapKeyRef.Key]
			g.Expect(ok).To(BeTrue(), "env %s: key %s is not in the ConfigMap", e.Name, e.ValueFrom.ConfigMapKeyRef.Key)
			env[e.Name] = v
		}
	}
	g.Expect(c.Args).NotTo(BeEmpty())
	g.Expect(c.Args[0]).To(Equal("agent"))
	args := make([]string, 0, len(c.Args)-1)
	for _, a := range c.Args[1:] {
		for name, v := range env {
			a = strings.ReplaceAll(a, "$("+name+")", v)
		}
		g.Expect(a).NotTo(ContainSubstring("$("), "an unresolved variable in %q", a)
		args = append(args, a)
	}
	opts := agent.NewOptions()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	opts.BindFlags(fs)
	g.Expect(fs.Parse(args)).To(Succeed())
	g.Expect(opts.Validate()).To(Succeed())

	// Every Secret the Deployment mounts that the base ships, and the cert
	// directory is one of the mounts.
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.MountPath == opts.Webhook.CertDir {
			mounted = true
		}
	}
	g.Expect(mounted).To(BeTrue(), "--webhook-cert-dir %s is not a volume mount", opts.Webhook.CertDir)
	return opts
}

// overlay writes a kustomization into a new directory that uses the bases
// (paths relative to config/) and components, and sets the agent's
// ConfigMap as README.md tells users to.
func overlay(t *testing.T, bases, components []string) string {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := filepath.Rel(dir, abs)
		if err != nil {
			t.Fatal(err)
		}
		return r // kustomize wants relative paths
	}
	var b strings.Builder
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, p := range bases {
		b.WriteString("  - " + rel(p) + "\n")
	}
	if len(components) > 0 {
		b.WriteString("components:\n")
		for _, p := range components {
			b.WriteString("  - " + rel(p) + "\n")
		}
	}
	b.WriteString("configMapGenerator:\n  - name: tugboat-agent\n    behavior: merge\n    literals:\n" +
		"      - spoke=staging-1\n      - hubURL=https://tugboat-hub.example.com\n")
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAgentBase_refusesToRunWithThePlaceholderSpokeName(t *testing.T) {
	g := NewWithT(t)
	objs := build(t, "agent")
	var dep appsv1.Deployment
	decode(t, objs["Deployment/tugboat-system/tugboat-agent"], &dep)
	var cm corev1.ConfigMap
	for key, data := range objs {
		if strings.HasPrefix(key, "ConfigMap/tugboat-system/tugboat-agent") {
			decode(t, data, &cm)
		}
	}
	opts := agent.NewOptions()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	opts.BindFlags(fs)
	g.Expect(fs.Parse([]string{"--spoke", cm.Data["spoke"], "--hub-url", cm.Data["hubURL"], "--hub-key-file", "/k"})).To(Succeed())
	g.Expect(opts.Validate()).To(MatchError(ContainSubstring(`--spoke "CHANGE-ME"`)))
}

func TestAgentBase_buildsAndRotatesItsWebhookCertificate(t *testing.T) {
	g := NewWithT(t)
	objs := build(t, overlay(t, []string{"agent"}, nil))
	opts := agentFlags(t, objs)
	g.Expect(opts.Reporter.Spoke).To(Equal("staging-1"))
	g.Expect(opts.Webhook.CertRotation).To(BeTrue())
	// The rotator needs its Secret to exist, and a Role to update it.
	g.Expect(objs).To(HaveKey("Secret/tugboat-system/" + opts.Webhook.CertSecretName))
	g.Expect(objs).To(HaveKey("Role/tugboat-system/tugboat-agent"))
	g.Expect(objs).To(HaveKey("RoleBinding/tugboat-system/tugboat-agent"))
	g.Expect(objs).To(HaveKey("ClusterRole//tugboat-agent"))
	g.Expect(objs).To(HaveKey("ClusterRoleBinding//tugboat-agent"))

	// The webhook configurations are deployed as manifests, exactly as the
	// agent itself would register them through its Service; so the agent
	// does not register them.
	g.Expect(opts.Webhook.Register).To(BeFalse())
	reg := admission.Registration{
		Name: opts.Webhook.Name, AgentNamespace: opts.Webhook.AgentNamespace,
		Service: &admissionregistrationv1.ServiceReference{
			Namespace: opts.Webhook.ServiceNamespace, Name: opts.Webhook.ServiceName, Port: ptr.To[int32](443),
		},
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	decode(t, objs["MutatingWebhookConfiguration//"+opts.Webhook.Name], &mwc)
	decode(t, objs["ValidatingWebhookConfiguration//"+opts.Webhook.Name], &vwc)
	g.Expect(&mwc).To(Equal(reg.Mutating()))
	g.Expect(&vwc).To(Equal(reg.Validating()))

	// The Service routes 443 to the webhook server's port.
	var svc corev1.Service
	decode(t, objs["Service/tugboat-system/"+opts.Webhook.ServiceName], &svc)
	_, port, err := net.SplitHostPort(opts.Webhook.BindAddress)
	g.Expect(err).NotTo(HaveOccurred())
	found := false
	for _, p := range svc.Spec.Ports {
		if p.Port == 443 {
			found = true
			g.Expect(p.TargetPort.String()).To(Or(Equal(port), Equal("webhook")))
		}
	}
	g.Expect(found).To(BeTrue(), "the Service has port 443")
}

func TestAgentCertManagerComponent_turnsRotationOff(t *testing.T) {
	g := NewWithT(t)
	objs := build(t, overlay(t, []string{"agent"}, []string{"agent/certmanager"}))
	opts := agentFlags(t, objs)
	g.Expect(opts.Webhook.CertRotation).To(BeFalse())
	g.Expect(objs).To(HaveKey("Certificate/tugboat-system/tugboat-agent-webhook"))
	// cert-manager's cainjector fills both configurations' caBundle from
	// that Certificate.
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	decode(t, objs["MutatingWebhookConfiguration//tugboat-agent"], &mwc)
	decode(t, objs["ValidatingWebhookConfiguration//tugboat-agent"], &vwc)
	for _, a := range []map[string]string{mwc.Annotations, vwc.Annotations} {
		g.Expect(a).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", "tugboat-system/tugboat-agent-webhook"))
	}
}

func TestHubBase_builds(t *testing.T) {
	g := NewWithT(t)
	objs := build(t, "hub")
	g.Expect(objs).NotTo(BeEmpty())
	found := false
	for key := range objs {
		if strings.HasPrefix(key, "Deployment/") {
			found = true
		}
	}
	g.Expect(found).To(BeTrue(), "the hub base has a Deployment")

	// The hub's args parse with the hub's own flags and validate.
	var dep appsv1.Deployment
	decode(t, objs["Deployment/tugboat-system/tugboat-hub"], &dep)
	c := dep.Spec.Template.Spec.Containers[0]
	g.Expect(c.Args).NotTo(BeEmpty())
	g.Expect(c.Args[0]).To(Equal("hub"))
	opts := hub.NewOptions()
	fs := pflag.NewFlagSet("hub", pflag.ContinueOnError)
	opts.BindFlags(fs)
	g.Expect(fs.Parse(c.Args[1:])).To(Succeed())
	g.Expect(opts.Validate()).To(Succeed())
	for _, crd := range []string{"pipelines", "promotions", "releasehistories", "spokes"} {
		g.Expect(objs).To(HaveKey("CustomResourceDefinition//" + crd + ".tugboat.dev"))
	}
}
