package config_test

import (
	"flag"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"tugboat.dev/tugboat/agent"
	"tugboat.dev/tugboat/agent/admission"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/config"
	"tugboat.dev/tugboat/controllers/spoke"
)

// agentValues are the least values the agent chart needs.
func agentValues(extra map[string]any) map[string]any {
	v := map[string]any{"spoke": "staging-1", "hub": map[string]any{"url": "https://tugboat-hub.example.com"}}
	for k, x := range extra {
		v[k] = x
	}
	return v
}

// render renders a chart and keys its objects "Kind/namespace/name".
func render(t *testing.T, chart, namespace string, values map[string]any) map[string][]byte {
	t.Helper()
	objs, err := config.Render(chart, namespace, values)
	if err != nil {
		t.Fatalf("rendering %s: %v", chart, err)
	}
	out := map[string][]byte{}
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		key := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
		if _, dup := out[key]; dup {
			t.Fatalf("%s renders %s twice", chart, key)
		}
		out[key] = data
	}
	return out
}

func decode(t *testing.T, data []byte, into runtime.Object) {
	t.Helper()
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("decoding %T: %v\n%s", into, err, data)
	}
}

// container returns the first container of the Deployment.
func container(t *testing.T, objs map[string][]byte, key string) corev1.Container {
	t.Helper()
	data, ok := objs[key]
	if !ok {
		t.Fatalf("no %s among %v", key, keys(objs))
	}
	var dep appsv1.Deployment
	decode(t, data, &dep)
	return dep.Spec.Template.Spec.Containers[0]
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// flagSet has the logging flags every tugboat command has (cmd/tugboat/app
// logFlags).
func flagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	zfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	(&zap.Options{}).BindFlags(zfs)
	fs.AddGoFlagSet(zfs)
	return fs
}

// agentFlags parses the agent Deployment's args with the agent's own flags.
func agentFlags(t *testing.T, objs map[string][]byte, namespace string) agent.Options {
	t.Helper()
	g := NewWithT(t)
	c := container(t, objs, "Deployment/"+namespace+"/tugboat-agent")
	g.Expect(c.Args[0]).To(Equal("agent"))
	opts := agent.NewOptions()
	fs := flagSet("agent")
	opts.BindFlags(fs)
	g.Expect(fs.Parse(c.Args[1:])).To(Succeed())
	g.Expect(opts.Validate()).To(Succeed())
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.MountPath == opts.Webhook.CertDir {
			mounted = true
		}
	}
	g.Expect(mounted).To(BeTrue(), "--webhook-cert-dir %s is not a volume mount", opts.Webhook.CertDir)
	return opts
}

func TestHubChart_rendersAHubWhoseArgsTheHubAccepts(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, config.HubChart, "ops", nil)
	c := container(t, objs, "Deployment/ops/tugboat-hub")
	g.Expect(c.Args[0]).To(Equal("hub"))
	opts := hub.NewOptions()
	fs := flagSet("hub")
	opts.BindFlags(fs)
	g.Expect(fs.Parse(c.Args[1:])).To(Succeed())
	g.Expect(opts.Validate()).To(Succeed())
	g.Expect(opts.LeaderElectionNamespace).To(Equal("ops"))
	g.Expect(c.Image).To(Equal("ghcr.io/tugboat-dev/tugboat:0.1.0"))

	// The receiver's certificate (self-signed by default) is the Secret the
	// Deployment mounts, with the CA agents trust.
	var tls corev1.Secret
	decode(t, objs["Secret/ops/tugboat-hub-receiver-tls"], &tls)
	g.Expect(tls.Data).To(HaveKey("tls.crt"))
	g.Expect(tls.Data).To(HaveKey("tls.key"))
	g.Expect(tls.Data).To(HaveKey("ca.crt"))

	// CRDs are templates, kept on uninstall: every generated one.
	crds, err := config.CRDs()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(crds).To(HaveKey("tugboat.dev_spokeclasses.yaml"))
	for file := range crds {
		name := strings.TrimSuffix(strings.TrimPrefix(file, "tugboat.dev_"), ".yaml")
		key := "CustomResourceDefinition//" + name + ".tugboat.dev"
		g.Expect(objs).To(HaveKey(key))
		g.Expect(string(objs[key])).To(ContainSubstring("helm.sh/resource-policy: keep"))
	}
}

