package spokeaccess_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/egress"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/controllers/promotion/strategy/spokeaccess"
	"tugboat.dev/tugboat/e2e/harness"
)

// cluster is a real API server that stores the kubeconfig Secrets (as the
// hub) and is reached through them (as the spoke).
var cluster *harness.Cluster

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	cluster, err = harness.Start(context.Background(), harness.Options{Name: "hub", ControlPlaneOnly: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "cluster logs: %s\n", cluster.LogDir)
		_ = cluster.StopKeepLogs()
		return code
	}
	_ = cluster.Stop()
	return code
}

func newNamespace(g Gomega) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "spokeaccess-"}}
	g.Expect(cluster.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

func kubeconfig(g Gomega) []byte {
	data, err := os.ReadFile(cluster.KubeconfigPath)
	g.Expect(err).NotTo(HaveOccurred())
	return data
}

func secret(g Gomega, ns, name string, data map[string][]byte) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	g.Expect(cluster.Client.Create(context.Background(), s)).To(Succeed())
	return s
}

func spoke(ns string, spec tugboatv1alpha1.SpokeSpec) *tugboatv1alpha1.Spoke {
	return &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}, Spec: spec}
}

// reaches checks cfg works by reading the default namespace.
func reaches(g Gomega, cfg *rest.Config) {
	c, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Get(context.Background(), types.NamespacedName{Name: "default"}, &corev1.Namespace{})).To(Succeed())
}

func TestRESTConfig_fromKubeConfigSecretRef(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(g)
	secret(g, ns, "kc", map[string][]byte{"value": kubeconfig(g)})
	secret(g, ns, "kc-custom", map[string][]byte{"config": kubeconfig(g)})

	cfg, err := spokeaccess.RESTConfig(ctx, cluster.Client, spoke(ns, tugboatv1alpha1.SpokeSpec{
		KubeConfigSecretRef: &tugboatv1alpha1.SecretKeyReference{Name: "kc"},
	}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.UserAgent).To(Equal(spokeaccess.UserAgent))
	g.Expect(cfg.Timeout).To(Equal(spokeaccess.Timeout))
	reaches(g, cfg)

	cfg, err = spokeaccess.RESTConfig(ctx, cluster.Client, spoke(ns, tugboatv1alpha1.SpokeSpec{
		KubeConfigSecretRef: &tugboatv1alpha1.SecretKeyReference{Name: "kc-custom", Key: "config"},
	}))
	g.Expect(err).NotTo(HaveOccurred())
	reaches(g, cfg)
}

func TestRESTConfig_fromClusterAPISecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(g)
	capi := newNamespace(g)
	secret(g, ns, "local-kubeconfig", map[string][]byte{"value": kubeconfig(g)})
	secret(g, capi, "remote-kubeconfig", map[string][]byte{"value": kubeconfig(g)})

	// The Cluster's namespace defaults to the Spoke's.
	cfg, err := spokeaccess.RESTConfig(ctx, cluster.Client, spoke(ns, tugboatv1alpha1.SpokeSpec{
		ClusterRef: &tugboatv1alpha1.ObjectReference{Name: "local"},
	}))
	g.Expect(err).NotTo(HaveOccurred())
	reaches(g, cfg)

	// Its own namespace, spelled out, is the same.
	cfg, err = spokeaccess.RESTConfig(ctx, cluster.Client, spoke(ns, tugboatv1alpha1.SpokeSpec{
		ClusterRef: &tugboatv1alpha1.ObjectReference{Namespace: ns, Name: "local"},
	}))
	g.Expect(err).NotTo(HaveOccurred())
	reaches(g, cfg)

	// Issue 12, High 1: another namespace's Cluster (another tenant's) is
	// refused, terminally, without reading its Secret, although it exists
	// and the hub could read it.
	cfg, err = spokeaccess.RESTConfig(ctx, cluster.Client, spoke(ns, tugboatv1alpha1.SpokeSpec{
		ClusterRef: &tugboatv1alpha1.ObjectReference{Namespace: capi, Name: "remote"},
	}))
	g.Expect(cfg).To(BeNil())
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring(`spec.clusterRef names a Cluster in namespace "` + capi + `"; a Spoke only reaches clusters in its own namespace`)))
	_, err = spokeaccess.NewCache(nil).Client(ctx, cluster.Client, spoke(ns, tugboatv1alpha1.SpokeSpec{
		ClusterRef: &tugboatv1alpha1.ObjectReference{Namespace: capi, Name: "remote"},
	}))
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
}

func TestRESTConfig_errors(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(g)
	secret(g, ns, "wrong-key", map[string][]byte{"kubeconfig": kubeconfig(g)})
	secret(g, ns, "garbage", map[string][]byte{"value": []byte("token: s3cr3t-garbage\n\t:::")})

	_, err := spokeaccess.RESTConfig(ctx, cluster.Client, spoke(ns, tugboatv1alpha1.SpokeSpec{}))
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring("or use the helm strategy which needs no hub credentials")))

	_, err = spokeaccess.RESTConfig(ctx, cluster.Client, spoke(ns, tugboatv1alpha1.SpokeSpec{
		ClusterRef: &tugboatv1alpha1.ObjectReference{Name: "not-yet"},
	}))
	g.Expect(err).To(MatchError(ContainSubstring("Secret " + ns + "/not-yet-kubeconfig not found")))
	g.Expect(strategy.IsTerminal(err)).To(BeFalse(), "Cluster API creates the Secret once the cluster is up")

	_, err = spokeaccess.RESTConfig(ctx, cluster.Client, spoke(ns, tugboatv1alpha1.SpokeSpec{
		KubeConfigSecretRef: &tugboatv1alpha1.SecretKeyReference{Name: "wrong-key"},
	}))
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring(`Secret ` + ns + `/wrong-key key "value" is missing`)))

	_, err = spokeaccess.RESTConfig(ctx, cluster.Client, spoke(ns, tugboatv1alpha1.SpokeSpec{
		KubeConfigSecretRef: &tugboatv1alpha1.SecretKeyReference{Name: "garbage"},
	}))
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("cannot be parsed"))
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3t"))
}

