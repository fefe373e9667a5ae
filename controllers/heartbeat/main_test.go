package heartbeat_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/identity"
)

var (
	// cluster is a real API server (etcd and kube-apiserver) with tugboat's
	// CRDs and the hub chart's RBAC, cluster-wide and in the hub's
	// namespace (identity.HubNamespace), where the digests live.
	cluster *harness.Cluster
	// hubc acts as the hub's ServiceAccount.
	hubc client.Client
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(harness.Main(harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true}, func(c *harness.Cluster) int {
		cluster = c
		ctx := context.Background()
		if err := identity.Install(ctx, c.Client); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := identity.InstallHubNamespace(ctx, c.Client); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		var err error
		if hubc, err = client.New(identity.HubConfig(c.RESTConfig), client.Options{Scheme: c.Client.Scheme()}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}))
}

// Timings of the tests' hubs: a short heartbeat timeout, so that a lost
// spoke shows within seconds, and digests written often enough for it.
const (
	testTimeout  = 3 * time.Second
	testInterval = 500 * time.Millisecond
)

// hubOptions are the options of a test's hub: the defaults but for the
// short timings, digests in the hub's namespace, and no leader election
// (the only hub of the test runs the Spoke controller).
func hubOptions() hub.Options {
	opts := hubtest.Options()
	opts.Spoke.HeartbeatTimeout = testTimeout
	opts.Heartbeats.Interval = testInterval
	opts.Heartbeats.Namespace = identity.HubNamespace
	return opts
}

// statusWrites counts the writes (PATCH and PUT) of Spokes' status that
// go through a rest.Config, by namespace/name.
type statusWrites struct {
	mu sync.Mutex
	n  map[string]int
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// wrap makes cfg count its Spoke status writes into w.
func (w *statusWrites) wrap(cfg *rest.Config) *rest.Config {
	w.n = map[string]int{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			// /apis/tugboat.dev/v1alpha1/namespaces/<ns>/spokes/<name>/status
			p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
			if (r.Method == http.MethodPatch || r.Method == http.MethodPut) && len(p) == 8 && p[1] == tugboatv1alpha1.GroupVersion.Group &&
				p[5] == "spokes" && p[7] == "status" {
				w.mu.Lock()
				w.n[p[4]+"/"+p[6]]++
				w.mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

func (w *statusWrites) of(sp *tugboatv1alpha1.Spoke) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[sp.Namespace+"/"+sp.Name]
}

// newNamespace creates a namespace of its own for t.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := cluster.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// newSpoke creates a Spoke named name and the generated suffix of ns (so
// unique across the hub also when a test runs again, with -count or make
// stress) in ns with its key Secret, and returns it and its key.
func newSpoke(t *testing.T, ns, name string) (*tugboatv1alpha1.Spoke, []byte) {
	t.Helper()
	ctx := context.Background()
	name += ns[strings.LastIndex(ns, "-"):]
	key := []byte(hex.EncodeToString([]byte(name + "-0123456789abcdef0123456789abcdef")))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-key"},
		Data: map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: key}}
	sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: secret.Name}}}
	for _, o := range []client.Object{secret, sp} {
		if err := cluster.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	return sp, key
}

// ready returns sp's Ready status and reason, as the API server has them.
func ready(g Gomega, sp *tugboatv1alpha1.Spoke) string {
	got := &tugboatv1alpha1.Spoke{}
	g.Expect(cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(sp), got)).To(Succeed())
	c := apimeta.FindStatusCondition(got.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
	if c == nil {
		return ""
	}
	return string(c.Status) + " " + c.Reason
}

const (
	isReady = "True AgentConnected"
	isLost  = "Unknown AgentNotSeen"
)

// spokeEvents returns the reasons of the Events about sp, oldest first.
func spokeEvents(g Gomega, sp *tugboatv1alpha1.Spoke) []string {
	var list eventsv1.EventList
	g.Expect(cluster.Client.List(context.Background(), &list, client.InNamespace(sp.Namespace))).To(Succeed())
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].EventTime.Before(&list.Items[j].EventTime) })
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Spoke" && e.Regarding.Name == sp.Name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// postState sends a state snapshot of sp (one release), signed with key,
// to the receiver at addr, and expects it accepted.
func postState(g Gomega, addr string, sp *tugboatv1alpha1.Spoke, key []byte) {
	snap := wire.StateSnapshot{Spoke: sp.Name, AgentVersion: "v0.1.0-test", ProtocolVersion: wire.ProtocolVersion, KubernetesVersion: "v1.36.3",
		TakenAt: time.Now().UTC(), Releases: []wire.ReleaseState{{Namespace: "apps", Release: "web", Revision: 1, Chart: "web",
			ChartVersion: "1.0.0", Status: wire.StatusDeployed, Health: wire.HealthCurrent}}}
	body, err := json.Marshal(snap)
	g.Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+wire.StatePath(sp.Name), bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	wire.SignRequest(req, key, body, time.Now())
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted), "%s", raw)
}

// receiverReady waits until h's receiver answers /readyz, and returns its
// address.
func receiverReady(g Gomega, h *hub.Hub) string {
	g.Eventually(h.Receiver.Addr).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).ShouldNot(BeNil())
	addr := h.Receiver.Addr().String()
	g.Eventually(func() int {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(http.StatusOK))
	return addr
}