// TestHubChart_shipsTheApprovalPolicyForItsOwnServiceAccount: the policy
// exempts exactly the ServiceAccount the hub runs as, in the namespace the
// chart is installed in. The policy's rules themselves are tested on a real
// API server (controllers/promotion/request).
func TestHubChart_shipsTheApprovalPolicyForItsOwnServiceAccount(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, config.HubChart, "ops", nil)

	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	decode(t, objs["ValidatingAdmissionPolicy//tugboat-approvals"], &vap)
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	decode(t, objs["ValidatingAdmissionPolicyBinding//tugboat-approvals"], &binding)
	g.Expect(binding.Spec.PolicyName).To(Equal(vap.Name))
	g.Expect(binding.Spec.ValidationActions).To(ConsistOf(admissionregistrationv1.Deny))
	g.Expect(*vap.Spec.FailurePolicy).To(Equal(admissionregistrationv1.Fail))

	var sa corev1.ServiceAccount
	decode(t, objs["ServiceAccount/ops/tugboat-hub"], &sa)
	hubUser := "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
	g.Expect(vap.Spec.MatchConditions).To(HaveLen(1))
	g.Expect(vap.Spec.MatchConditions[0].Expression).To(Equal("request.userInfo.username != '" + hubUser + "'"))
	g.Expect(string(objs["Deployment/ops/tugboat-hub"])).To(ContainSubstring("serviceAccountName: " + sa.Name))

	resources := []string{}
	for _, r := range vap.Spec.MatchConstraints.ResourceRules {
		g.Expect(r.APIGroups).To(Equal([]string{"tugboat.dev"}))
		resources = append(resources, string(r.Operations[0])+" "+strings.Join(r.Resources, ","))
	}
	g.Expect(resources).To(ConsistOf("UPDATE promotions/status", "CREATE promotions"))

	var role rbacv1.ClusterRole
	decode(t, objs["ClusterRole//tugboat-approver"], &role)
	g.Expect(role.Rules).To(ContainElement(rbacv1.PolicyRule{APIGroups: []string{"tugboat.dev"}, Resources: []string{"environments"}, Verbs: []string{"approve", "abort", "pause", "resume"}}))

	off := render(t, config.HubChart, "ops", map[string]any{"approvals": map[string]any{"policy": false, "approverRole": false}})
	g.Expect(off).NotTo(HaveKey("ValidatingAdmissionPolicy//tugboat-approvals"))
	g.Expect(off).NotTo(HaveKey("ClusterRole//tugboat-approver"))
}

// TestHubChart_bindsSecretsOnlyInTheNamespacesItServes: the generated
// ClusterRole's Secret rules move to tugboat-hub-secrets, bound per served
// namespace; the cluster-wide role keeps no Secret rule.
func TestHubChart_bindsSecretsOnlyInTheNamespacesItServes(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, config.HubChart, "ops", map[string]any{"spokeNamespaces": []any{"fleet", "teams"}})
	var main, secrets rbacv1.ClusterRole
	decode(t, objs["ClusterRole//tugboat-hub"], &main)
	decode(t, objs["ClusterRole//tugboat-hub-secrets"], &secrets)
	for _, r := range main.Rules {
		g.Expect(r.Resources).NotTo(ContainElement("secrets"))
	}
	g.Expect(secrets.Rules).To(HaveLen(1))
	g.Expect(secrets.Rules[0].Resources).To(Equal([]string{"secrets"}))
	g.Expect(secrets.Rules[0].Verbs).To(ConsistOf("create", "get"))
	bound := []string{}
	for key := range objs {
		if strings.HasPrefix(key, "RoleBinding/") && strings.HasSuffix(key, "/tugboat-hub-secrets") {
			bound = append(bound, strings.Split(key, "/")[1])
		}
	}
	g.Expect(bound).To(ConsistOf("ops", "fleet", "teams"))
	g.Expect(objs).NotTo(HaveKey("ClusterRoleBinding//tugboat-hub-secrets"))

	all := render(t, config.HubChart, "ops", map[string]any{"spokeNamespaces": []any{"*"}})
	g.Expect(all).To(HaveKey("ClusterRoleBinding//tugboat-hub-secrets"))
}

