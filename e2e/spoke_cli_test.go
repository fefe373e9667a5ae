package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/cmd/tugboat/app"
	"tugboat.dev/tugboat/e2e/harness"
)

// tugboatCLI runs the tugboat CLI in-process and returns what it printed.
func tugboatCLI(args ...string) (string, error) {
	cmd := app.NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// startFullHubAndSpoke starts a hub cluster with a kube-controller-manager
// (its garbage collector deletes what a removed Spoke owns) and one spoke
// cluster.
func startFullHubAndSpoke(t *testing.T) (hubCluster, spoke *harness.Cluster) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		hubCluster = harness.StartT(t, harness.Options{Name: "hub", TugboatCRDs: true})
	}()
	go func() {
		defer wg.Done()
		spoke = harness.StartT(t, harness.Options{Name: "spoke-1"})
	}()
	wg.Wait()
	if hubCluster == nil || spoke == nil {
		t.FailNow()
	}
	return hubCluster, spoke
}

// TestSpokeCLI_rotateKeyRefusesNoRequestAndRemoveDeletesHistories runs the
// spoke verbs against a real hub (in-process, on a hub cluster) and a real
// agent on a spoke cluster that reads its key from a Secret there, mounted
// as the kubelet would.
func TestSpokeCLI_rotateKeyRefusesNoRequestAndRemoveDeletesHistories(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hubCluster, spokeCluster := startFullHubAndSpoke(t)
	// The hub's key cache at its default (5m): a new key is known from its
	// first request, a removed one refused once the Spoke is annotated.
	f := newFleet(t, hubCluster)
	f.waitReceiverReady(g)
	hubKC, spokeKC := hubCluster.KubeconfigPath, spokeCluster.KubeconfigPath
	const name = "rotating"

	out, err := tugboatCLI("spoke", "add", name, "-n", f.ns, "--kubeconfig", hubKC, "--hub-url", f.url(""))
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("tugboat install agent --spoke " + name + " -n " + f.ns + " --hub-url " + f.url("")))

	// What `tugboat install agent` does with the key: Secret
	// tugboat-system/tugboat-agent-hub-key on the spoke, mounted into the
	// agent's Pod.
	hubSecret := &corev1.Secret{}
	g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name + "-key"}, hubSecret)).To(Succeed())
	oldKey := hubSecret.Data[tugboatv1alpha1.SpokeKeySecretKey]
	err = spokeCluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tugboat-system"}})
	g.Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
	g.Expect(spokeCluster.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tugboat-system", Name: "tugboat-agent-hub-key"},
		Data:       map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: oldKey},
	})).To(Succeed())
	mounted := t.TempDir()
	mountSecret(t, spokeCluster, client.ObjectKey{Namespace: "tugboat-system", Name: "tugboat-agent-hub-key"}, mounted)
	keyFile := filepath.Join(mounted, tugboatv1alpha1.SpokeKeySecretKey)
	g.Eventually(func() error { _, err := os.Stat(keyFile); return err }).WithTimeout(10 * time.Second).Should(Succeed())
	f.startAgent(name, spokeCluster, keyFile, testr.NewWithOptions(t, testr.Options{Verbosity: 0}))

	spoke := func(g Gomega) *tugboatv1alpha1.Spoke {
		sp := &tugboatv1alpha1.Spoke{}
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, sp)).To(Succeed())
		return sp
	}
	signingKey := func(g Gomega) string { return spoke(g).Status.SigningKeyID }
	g.Eventually(signingKey).WithTimeout(30*time.Second).Should(Equal(wire.KeyID(oldKey)), "heartbeats signed with the installed key")

	// Every request the agent made, and those the hub refused as not
	// authenticated (401). Other failures (a timeout, a 503 on a loaded
	// machine) are retried and are not what a rotation can cause.
	requests := func(g Gomega) (all, refused float64) {
		for _, m := range []string{"tugboat_agent_reporter_state_posts_total", "tugboat_agent_reporter_batches_total"} {
			all += counterValue(g, m, map[string]string{"spoke": name})
			refused += counterValue(g, m, map[string]string{"spoke": name, "code": "401"})
		}
		return all, refused
	}
	before, _ := requests(g)

	t.Run("rotateKey", func(t *testing.T) {
		g := NewWithT(t)
		out, err := tugboatCLI("spoke", "rotate-key", name, "-n", f.ns, "--kubeconfig", hubKC, "--spoke-kubeconfig", spokeKC,
			"--timeout", "1m")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("1/3 The hub accepts the current and a new agent key"))
		g.Expect(out).NotTo(ContainSubstring("key cache"), "nothing waits for the hub's key cache")
		g.Expect(out).To(ContainSubstring("2/3 The new key is in Secret tugboat-system/tugboat-agent-hub-key on the spoke"))
		g.Expect(out).To(ContainSubstring("3/3 The agent signs with the new key; the previous key is removed"))

		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(hubSecret), hubSecret)).To(Succeed())
		newKey := hubSecret.Data[tugboatv1alpha1.SpokeKeySecretKey]
		g.Expect(newKey).NotTo(Equal(oldKey))
		g.Expect(len(newKey)).To(BeNumerically(">=", wire.MinSpokeKeySize))
		g.Expect(hubSecret.Data).NotTo(HaveKey(tugboatv1alpha1.SpokePreviousKeySecretKey))
		g.Expect(out).NotTo(ContainSubstring(string(newKey)), "the key is never printed")
		g.Expect(out).NotTo(ContainSubstring(string(oldKey)))
		g.Expect(signingKey(g)).To(Equal(wire.KeyID(newKey)))
		// kubectl events shows the rotation on the Spoke, by the keys'
		// fingerprints, never the keys (issue 29).
		g.Eventually(func(g Gomega) []string {
			var list eventsv1.EventList
			g.Expect(hubCluster.Client.List(ctx, &list, client.InNamespace(f.ns))).To(Succeed())
			var out []string
			for _, e := range list.Items {
				if e.Regarding.Kind == "Spoke" && e.Regarding.Name == name {
					g.Expect(e.Note).NotTo(ContainSubstring(string(newKey)))
					g.Expect(e.Note).NotTo(ContainSubstring(string(oldKey)))
					out = append(out, e.Reason+": "+e.Note)
				}
			}
			return out
		}).WithTimeout(20 * time.Second).Should(ContainElement(
			"SigningKeyChanged: the agent signs with key " + wire.KeyID(newKey) + " now, no longer with " + wire.KeyID(oldKey) + " (a key rotation)"))

		// The agent kept reporting throughout, and not one of its requests
		// was refused.
		all, refused := requests(g)
		g.Expect(all).To(BeNumerically(">", before), "the agent reported during the rotation")
		g.Expect(refused).To(BeZero(), "no request of the agent was refused")

		// After it: the agent goes on with the new key, the old key is
		// refused.
		rotated := time.Now()
		g.Eventually(func(g Gomega) time.Time { return spoke(g).Status.LastSeen.Time }).WithTimeout(20 * time.Second).
			Should(BeTemporally(">", rotated.Truncate(time.Second)))
		g.Eventually(func() int {
			return f.do(f.signedPost("/v1/spokes/"+name+"/events", oldKey, batchBody(t, name), time.Now())).code
		}).WithTimeout(10 * time.Second).Should(Equal(401))
		_, refused = requests(g)
		g.Expect(refused).To(BeZero(), "no request of the agent was refused")
	})

	t.Run("rotateKeyResumesARotationUnderWay", func(t *testing.T) {
		g := NewWithT(t)
		// Without the spoke's kubeconfig the CLI cannot deliver the key: it
		// says how, and gives up after --timeout with both keys valid.
		out, err := tugboatCLI("spoke", "rotate-key", name, "-n", f.ns, "--kubeconfig", hubKC, "--timeout", "2s")
		g.Expect(err).To(MatchError(ContainSubstring("the hub saw no heartbeat of spoke " + f.ns + "/" + name + " signed with the new key within 2s: both keys stay valid")))
		g.Expect(out).To(ContainSubstring("2/3 Copy the new key to Secret tugboat-system/tugboat-agent-hub-key (key \"key\") on the spoke"))
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(hubSecret), hubSecret)).To(Succeed())
		g.Expect(hubSecret.Data).To(HaveKey(tugboatv1alpha1.SpokePreviousKeySecretKey))
		pending := hubSecret.Data[tugboatv1alpha1.SpokeKeySecretKey]
		before, _ := requests(g)

		// Run again with it: the same rotation goes on and completes (-o
		// json: the result on stdout, the progress on stderr).
		cmd := app.NewRootCommand()
		var stdout, stderr bytes.Buffer
		cmd.SetOut(&stdout)
		cmd.SetErr(&stderr)
		cmd.SetArgs([]string{"spoke", "rotate-key", name, "-n", f.ns, "--kubeconfig", hubKC, "--spoke-kubeconfig", spokeKC, "--timeout", "1m", "-o", "json"})
		err = cmd.ExecuteContext(ctx)
		out = stderr.String()
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("A rotation of spoke " + f.ns + "/" + name + " is under way"))
		var rotation struct {
			Namespace, Name, KeySecret, Key, KeyID string
			Delivered                              bool
		}
		g.Expect(json.Unmarshal(stdout.Bytes(), &rotation)).To(Succeed(), stdout.String())
		g.Expect(rotation.Name).To(Equal(name))
		g.Expect(rotation.Key).To(Equal("key"))
		g.Expect(rotation.KeyID).NotTo(BeEmpty())
		g.Expect(rotation.Delivered).To(BeTrue())
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(hubSecret), hubSecret)).To(Succeed())
		g.Expect(hubSecret.Data[tugboatv1alpha1.SpokeKeySecretKey]).To(Equal(pending))
		g.Expect(rotation.KeyID).To(Equal(wire.KeyID(pending)), "the new key's id, never the key")
		g.Expect(stdout.String()).NotTo(ContainSubstring(string(pending)))
		g.Expect(hubSecret.Data).NotTo(HaveKey(tugboatv1alpha1.SpokePreviousKeySecretKey))
		all, refused := requests(g)
		g.Expect(all).To(BeNumerically(">", before))
		g.Expect(refused).To(BeZero(), "no request of the agent was refused")
	})

	t.Run("removeDeletesTheSpokeAndItsHistories", func(t *testing.T) {
		g := NewWithT(t)
		newHelm(t, spokeCluster, "apps").install("web", "1.0.0")
		g.Eventually(f.current(name, "apps", "web")).WithTimeout(hubWait).WithPolling(poll).
			Should(Equal(current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

		out, err := tugboatCLI("spoke", "remove", name, "-n", f.ns, "--kubeconfig", hubKC)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("Spoke " + f.ns + "/" + name + " deleted. Its 1 ReleaseHistory and key Secret " + name + "-key"))
		g.Eventually(func() error {
			rh := &tugboatv1alpha1.ReleaseHistory{}
			err := hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: tugboatv1alpha1.ReleaseHistoryName(name, "apps", "web")}, rh)
			if apierrors.IsNotFound(err) {
				return nil
			}
			spErr := hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &tugboatv1alpha1.Spoke{})
			return fmt.Errorf("ReleaseHistory still there (get: %w; owners %+v; finalizers %v; deleting %v); the Spoke: %w", err, rh.OwnerReferences, rh.Finalizers, rh.DeletionTimestamp, spErr)
			// The garbage collector learns of new kinds on its discovery
			// resync (every 30 s), so its first deletion of a tugboat kind
			// can take that long, and more on a loaded machine.
		}).WithTimeout(90*time.Second).Should(Succeed(), "the garbage collector deletes its ReleaseHistories")
		g.Eventually(func() bool {
			return apierrors.IsNotFound(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(hubSecret), &corev1.Secret{}))
		}).WithTimeout(30*time.Second).Should(BeTrue(), "and its generated key Secret")

		_, err = tugboatCLI("spoke", "remove", name, "-n", f.ns, "--kubeconfig", hubKC)
		g.Expect(err).To(MatchError(ContainSubstring("spoke " + f.ns + "/" + name + " not found")))
	})

	t.Run("removeKeepHistoryOrphansThem", func(t *testing.T) {
		g := NewWithT(t)
		const kept = "kept"
		_, err := tugboatCLI("spoke", "add", kept, "-n", f.ns, "--kubeconfig", hubKC)
		g.Expect(err).NotTo(HaveOccurred())
		sp := spokeNamed(g, hubCluster, f.ns, kept)
		rh := &tugboatv1alpha1.ReleaseHistory{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: tugboatv1alpha1.ReleaseHistoryName(kept, "apps", "web"),
				Labels:          map[string]string{"tugboat.dev/spoke": kept},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: tugboatv1alpha1.GroupVersion.String(), Kind: "Spoke", Name: kept, UID: sp.UID}}},
			Spec: tugboatv1alpha1.ReleaseHistorySpec{Spoke: kept, Namespace: "apps", Release: "web"},
		}
		g.Expect(hubCluster.Client.Create(ctx, rh)).To(Succeed())

		out, err := tugboatCLI("spoke", "remove", kept, "-n", f.ns, "--kubeconfig", hubKC, "--keep-history")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("Its 1 ReleaseHistory and key Secret " + kept + "-key are kept, without an owner."))
		g.Eventually(func() bool {
			return apierrors.IsNotFound(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(sp), &tugboatv1alpha1.Spoke{}))
		}).WithTimeout(30 * time.Second).Should(BeTrue())
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(rh), rh)).To(Succeed())
		g.Expect(rh.OwnerReferences).To(BeEmpty())
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: kept + "-key"}, &corev1.Secret{})).To(Succeed())
	})
}

func spokeNamed(g Gomega, c *harness.Cluster, ns, name string) *tugboatv1alpha1.Spoke {
	sp := &tugboatv1alpha1.Spoke{}
	g.Expect(c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, sp)).To(Succeed())
	return sp
}
