package e2e_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// TestHub_squatterDoesNotBlockTheRealSpoke is issue 12 Medium 6 on the real
// hub: a Spoke of the same name in another namespace (with its own
// generated key) neither blocks the real spoke nor receives its data; each
// is recorded into its own namespace.
func TestHub_squatterDoesNotBlockTheRealSpoke(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFleet(t, startHubCluster(t))
	const spoke, squatterNS = "edge-1", "squatter"
	key := f.registerSpoke(spoke)
	g.Expect(f.hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: squatterNS}})).To(Succeed())
	// Both tenants' namespaces are served by the hub.
	installHubChart(t, f.hub, f.ns, squatterNS)
	g.Expect(f.hub.Client.Create(ctx, &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: squatterNS, Name: spoke},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: spoke + "-key"}},
	})).To(Succeed())
	var secret corev1.Secret
	g.Eventually(func() error {
		return f.hub.Client.Get(ctx, client.ObjectKey{Namespace: squatterNS, Name: spoke + "-key"}, &secret)
	}).WithTimeout(20 * time.Second).Should(Succeed())
	squatterKey := secret.Data[tugboatv1alpha1.SpokeKeySecretKey]
	f.waitReceiverReady(g)

	post := func(key []byte, release string) func() int {
		return func() int {
			snap := wire.StateSnapshot{
				Spoke: spoke, AgentVersion: "v0.1.0-e2e", KubernetesVersion: "v1.36.3", TakenAt: time.Now().UTC(),
				Releases: []wire.ReleaseState{*releaseState("apps", release, "1.0.0", 1, wire.StatusDeployed, wire.HealthCurrent)},
			}
			return f.do(f.signedPost(wire.StatePath(spoke), key, mustJSON(t, snap), time.Now())).code
		}
	}
	// Both Spokes exist; the real one is served (not 401, not 503).
	g.Eventually(post(key, "web")).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Equal(http.StatusAccepted))
	g.Expect(post(squatterKey, "evil")()).To(Equal(http.StatusAccepted))

	history := func(ns, release string) func() error {
		return func() error {
			return f.hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName(spoke, "apps", release)}, &tugboatv1alpha1.ReleaseHistory{})
		}
	}
	g.Eventually(history(f.ns, "web")).WithTimeout(10 * time.Second).Should(Succeed())
	g.Eventually(history(squatterNS, "evil")).WithTimeout(10 * time.Second).Should(Succeed())
	g.Expect(history(f.ns, "evil")()).NotTo(Succeed(), "the squatter's release is not the real spoke's")
	g.Expect(history(squatterNS, "web")()).NotTo(Succeed(), "the real spoke's release is not the squatter's")

	var real tugboatv1alpha1.Spoke
	g.Expect(f.hub.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: spoke}, &real)).To(Succeed())
	g.Expect(real.Status.LastSnapshotTakenAt).NotTo(BeNil(), "the real Spoke records its last snapshot")
}

// TestHub_spokeKeysShorterThan32BytesAreAConfigurationError: a Spoke whose
// Secret holds a key the receiver would refuse (shorter than 32 bytes, or a
// Flux key equal to the agent's) is Stalled with a message that says which
// key and why, and its requests are refused.
func TestHub_spokeKeysShorterThan32BytesAreAConfigurationError(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFleet(t, startHubCluster(t))
	f.waitReceiverReady(g)
	long := []byte("0123456789abcdef0123456789abcdef0123")
	for name, tc := range map[string]struct {
		data map[string][]byte
		want string
	}{
		"short-agent": {map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: []byte("only-twenty-bytes-xx")},
			`key "key" holds 20 bytes; the hub needs at least 32`},
		"short-flux": {map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: long, tugboatv1alpha1.SpokeFluxKeySecretKey: []byte("sekrit")},
			`key "fluxKey" holds 6 bytes; the hub needs at least 32`},
		"same-flux": {map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: long, tugboatv1alpha1.SpokeFluxKeySecretKey: long},
			`key "fluxKey" must differ from "key"`},
	} {
		g.Expect(f.hub.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name + "-key"}, Data: tc.data})).To(Succeed())
		g.Expect(f.hub.Client.Create(ctx, &tugboatv1alpha1.Spoke{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}},
		})).To(Succeed())
		g.Eventually(func() string {
			var sp tugboatv1alpha1.Spoke
			if err := f.hub.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &sp); err != nil {
				return err.Error()
			}
			c := apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.StalledCondition.String())
			if c == nil || c.Status != metav1.ConditionTrue {
				return "not stalled"
			}
			return c.Reason + ": " + c.Message
		}).WithTimeout(20*time.Second).Should(HavePrefix("InvalidSpec: secret "+name+"-key: "+tc.want), name)
	}
	snap := wire.StateSnapshot{Spoke: "short-agent", AgentVersion: "v0.1.0-e2e", TakenAt: time.Now().UTC(), Releases: []wire.ReleaseState{}}
	g.Expect(f.do(f.signedPost(wire.StatePath("short-agent"), []byte("only-twenty-bytes-xx"), mustJSON(t, snap), time.Now())).code).
		To(Equal(http.StatusUnauthorized))
}