// TestHubChart_grantsConfigMapsOnlyInItsNamespace: the generated
// ClusterRole's ConfigMap rules (the heartbeat digests) move to the Role
// tugboat-hub-heartbeats of the release namespace, where the hub writes
// its digests; the cluster-wide role keeps no ConfigMap rule.
func TestHubChart_grantsConfigMapsOnlyInItsNamespace(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, config.HubChart, "ops", nil)
	var main rbacv1.ClusterRole
	decode(t, objs["ClusterRole//tugboat-hub"], &main)
	for _, r := range main.Rules {
		g.Expect(r.Resources).NotTo(ContainElement("configmaps"))
	}
	var role rbacv1.Role
	decode(t, objs["Role/ops/tugboat-hub-heartbeats"], &role)
	g.Expect(role.Rules).To(HaveLen(1))
	g.Expect(role.Rules[0].Resources).To(Equal([]string{"configmaps"}))
	g.Expect(role.Rules[0].Verbs).To(ConsistOf("get", "list", "watch", "create", "patch", "delete"))
	var binding rbacv1.RoleBinding
	decode(t, objs["RoleBinding/ops/tugboat-hub-heartbeats"], &binding)
	g.Expect(binding.RoleRef.Name).To(Equal("tugboat-hub-heartbeats"))
	g.Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: "tugboat-hub", Namespace: "ops"}))
}

func TestAgentChart_rendersTheWebhooksTheAgentWouldRegister(t *testing.T) {
	for _, ns := range []string{"tugboat-system", "agents"} {
		t.Run(ns, func(t *testing.T) {
			g := NewWithT(t)
			objs := render(t, config.AgentChart, ns, agentValues(map[string]any{"watchNamespaces": []any{"apps", "web"}}))
			opts := agentFlags(t, objs, ns)
			g.Expect(opts.Reporter.Spoke).To(Equal("staging-1"))
			g.Expect(opts.Webhook.CertRotation).To(BeTrue())
			g.Expect(opts.Webhook.Register).To(BeFalse())
			g.Expect(objs).To(HaveKey("Secret/" + ns + "/" + opts.Webhook.CertSecretName))
			g.Expect(objs).To(HaveKey("Role/" + ns + "/tugboat-agent"))
			g.Expect(objs).To(HaveKey("RoleBinding/" + ns + "/tugboat-agent"))
			g.Expect(objs).To(HaveKey("ClusterRoleBinding//tugboat-agent"))
			// Exactly as the agent itself would register them through its
			// Service.
			reg := admission.Registration{
				Name: opts.Webhook.Name, AgentNamespace: opts.Webhook.AgentNamespace, Namespaces: opts.WatchNamespaces,
				Service: &admissionregistrationv1.ServiceReference{
					Namespace: opts.Webhook.ServiceNamespace, Name: opts.Webhook.ServiceName, Port: ptr.To[int32](443),
				},
			}
			g.Expect(opts.Webhook.AgentNamespace).To(Equal(ns))
			var mwc admissionregistrationv1.MutatingWebhookConfiguration
			var vwc admissionregistrationv1.ValidatingWebhookConfiguration
			decode(t, objs["MutatingWebhookConfiguration//tugboat-agent"], &mwc)
			decode(t, objs["ValidatingWebhookConfiguration//tugboat-agent"], &vwc)
			mwc.Labels, vwc.Labels = nil, nil
			g.Expect(&mwc).To(Equal(reg.Mutating()))
			g.Expect(&vwc).To(Equal(reg.Validating()))
		})
	}
}

