package e2e_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	notificationv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/e2e/fluxtest"
	"tugboat.dev/tugboat/e2e/harness"
)

// startHubAndFluxSpoke starts a hub control plane with tugboat's CRDs and a
// spoke control plane with Flux notification-controller's Provider and
// Alert CRDs, generated from the pinned api module (make generate).
func startHubAndFluxSpoke(t *testing.T) (hubCluster, spoke *harness.Cluster) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		hubCluster = startHubCluster(t)
	}()
	go func() {
		defer wg.Done()
		spoke = harness.StartT(t, harness.Options{Name: "flux-spoke", ControlPlaneOnly: true, CRDPaths: []string{"testdata/crds/notification-controller"}})
	}()
	wg.Wait()
	if hubCluster == nil || spoke == nil {
		t.FailNow()
	}
	return hubCluster, spoke
}

// TestSpokeCLI_addFluxSetsUpAnAgentlessSpokeThatReports runs `tugboat spoke
// add --flux` against a real hub and a spoke API server serving
// notification.toolkit.fluxcd.io/v1beta3: the API server accepts the
// Secret, Provider and Alert, and an event in that Provider's exact format
// (the notification-controller capture, signed with the key written to the
// spoke) reaches the spoke's ReleaseHistory on the hub.
func TestSpokeCLI_addFluxSetsUpAnAgentlessSpokeThatReports(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hubCluster, spokeCluster := startHubAndFluxSpoke(t)
	// The hub's key cache at its default (5m): a new key is known from its
	// first request, a removed one refused once the Spoke is annotated.
	f := newFleet(t, hubCluster)
	f.waitReceiverReady(g)
	hubKC, spokeKC := hubCluster.KubeconfigPath, spokeCluster.KubeconfigPath
	const name = "edge-1"
	g.Expect(spokeCluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-system"}})).To(Succeed())

	args := []string{"spoke", "add", name, "-n", f.ns, "--kubeconfig", hubKC, "--flux", "--hub-url", f.url(""),
		"--spoke-kubeconfig", spokeKC, "--helmrelease-namespaces", "default,apps"}
	out, err := tugboatCLI(args...)
	g.Expect(err).NotTo(HaveOccurred(), out)
	for _, applied := range []string{"Secret flux-system/tugboat-flux-key", "Provider flux-system/tugboat", "Alert flux-system/tugboat-helmreleases"} {
		g.Expect(out).To(ContainSubstring("  "+applied+" applied\n"), out)
	}

	// The hub holds a Flux key of its own, which is the Provider's token.
	hubSecret := &corev1.Secret{}
	g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name + "-key"}, hubSecret)).To(Succeed())
	fluxKey := hubSecret.Data[tugboatv1alpha1.SpokeFluxKeySecretKey]
	g.Expect(len(fluxKey)).To(BeNumerically(">=", 32))
	g.Expect(fluxKey).NotTo(Equal(hubSecret.Data[tugboatv1alpha1.SpokeKeySecretKey]))
	g.Expect(out).NotTo(ContainSubstring(string(fluxKey)), "the key is not printed when applied")

	// What the spoke's API server holds.
	s := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	g.Expect(notificationv1beta3.AddToScheme(s)).To(Succeed())
	spoke, err := client.New(spokeCluster.RESTConfig, client.Options{Scheme: s})
	g.Expect(err).NotTo(HaveOccurred())
	token := &corev1.Secret{}
	g.Expect(spoke.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: "tugboat-flux-key"}, token)).To(Succeed())
	g.Expect(token.Data["token"]).To(Equal(fluxKey))
	provider := &notificationv1beta3.Provider{}
	g.Expect(spoke.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: "tugboat"}, provider)).To(Succeed())
	g.Expect(provider.Spec.Type).To(Equal("generic-hmac"))
	g.Expect(provider.Spec.Address).To(Equal(f.url("/v1/flux/" + name)))
	g.Expect(provider.Spec.SecretRef.Name).To(Equal("tugboat-flux-key"))
	alert := &notificationv1beta3.Alert{}
	g.Expect(spoke.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: "tugboat-helmreleases"}, alert)).To(Succeed())
	g.Expect(alert.Spec.ProviderRef.Name).To(Equal("tugboat"))
	g.Expect(alert.Spec.EventSeverity).To(Equal("info"))
	g.Expect(alert.Spec.EventMetadata).To(Equal(map[string]string{"cluster": name}))
	g.Expect(alert.Spec.EventSources).To(Equal([]notificationv1.CrossNamespaceObjectReference{
		{Kind: "HelmRelease", Name: "*", Namespace: "default"}, {Kind: "HelmRelease", Name: "*", Namespace: "apps"}}))

	// Agentless and silent so far: the hub says so.
	ready := func(g Gomega) metav1.Condition {
		sp := spokeNamed(g, hubCluster, f.ns, name)
		c := apimeta.FindStatusCondition(sp.Status.Conditions, "Ready")
		g.Expect(c).NotTo(BeNil())
		return *c
	}
	g.Eventually(ready).WithTimeout(20 * time.Second).Should(And(
		HaveField("Status", metav1.ConditionUnknown), HaveField("Reason", "NoEventSinceSetup"),
		HaveField("Message", ContainSubstring("no Flux event received since setup at "))))
	g.Expect(spokeNamed(g, hubCluster, f.ns, name).Status.LastFluxEvent).To(BeNil())

	// The capture, as notification-controller posts it through this
	// Provider: to its address, signed with its Secret's token.
	captures := fluxtest.ReadCapture(t, fluxtest.UpgradeSucceeded)
	g.Expect(captures).To(HaveLen(1))
	captured := captures[0].Body(t)
	const capturedTS = `"timestamp":"2026-11-22T00:11:39Z"`
	g.Expect(bytes.Count(captured, []byte(capturedTS))).To(Equal(1))
	body := bytes.Replace(captured, []byte(capturedTS), []byte(`"timestamp":"`+time.Now().UTC().Format(time.RFC3339)+`"`), 1)
	post := func(key []byte) reply {
		req, err := http.NewRequest(http.MethodPost, provider.Spec.Address, bytes.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		for _, h := range []string{"Content-Type", "Gotk-Component", "User-Agent"} {
			req.Header.Set(h, captures[0].Headers[h])
		}
		req.Header.Set("X-Signature", fluxtest.Sign(key, body))
		return f.do(req)
	}
	g.Expect(post(hubSecret.Data[tugboatv1alpha1.SpokeKeySecretKey]).code).To(Equal(http.StatusUnauthorized), "the agent's key is not the Flux key")
	r := post(token.Data["token"])
	g.Expect(r.code).To(Equal(http.StatusAccepted), "%s", r.body)
	g.Eventually(f.current(name, "default", "demo")).WithTimeout(20 * time.Second).
		Should(Equal(current{3, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

	// The hub heard from the spoke: Ready, with the last event.
	g.Eventually(ready).WithTimeout(20 * time.Second).Should(And(
		HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "FluxEventReceived"),
		HaveField("Message", ContainSubstring(": UpgradeSucceeded of HelmRelease/default/demo"))))
	last := spokeNamed(g, hubCluster, f.ns, name).Status.LastFluxEvent
	g.Expect(last).NotTo(BeNil())
	g.Expect(last.Reason).To(Equal("UpgradeSucceeded"))
	g.Expect(last.ReceivedAt.Time).To(BeTemporally("~", time.Now(), 30*time.Second))
	out, err = tugboatCLI("spoke", "list", "-n", f.ns, "--kubeconfig", hubKC)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(last.ReceivedAt.UTC().Format(time.RFC3339) + " (flux)"))

	// Again: the same key, nothing changes on the spoke.
	before := token.ResourceVersion
	out, err = tugboatCLI(args...)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("holds the spoke's Flux key already: keeping it"))
	g.Expect(spoke.Get(ctx, client.ObjectKeyFromObject(token), token)).To(Succeed())
	g.Expect(token.ResourceVersion).To(Equal(before))

	// Through a Cluster API Cluster's kubeconfig on the hub instead of a
	// kubeconfig of the user's (issue 15 §2): the same objects reach the
	// spoke, for another Spoke.
	t.Run("throughAClusterAPIKubeconfig", func(t *testing.T) {
		g := NewWithT(t)
		kubeconfig, err := os.ReadFile(spokeKC)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(hubCluster.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "edge-capi-kubeconfig"},
			Data: map[string][]byte{"value": kubeconfig}})).To(Succeed())
		g.Expect(spokeCluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-capi"}})).To(Succeed())
		out, err := tugboatCLI("spoke", "add", "edge-2", "-n", f.ns, "--kubeconfig", hubKC, "--flux", "--hub-url", f.url(""),
			"--cluster", "edge-capi", "--flux-namespace", "flux-capi")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("  Provider flux-capi/tugboat applied\n"), out)
		p := &notificationv1beta3.Provider{}
		g.Expect(spoke.Get(ctx, client.ObjectKey{Namespace: "flux-capi", Name: "tugboat"}, p)).To(Succeed())
		g.Expect(p.Spec.Address).To(Equal(f.url("/v1/flux/edge-2")))

		_, err = tugboatCLI("spoke", "add", "edge-3", "-n", f.ns, "--kubeconfig", hubKC, "--flux", "--hub-url", f.url(""),
			"--cluster", "no-such-cluster", "--flux-namespace", "flux-capi")
		g.Expect(err).To(MatchError(And(ContainSubstring("reaching Cluster "+f.ns+"/no-such-cluster"),
			ContainSubstring("Secret "+f.ns+"/no-such-cluster-kubeconfig not found"))))
	})

	t.Run("rotateKeyFluxRefusesNoEvent", func(t *testing.T) {
		g := NewWithT(t)
		oldKey := append([]byte(nil), fluxKey...)
		// A stand-in for notification-controller: an event every 50ms, each
		// signed with the token of the Provider's Secret as it is then (the
		// controller reads the Secret for every event).
		type result struct{ code int }
		results := make(chan result, 10_000)
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				sec := &corev1.Secret{}
				if err := spoke.Get(ctx, client.ObjectKeyFromObject(token), sec); err != nil {
					results <- result{-1}
					continue
				}
				ev := bytes.Replace(captured, []byte(capturedTS), []byte(`"timestamp":"`+time.Now().UTC().Format(time.RFC3339)+`"`), 1)
				req, _ := http.NewRequest(http.MethodPost, provider.Spec.Address, bytes.NewReader(ev))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Signature", fluxtest.Sign(sec.Data["token"], ev))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					results <- result{-2}
					continue
				}
				_ = resp.Body.Close()
				results <- result{resp.StatusCode}
			}
		}()
		out, err := tugboatCLI("spoke", "rotate-key", name, "--flux", "-n", f.ns, "--kubeconfig", hubKC, "--spoke-kubeconfig", spokeKC,
			"--timeout", "1m")
		close(stop)
		<-done
		close(results)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("1/3 The hub accepts the current and a new Flux notification-controller key"))
		g.Expect(out).To(ContainSubstring("2/3 The new key is in Secret flux-system/tugboat-flux-key on the spoke"))
		g.Expect(out).To(ContainSubstring("3/3 The Flux notification-controller signs with the new key"))
		codes := map[int]int{}
		for r := range results {
			codes[r.code]++
		}
		g.Expect(codes).To(HaveLen(1), "every event accepted: %v", codes)
		// The rotation no longer waits for the hub's key cache: it lasts
		// about half a second (the CLI's polling), a handful of events.
		g.Expect(codes[http.StatusAccepted]).To(BeNumerically(">=", 3), "%v", codes)

		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(hubSecret), hubSecret)).To(Succeed())
		newKey := hubSecret.Data[tugboatv1alpha1.SpokeFluxKeySecretKey]
		g.Expect(newKey).NotTo(Equal(oldKey))
		g.Expect(hubSecret.Data).NotTo(HaveKey(tugboatv1alpha1.SpokePreviousFluxKeySecretKey))
		g.Expect(hubSecret.Data[tugboatv1alpha1.SpokeKeySecretKey]).NotTo(Equal(newKey))
		g.Expect(spoke.Get(ctx, client.ObjectKeyFromObject(token), token)).To(Succeed())
		g.Expect(token.Data["token"]).To(Equal(newKey))
		g.Expect(spokeNamed(g, hubCluster, f.ns, name).Status.LastFluxEvent.KeyID).To(Equal(wire.KeyID(newKey)))
		g.Expect(out).NotTo(ContainSubstring(string(newKey)))
		// The old key is refused now.
		g.Eventually(func() int { return post(oldKey).code }).WithTimeout(10 * time.Second).Should(Equal(http.StatusUnauthorized))
		fluxKey = newKey
	})

	// -o yaml prints the same objects for a GitOps commit, and the spoke's
	// API server accepts them as they are.
	out, err = tugboatCLI("spoke", "add", name, "-n", f.ns, "--kubeconfig", hubKC, "--flux", "--hub-url", f.url(""), "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred(), out)
	start := strings.Index(out, "apiVersion: v1\n")
	g.Expect(start).To(BeNumerically(">=", 0), out)
	g.Expect(spoke.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}})).To(Succeed())
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out[start:]), 4096)
	var kinds []string
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		kinds = append(kinds, u.GetAPIVersion()+" "+u.GetKind())
		u.SetNamespace("apps") // a namespace without them, so they are created
		g.Expect(spoke.Create(ctx, u, client.DryRunAll)).To(Succeed(), "%s %s", u.GetKind(), u.GetName())
	}
	g.Expect(kinds).To(Equal([]string{"v1 Secret", "notification.toolkit.fluxcd.io/v1beta3 Provider", "notification.toolkit.fluxcd.io/v1beta3 Alert"}))
	g.Expect(out).To(ContainSubstring("token: " + string(fluxKey)))
	// A Flux key equal to the agent's previous key is one the hub refuses
	// (issue 23 Low 9): `spoke add --flux` replaces it, as it does one equal
	// to the current key.
	t.Run("aFluxKeyEqualToAnAgentKeyIsReplaced", func(t *testing.T) {
		g := NewWithT(t)
		const name = "edge-prev"
		current := []byte("edge-prev-current-agent-key-0123456789abcdef")
		previous := []byte("edge-prev-previous-agent-key-0123456789abcde")
		g.Expect(hubCluster.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name + "-key"}, Data: map[string][]byte{
			tugboatv1alpha1.SpokeKeySecretKey: current, tugboatv1alpha1.SpokePreviousKeySecretKey: previous, tugboatv1alpha1.SpokeFluxKeySecretKey: previous,
		}})).To(Succeed())
		g.Expect(hubCluster.Client.Create(ctx, &tugboatv1alpha1.Spoke{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}},
		})).To(Succeed())
		g.Expect(spokeCluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-prev"}})).To(Succeed())
		out, err := tugboatCLI("spoke", "add", name, "-n", f.ns, "--kubeconfig", hubKC, "--flux", "--hub-url", f.url(""),
			"--spoke-kubeconfig", spokeKC, "--flux-namespace", "flux-prev")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("The hub holds a new Flux key for the spoke"))
		secret := &corev1.Secret{}
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name + "-key"}, secret)).To(Succeed())
		g.Expect(secret.Data[tugboatv1alpha1.SpokeFluxKeySecretKey]).NotTo(Or(Equal(previous), Equal(current)))
		g.Expect(len(secret.Data[tugboatv1alpha1.SpokeFluxKeySecretKey])).To(BeNumerically(">=", 32))
	})
}
