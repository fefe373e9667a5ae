package spokedir_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/controllers/releasehistory"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/webhook/receiver"
	"tugboat.dev/tugboat/webhook/receiver/spokedir"
)

// cluster is a real API server (etcd and kube-apiserver) with tugboat's
// CRDs; dir reads it through a started manager's cache.
var (
	cluster *harness.Cluster
	dir     *spokedir.Directory
	// mgrClient and apiReader are the started manager's cached client and
	// APIReader, for Directories of other options.
	mgrClient client.Client
	apiReader client.Reader
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(harness.Main(harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true}, func(c *harness.Cluster) int {
		cluster = c
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		mgr, err := ctrl.NewManager(c.RESTConfig, ctrl.Options{Scheme: hub.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
		if err != nil {
			panic(err)
		}
		if err := releasehistory.IndexSpokeNames(ctx, mgr); err != nil {
			panic(err)
		}
		dir = spokedir.New(mgr.GetClient(), mgr.GetAPIReader(), 0, spokedir.NewOptions())
		mgrClient, apiReader = mgr.GetClient(), mgr.GetAPIReader()
		done := make(chan struct{})
		go func() { defer close(done); _ = mgr.Start(ctx) }()
		defer func() { cancel(); <-done }()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			panic("cache did not sync")
		}
		return m.Run()
	}))
}

var (
	agentKey     = []byte("agent-key-0123456789abcdef0123456789")
	previousKey  = []byte("agent-previous-key-0123456789abcdef")
	fluxKey      = []byte("flux-key-0123456789abcdef0123456789a")
	squatterKey  = []byte("squatter-key-0123456789abcdef012345")
	spokeName    = "edge-1"
	realNS       = "tenant-real"
	squatterNS   = "tenant-squatter"
	noSecretName = "edge-2"
)

// create creates the objects on the real API server.
func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := cluster.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func spoke(ns, name string, suspend bool) *tugboatv1alpha1.Spoke {
	return &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}, Suspend: suspend},
	}
}

func keySecret(ns, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-key"}, Data: data}
}

// TestDirectory_findsEverySpokeOfANameWithItsKeys: a name used in two
// namespaces gives both Spokes, each with its own agent keys, Flux keys and
// suspension, so the receiver can tell them apart by key; an unknown name
// gives none, and a Spoke without its Secret has no keys.
func TestDirectory_findsEverySpokeOfANameWithItsKeys(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	create(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: realNS}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: squatterNS}},
		keySecret(realNS, spokeName, map[string][]byte{
			tugboatv1alpha1.SpokeKeySecretKey:         append(agentKey, '\n'),
			tugboatv1alpha1.SpokePreviousKeySecretKey: previousKey,
			tugboatv1alpha1.SpokeFluxKeySecretKey:     fluxKey,
		}),
		spoke(realNS, spokeName, false),
		keySecret(squatterNS, spokeName, map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: squatterKey}),
		spoke(squatterNS, spokeName, true),
		spoke(realNS, noSecretName, false),
	)
	g.Eventually(func() ([]receiver.Spoke, error) { return dir.Spokes(ctx, spokeName) }).WithTimeout(10 * time.Second).Should(ConsistOf(
		receiver.Spoke{
			SpokeRef: receiver.SpokeRef{Namespace: realNS, Name: spokeName},
			Keys:     ingest.SpokeKeys{Current: agentKey, Previous: previousKey},
			FluxKeys: ingest.SpokeKeys{Current: fluxKey},
		},
		receiver.Spoke{
			SpokeRef:  receiver.SpokeRef{Namespace: squatterNS, Name: spokeName},
			Keys:      ingest.SpokeKeys{Current: squatterKey},
			Suspended: true,
		},
	))
	g.Expect(dir.Spokes(ctx, "nobody")).To(BeEmpty())
	g.Eventually(func() ([]receiver.Spoke, error) { return dir.Spokes(ctx, noSecretName) }).WithTimeout(10 * time.Second).Should(ConsistOf(
		receiver.Spoke{SpokeRef: receiver.SpokeRef{Namespace: realNS, Name: noSecretName}},
	))
}

// TestDirectory_readsTheLastSnapshotTime: Spokes reads
// status.lastSnapshotTakenAt (which the recorder persists with the
// heartbeat) to the microsecond, so a restarted hub still refuses older
// snapshots.
func TestDirectory_readsTheLastSnapshotTime(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns, name = "tenant-snap", "snap-1"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		keySecret(ns, name, map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: agentKey}),
		spoke(ns, name, false))
	takenAt := time.Date(2026, 11, 24, 13, 0, 0, 123456000, time.UTC)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"lastSnapshotTakenAt":"2026-11-24T13:00:00.123456Z"}}`))
	g.Expect(cluster.Client.Status().Patch(ctx, &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, patch)).To(Succeed())
	g.Eventually(func() (time.Time, error) {
		spokes, err := dir.Spokes(ctx, name)
		if err != nil || len(spokes) != 1 {
			return time.Time{}, err
		}
		return spokes[0].LastSnapshotTakenAt, nil
	}).WithTimeout(10 * time.Second).Should(BeTemporally("==", takenAt))
}