func TestAgentChart_certManagerTurnsTheAgentsRotationOff(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, config.AgentChart, "tugboat-system", agentValues(map[string]any{"webhook": map[string]any{"certificate": "certManager"}}))
	opts := agentFlags(t, objs, "tugboat-system")
	g.Expect(opts.Webhook.CertRotation).To(BeFalse())
	g.Expect(objs).To(HaveKey("Certificate/tugboat-system/tugboat-agent-webhook"))
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		g.Expect(string(objs[kind+"//tugboat-agent"])).To(ContainSubstring("cert-manager.io/inject-ca-from: tugboat-system/tugboat-agent-webhook"))
	}
}

// TestAgentChart_withoutWebhooksTheBackfillLabels: webhook.enabled=false
// renders no webhook configuration, Secret or mount, and the agent runs
// with --webhook-disabled and its backfill.
func TestAgentChart_withoutWebhooksTheBackfillLabels(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, config.AgentChart, "tugboat-system", agentValues(map[string]any{"webhook": map[string]any{"enabled": false}}))
	for key := range objs {
		g.Expect(key).NotTo(ContainSubstring("WebhookConfiguration"))
		g.Expect(key).NotTo(ContainSubstring("tugboat-agent-webhook-tls"))
	}
	c := container(t, objs, "Deployment/tugboat-system/tugboat-agent")
	opts := agent.NewOptions()
	fs := flagSet("agent")
	opts.BindFlags(fs)
	g.Expect(fs.Parse(c.Args[1:])).To(Succeed())
	g.Expect(opts.Validate()).To(Succeed())
	g.Expect(opts.Webhook.Disabled).To(BeTrue())
	g.Expect(opts.Backfill).To(BeTrue())
	for _, m := range c.VolumeMounts {
		g.Expect(m.Name).NotTo(Equal("webhook-tls"))
	}
}

// TestAgentChart_helmStrategyIsOptInAndBoundOnlyWhereAllowed: without the
// opt-in nothing grants writes; with it, the role is bound per allowed
// namespace, never cluster-wide, and the agent's limits say the same.
func TestAgentChart_helmStrategyIsOptInAndBoundOnlyWhereAllowed(t *testing.T) {
	g := NewWithT(t)
	off := render(t, config.AgentChart, "tugboat-system", agentValues(nil))
	g.Expect(off).NotTo(HaveKey("ClusterRole//tugboat-agent-helm-strategy"))
	g.Expect(agentFlags(t, off, "tugboat-system").Actions.Enabled).To(BeFalse())

	on := render(t, config.AgentChart, "tugboat-system", agentValues(map[string]any{"helmStrategy": map[string]any{
		"enabled": true, "allowedNamespaces": []any{"apps", "web"}, "allowedChartSources": []any{"https://charts.example.com/stable"},
	}}))
	g.Expect(on).To(HaveKey("ClusterRole//tugboat-agent-helm-strategy"))
	g.Expect(on).To(HaveKey("RoleBinding/apps/tugboat-agent-helm-strategy"))
	g.Expect(on).To(HaveKey("RoleBinding/web/tugboat-agent-helm-strategy"))
	for key, data := range on {
		if strings.HasPrefix(key, "ClusterRoleBinding/") {
			g.Expect(string(data)).NotTo(ContainSubstring("name: tugboat-agent-helm-strategy"), key)
		}
	}
	opts := agentFlags(t, on, "tugboat-system")
	g.Expect(opts.Actions.Enabled).To(BeTrue())
	g.Expect(opts.Actions.Limits.Namespaces).To(Equal([]string{"apps", "web"}))
	g.Expect(opts.Actions.Limits.ChartSources).To(Equal([]string{"https://charts.example.com/stable"}))
	g.Expect(opts.Actions.InstallMissing).To(BeFalse())
}