// TestRESTConfig_refusesWhatIsNotSelfContained: exec plugins, auth
// providers and file references would act on the hub's own machine.
func TestRESTConfig_refusesWhatIsNotSelfContained(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(g)
	for name, mutate := range map[string]func(*clientcmdapi.AuthInfo, *clientcmdapi.Cluster){
		"exec": func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) {
			u.Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		},
		"token-file": func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) {
			u.TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
		},
		"cert-file": func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) { u.ClientCertificate = "/etc/hub/tls.crt" },
		"ca-file":   func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) { c.CertificateAuthority = "/etc/ssl/ca.crt" },
		"auth-provider": func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) {
			u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
		},
		// A proxy would dial on the hub's behalf, past its egress policy
		// (security review 3, medium 9).
		"proxy-url": func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) { c.ProxyURL = "http://169.254.169.254:80" },
	} {
		raw, err := clientcmd.Load(kubeconfig(g))
		g.Expect(err).NotTo(HaveOccurred())
		kctx := raw.Contexts[raw.CurrentContext]
		mutate(raw.AuthInfos[kctx.AuthInfo], raw.Clusters[kctx.Cluster])
		data, err := clientcmd.Write(*raw)
		g.Expect(err).NotTo(HaveOccurred())
		secret(g, ns, name, map[string][]byte{"value": data})

		_, err = spokeaccess.RESTConfig(ctx, cluster.Client, spoke(ns, tugboatv1alpha1.SpokeSpec{
			KubeConfigSecretRef: &tugboatv1alpha1.SecretKeyReference{Name: name},
		}))
		g.Expect(strategy.IsTerminal(err)).To(BeTrue(), name)
		g.Expect(err).To(MatchError(ContainSubstring("in Secret "+ns+"/"+name)), name)
	}
}

func TestCache_reusesClientUntilSecretChanges(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(g)
	s := secret(g, ns, "kc", map[string][]byte{"value": kubeconfig(g)})
	sp := spoke(ns, tugboatv1alpha1.SpokeSpec{KubeConfigSecretRef: &tugboatv1alpha1.SecretKeyReference{Name: "kc"}})
	built := 0
	cache := spokeaccess.NewCache(func(cfg *rest.Config) (client.Client, error) {
		built++
		return client.New(cfg, client.Options{})
	}).WithEgress(egress.Policy{AllowLoopback: true})

	c1, err := cache.Client(ctx, cluster.Client, sp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c1.Get(ctx, types.NamespacedName{Name: "default"}, &corev1.Namespace{})).To(Succeed())
	c2, err := cache.Client(ctx, cluster.Client, sp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c2).To(BeIdenticalTo(c1))
	g.Expect(built).To(Equal(1))

	// A rotated kubeconfig (new resourceVersion) gives a new client.
	s.Labels = map[string]string{"rotated": "yes"}
	g.Expect(cluster.Client.Update(ctx, s)).To(Succeed())
	c3, err := cache.Client(ctx, cluster.Client, sp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c3).NotTo(BeIdenticalTo(c1))
	g.Expect(built).To(Equal(2))

	// A broken kubeconfig is reported, not hidden by the cached client.
	s.Data = map[string][]byte{"other": []byte("x")}
	g.Expect(cluster.Client.Update(ctx, s)).To(Succeed())
	_, err = cache.Client(ctx, cluster.Client, sp)
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())

	cache.Forget(types.NamespacedName{Namespace: ns, Name: "edge"})
}

// TestCache_clientsObeyTheEgressPolicy: a kubeconfig's server: is written by
// whoever can write the Secret; the clients of a Cache dial through the
// hub's egress policy, so one that points at loopback (the hub's own node)
// is refused by default and reached only where the policy allows loopback
// (security review 3, medium 9: kubeconfig connections went anywhere).
func TestCache_clientsObeyTheEgressPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(g)
	secret(g, ns, "kc", map[string][]byte{"value": kubeconfig(g)})
	sp := spoke(ns, tugboatv1alpha1.SpokeSpec{KubeConfigSecretRef: &tugboatv1alpha1.SecretKeyReference{Name: "kc"}})

	strict, err := spokeaccess.NewCache(nil).Client(ctx, cluster.Client, sp)
	g.Expect(err).NotTo(HaveOccurred())
	err = strict.Get(ctx, types.NamespacedName{Name: "default"}, &corev1.Namespace{})
	g.Expect(err).To(MatchError(ContainSubstring("is a loopback address")))

	allowed, err := spokeaccess.NewCache(nil).WithEgress(egress.Policy{AllowLoopback: true}).Client(ctx, cluster.Client, sp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(allowed.Get(ctx, types.NamespacedName{Name: "default"}, &corev1.Namespace{})).To(Succeed())

	// A rest.Config guarded the same way (the agent bootstrap's).
	cfg, err := spokeaccess.RESTConfig(ctx, cluster.Client, sp)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(spokeaccess.Guard(cfg, egress.Policy{}), client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Get(ctx, types.NamespacedName{Name: "default"}, &corev1.Namespace{})).To(MatchError(ContainSubstring("is a loopback address")))
}