// TestCharts_rejectBadValuesWithAClearError is the charts' bad-input table:
// values.schema.json and the templates' own checks.
func TestCharts_rejectBadValuesWithAClearError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chart  string
		values map[string]any
		want   string
	}{
		{"hub: unknown value", config.HubChart, map[string]any{"replica": 3}, "replica"},
		{"hub: negative replicas", config.HubChart, map[string]any{"replicas": -1}, "replicas"},
		{"hub: replicas without leader election", config.HubChart, map[string]any{"replicas": 2, "leaderElection": map[string]any{"enabled": false}}, "needs leaderElection.enabled"},
		{"hub: unknown TLS mode", config.HubChart, map[string]any{"receiver": map[string]any{"tls": map[string]any{"mode": "acme", "secretName": "x"}}}, "/receiver/tls/mode"},
		{"hub: cert-manager without an issuer", config.HubChart, map[string]any{"receiver": map[string]any{"tls": map[string]any{"mode": "certManager", "secretName": "x"}}}, "issuerRef"},
		{"hub: bad namespace", config.HubChart, map[string]any{"spokeNamespaces": []any{"Not_A_Namespace"}}, "spokeNamespaces"},
		{"hub: bad digest", config.HubChart, map[string]any{"image": map[string]any{"repository": "ghcr.io/x/y", "digest": "md5:abc"}}, "/image/digest"},
		{"hub: bad pull policy", config.HubChart, map[string]any{"image": map[string]any{"repository": "ghcr.io/x/y", "pullPolicy": "Sometimes"}}, "pullPolicy"},
		{"hub: extra arg not a flag", config.HubChart, map[string]any{"extraArgs": []any{"rm -rf"}}, "extraArgs"},
		{"agent: no spoke", config.AgentChart, map[string]any{"hub": map[string]any{"url": "https://hub.example.com"}}, "spoke is required"},
		{"agent: bad spoke name", config.AgentChart, agentValues(map[string]any{"spoke": "Staging_1"}), "spoke"},
		{"agent: no hub URL", config.AgentChart, map[string]any{"spoke": "s1"}, "hub.url is required"},
		{"agent: plain http hub", config.AgentChart, agentValues(map[string]any{"hub": map[string]any{"url": "http://hub.example.com"}}), "/hub/url"},
		{"agent: helm strategy without namespaces", config.AgentChart, agentValues(map[string]any{"helmStrategy": map[string]any{"enabled": true, "allowedChartSources": []any{"https://c"}}}), "helmStrategy.allowedNamespaces"},
		{"agent: helm strategy without sources", config.AgentChart, agentValues(map[string]any{"helmStrategy": map[string]any{"enabled": true, "allowedNamespaces": []any{"apps"}}}), "helmStrategy.allowedChartSources"},
		{"agent: bad chart source", config.AgentChart, agentValues(map[string]any{"helmStrategy": map[string]any{"allowedChartSources": []any{"ftp://x"}}}), "allowedChartSources"},
		{"agent: neither webhooks nor backfill", config.AgentChart, agentValues(map[string]any{"webhook": map[string]any{"enabled": false}, "backfill": map[string]any{"enabled": false}}), "webhook.enabled=false needs backfill.enabled"},
		{"agent: unknown certificate mode", config.AgentChart, agentValues(map[string]any{"webhook": map[string]any{"certificate": "vault"}}), "/webhook/certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := config.Render(tc.chart, "tugboat-system", tc.values)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
}

// TestHubChart_passesTheBootstrapAllowList: agentBootstrap.allowedValues
// becomes the hub's --bootstrap-allowed-values (null: the hub's default; an
// empty list: none), and the hub accepts it.
func TestHubChart_passesTheBootstrapAllowList(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   []string
	}{
		{"default", nil, spoke.DefaultAllowedValues()},
		{"none", map[string]any{"agentBootstrap": map[string]any{"allowedValues": []any{}}}, []string{}},
		{"an operator's list", map[string]any{"agentBootstrap": map[string]any{"allowedValues": []any{"replicas", "helmStrategy.enabled"}}}, []string{"replicas", "helmStrategy.enabled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := container(t, render(t, config.HubChart, "ops", tc.values), "Deployment/ops/tugboat-hub")
			opts := hub.NewOptions()
			fs := flagSet("hub")
			opts.BindFlags(fs)
			g.Expect(fs.Parse(c.Args[1:])).To(Succeed())
			g.Expect(opts.Validate()).To(Succeed())
			g.Expect(opts.BootstrapAllowedValues).To(Equal(tc.want))
		})
	}
}
