package tracker

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"tugboat.dev/tugboat/agent/release"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/e2e/harness"
)

// recorder is the tracker's sink.
type recorder struct {
	mu     sync.Mutex
	events []wire.Event
}

func (r *recorder) Enqueue(events ...wire.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, events...)
}

func (r *recorder) all() []wire.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wire.Event(nil), r.events...)
}

// The occurrence test runs Helm against a real API server (etcd and
// kube-apiserver of the e2e harness), started on first use.
var apiServer struct {
	once    sync.Once
	cluster *harness.Cluster
	err     error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if c := apiServer.cluster; c != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "cluster logs kept in %s\n", c.LogDir)
			_ = c.StopKeepLogs()
		} else {
			_ = c.Stop()
		}
	}
	os.Exit(code)
}

func realCluster(t *testing.T) *harness.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a local API server; skipped with -short")
	}
	apiServer.once.Do(func() {
		apiServer.cluster, apiServer.err = harness.Start(context.Background(), harness.Options{Name: "tracker", ControlPlaneOnly: true})
	})
	if apiServer.err != nil {
		t.Fatalf("starting the API server: %v", apiServer.err)
	}
	return apiServer.cluster
}

// helmSpoke runs real Helm SDK actions (install, upgrade, uninstall)
// against a real API server, and feeds the tracker from a shared informer
// on Helm's release Secrets, as the agent does. The API server has no
// controllers, so a Deployment never becomes available: an install that
// waits for it fails, as a broken rollout does.
type helmSpoke struct {
	t       *testing.T
	ns      string
	cluster *harness.Cluster
	tracker *Tracker
	sink    *recorder
}

func newHelmSpoke(t *testing.T) *helmSpoke {
	t.Helper()
	c := realCluster(t)
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "_", "-"))
	ns = strings.Trim(ns[max(0, len(ns)-40):], "-") + "-" + string(uuid.NewUUID())[:6]
	if err := c.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	sink := &recorder{}
	tr := New(Options{Spoke: "spoke-1", Settle: time.Millisecond}, sink,
		func(context.Context, release.Key) ([]*unstructured.Unstructured, error) { return nil, nil })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = tr.Start(ctx) }()
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "owner=helm" }))
	inf := f.Core().V1().Secrets().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(o any, initial bool) { tr.ObserveStorage(o, initial) },
		UpdateFunc: func(_, o any) { tr.ObserveStorage(o, false) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			tr.ForgetStorage(o)
		},
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return &helmSpoke{t: t, ns: ns, cluster: c, tracker: tr, sink: sink}
}

func (h *helmSpoke) config() *action.Configuration {
	h.t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &h.cluster.KubeconfigPath, &h.ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, h.ns, "secret", func(string, ...any) {}); err != nil {
		h.t.Fatal(err)
	}
	return cfg
}

func testChart(t *testing.T, name, version string) *chart.Chart {
	t.Helper()
	ch, err := loader.Load("../testdata/charts/web")
	if err != nil {
		t.Fatal(err)
	}
	ch.Metadata.Name, ch.Metadata.Version = name, version
	return ch
}

// install installs the chart; with wait, it waits (2 s) for the Deployment,
// which never becomes available here: the install fails.
func (h *helmSpoke) install(name string, ch *chart.Chart, wait bool) error {
	in := action.NewInstall(h.config())
	in.ReleaseName, in.Namespace = name, h.ns
	in.Wait, in.Timeout = wait, 2*time.Second
	_, err := in.Run(ch, nil)
	return err
}

func (h *helmSpoke) upgrade(name string, ch *chart.Chart) error {
	up := action.NewUpgrade(h.config())
	up.Namespace = h.ns
	_, err := up.Run(name, ch, nil)
	return err
}

func (h *helmSpoke) uninstall(name string) error {
	_, err := action.NewUninstall(h.config()).Run(name)
	return err
}

// waitFor waits until the tracker has announced revision rev of name
// reaching reason (a status event's reason), in the current occurrence:
// after the n-th such event.
func (h *helmSpoke) waitFor(g Gomega, name string, rev int, reason string, n int) {
	g.Eventually(func() int {
		c := 0
		for _, e := range h.sink.all() {
			if e.Release == name && e.Revision == rev && e.Reason == reason {
				c++
			}
		}
		return c
	}).WithTimeout(10*time.Second).Should(BeNumerically(">=", n), "%s revision %d %s #%d", name, rev, reason, n)
}

// Issue 13, bug 7: an uninstall and a reinstall make a new revision 1
// (in a new storage Secret); its events must get ids of their own, or the
// hub drops them as redeliveries of the old revision 1's. Each occurrence
// of "revision 1 installed" (of the same chart, of another chart, a failed
// one) gets its own ids; no two events the tracker emits share an id.
func TestTracker_eventIDsAreUniquePerOccurrence(t *testing.T) {
	g := NewWithT(t)
	h := newHelmSpoke(t)
	web1, web2 := testChart(t, "web", "1.0.0"), testChart(t, "web", "1.1.0")

	g.Expect(h.install("demo", web1, false)).To(Succeed())
	h.waitFor(g, "demo", 1, "Deployed", 1)
	g.Expect(h.upgrade("demo", web2)).To(Succeed())
	h.waitFor(g, "demo", 2, "Deployed", 1)
	g.Expect(h.uninstall("demo")).To(Succeed())
	h.waitFor(g, "demo", 2, "Uninstalled", 1)

	// Reinstalled, same chart and version: the same revision numbers and
	// statuses as the first time.
	g.Expect(h.install("demo", web1, false)).To(Succeed())
	h.waitFor(g, "demo", 1, "Deployed", 2)
	g.Expect(h.upgrade("demo", web2)).To(Succeed())
	h.waitFor(g, "demo", 2, "Deployed", 2)
	g.Expect(h.uninstall("demo")).To(Succeed())
	h.waitFor(g, "demo", 2, "Uninstalled", 2)

	// Reinstalled with another chart.
	g.Expect(h.install("demo", testChart(t, "api", "1.0.0"), false)).To(Succeed())
	h.waitFor(g, "demo", 1, "Deployed", 3)
	g.Expect(h.uninstall("demo")).To(Succeed())
	h.waitFor(g, "demo", 1, "Uninstalled", 1)

	// An install that fails, twice.
	for i := 1; i <= 2; i++ {
		g.Expect(h.install("demo", web1, true)).NotTo(Succeed())
		h.waitFor(g, "demo", 1, "Failed", i)
		g.Expect(h.uninstall("demo")).To(Succeed())
		h.waitFor(g, "demo", 1, "Uninstalled", 1+i)
	}

	events := h.sink.all()
	byID := map[string]wire.Event{}
	for _, e := range events {
		g.Expect(e.ID).To(Equal(e.ComputeID()), "the hub recomputes the id and must find the same")
		g.Expect(e.Validate()).To(Succeed())
		if prev, dup := byID[e.ID]; dup {
			t.Fatalf("two events share id %s:\n  %s: %s\n  %s: %s", e.ID, prev.Reason, prev.Message, e.Reason, e.Message)
		}
		byID[e.ID] = e
	}
	for _, e := range events {
		g.Expect(e.ReleaseUID).NotTo(BeEmpty(), "%s %s", e.Reason, e.Message)
	}
	// Five occurrences of revision 1 started, each with its own storage
	// Secret.
	uids := map[string]bool{}
	for _, e := range events {
		if e.Revision == 1 && e.Reason == "InstallStarted" {
			uids[e.ReleaseUID] = true
		}
	}
	g.Expect(uids).To(HaveLen(5))
}

// Issue 13, bug 4: the tracker forgets what it remembered about revisions
// and releases once their storage objects are gone. 10,000 releases are
// installed, upgraded past the history limit (Helm prunes the oldest
// revision), have Pods created and deleted, and are uninstalled: while they exist, what the tracker holds is
// bounded by what is stored; afterwards its maps are empty and the heap is
// back to its baseline.
func TestTracker_forgetsWhatIsNoLongerStored(t *testing.T) {
	if testing.Short() {
		t.Skip("churns 10,000 releases")
	}
	g := NewWithT(t)
	sink := &recorder{}
	tr := New(Options{Spoke: "spoke-1"}, sink,
		func(context.Context, release.Key) ([]*unstructured.Unstructured, error) { return nil, nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = tr.Start(ctx) }()
	const (
		releases   = 10_000
		upgrades   = 4
		historyMax = 2 // revisions kept, as helm upgrade --history-max 2
	)
	baseline := heapInUse()
	secret := func(i, rev int, status string) *corev1.Secret {
		uid := types.UID(fmt.Sprintf("uid-%d-%d", i, rev)) // one per stored revision
		return releaseSecret(fmt.Sprintf("r%05d", i), rev, status, uid)
	}
	for i := range releases {
		for rev := 1; rev <= upgrades; rev++ {
			tr.ObserveStorage(secret(i, rev, pendingOf(rev)), false)
			tr.ObserveStorage(secret(i, rev, "deployed"), false)
			if rev > 1 {
				tr.ObserveStorage(secret(i, rev-1, "superseded"), false)
			}
			if old := rev - historyMax; old >= 1 {
				tr.ForgetStorage(secret(i, old, "superseded"))
			}
		}
		// Objects of the release come and go.
		for p := range 2 {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
				Namespace: "apps", Name: fmt.Sprintf("r%05d-%d", i, p), UID: types.UID(fmt.Sprintf("pod-%d-%d", i, p)),
				Labels: map[string]string{tugboatv1alpha1.LabelRelease: fmt.Sprintf("r%05d", i), tugboatv1alpha1.LabelReleaseNamespace: "apps"},
			}}
			tr.ObserveObject("Pod", nil, pod, false, false)
			tr.ObserveObject("Pod", pod, pod, true, false)
		}
		// A decode failure of another object, reported once.
		bad := releaseSecret(fmt.Sprintf("r%05d-broken", i), 1, "deployed", "uid-broken")
		bad.Data = map[string][]byte{"release": []byte("not base64 !")}
		tr.ObserveStorage(bad, false)
		tr.ForgetStorage(bad)
	}
	rels, revs, seen, reported := tr.remembered()
	g.Expect(rels).To(Equal(releases))
	g.Expect(revs).To(Equal(releases * historyMax))
	g.Expect(reported).To(BeZero())
	// Per stored revision: at most pending, deployed and superseded.
	g.Expect(seen).To(BeNumerically("<=", releases*historyMax*3), "seen holds only stored revisions")

	for i := range releases {
		for rev := upgrades - historyMax + 1; rev <= upgrades; rev++ {
			tr.ForgetStorage(secret(i, rev, "superseded"))
		}
	}
	rels, revs, seen, reported = tr.remembered()
	g.Expect([]int{rels, revs, seen, reported}).To(Equal([]int{0, 0, 0, 0}))
	g.Eventually(tr.queue.Len).WithTimeout(30*time.Second).Should(BeZero(), "the health queue drains")
	sink.mu.Lock()
	sink.events = nil // the reporter's outbox is bounded on its own
	sink.mu.Unlock()
	// Slack for what stays allocated on purpose: Go maps keep their
	// buckets once emptied (the tracker's releases map of 10,000 entries).
	g.Expect(heapInUse()).To(BeNumerically("<", baseline+8<<20), "heap back near its baseline of %d bytes", baseline)
}

func pendingOf(rev int) string {
	if rev == 1 {
		return "pending-install"
	}
	return "pending-upgrade"
}

// payloads caches encoded releases by revision and status: the release's
// name and revision come from the Secret's name, as Helm's decoders allow.
var payloads sync.Map

// releaseSecret is the storage Secret of revision rev of release name in
// status, encoded as Helm encodes it (JSON, gzip, base64).
func releaseSecret(name string, rev int, status string, uid types.UID) *corev1.Secret {
	key := fmt.Sprint(rev, status)
	payload, ok := payloads.Load(key)
	if !ok {
		rls := map[string]any{
			"namespace": "apps",
			"info":      map[string]any{"status": status, "description": "Upgrade complete"},
			"chart":     map[string]any{"metadata": map[string]any{"name": "web", "version": fmt.Sprintf("1.%d.0", rev)}},
		}
		b, err := json.Marshal(rls)
		if err != nil {
			panic(err)
		}
		var gz bytes.Buffer
		w := gzip.NewWriter(&gz)
		_, _ = w.Write(b)
		_ = w.Close()
		payload, _ = payloads.LoadOrStore(key, []byte(base64.StdEncoding.EncodeToString(gz.Bytes())))
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "apps", Name: release.StorageName(name, rev), UID: uid,
			Labels: map[string]string{"owner": "helm", "name": name, "status": status},
		},
		Type: release.SecretType,
		Data: map[string][]byte{"release": payload.([]byte)},
	}
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestTracker_announcesWhatItListsAtStart: an agent killed after Helm
// wrote a status and before its event reached the hub (or down while a
// release happened) starts over the storage as it is. The new tracker
// announces each listed revision's status once the release's health is
// known, with the ids a tracker that saw it happen sent, so the hub drops
// what it already has and records what it missed (found by the chaos
// suite: a staging agent killed during a promotion lost revision 2's
// Superseded event).
func TestTracker_announcesWhatItListsAtStart(t *testing.T) {
	g := NewWithT(t)
	noObjects := func(context.Context, release.Key) ([]*unstructured.Unstructured, error) { return nil, nil }
	secret := func(rev int, status string) *corev1.Secret {
		return releaseSecret("web", rev, status, types.UID(fmt.Sprintf("uid-%d", rev)))
	}
	statusIDs := func(events []wire.Event) map[string]string {
		out := map[string]string{}
		for _, e := range events {
			if e.Kind == wire.EventReleaseStatus || e.Kind == wire.EventReleaseStarted {
				out[fmt.Sprintf("%d %s", e.Revision, e.Reason)] = e.ID
			}
		}
		return out
	}

	// The first agent sees install and upgrade happen.
	live := &recorder{}
	first := New(Options{Spoke: "spoke-1", Settle: time.Millisecond}, live, noObjects)
	for _, s := range []*corev1.Secret{secret(1, "pending-install"), secret(1, "deployed"), secret(2, "pending-upgrade"),
		secret(1, "superseded"), secret(2, "deployed")} {
		first.ObserveStorage(s, false)
	}
	want := statusIDs(live.all())
	g.Expect(want).To(HaveKey("1 Superseded"))
	g.Expect(want).To(HaveKey("2 Deployed"))

	// A new agent lists the storage as it is now.
	restarted := &recorder{}
	second := New(Options{Spoke: "spoke-1", Settle: time.Millisecond}, restarted, noObjects)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = second.Start(ctx) }()
	second.ObserveStorage(secret(2, "deployed"), true)
	second.ObserveStorage(secret(1, "superseded"), true)
	g.Eventually(func() map[string]string { return statusIDs(restarted.all()) }).WithTimeout(10 * time.Second).Should(Equal(map[string]string{
		"1 Superseded": want["1 Superseded"],
		"2 Deployed":   want["2 Deployed"],
	}))
	for _, e := range restarted.all() {
		if e.Reason == "Deployed" {
			g.Expect(e.State).NotTo(BeNil())
			g.Expect(e.State.Health).NotTo(Equal(wire.HealthInProgress), "announced once the health is known: %s", e.State.HealthReason)
		}
	}
}

// TestTracker_announcesAnOlderRevisionListedAfterTheReleaseWasJudged: the
// informer's initial list runs beside the health worker, in any order. A
// superseded revision listed after the worker already judged the release
// (and announced the deployed one) is still announced, although the
// release's latest revision does not change (the flake of
// TestTracker_announcesWhatItListsAtStart, made certain here: a restarted
// agent could leave the hub without a revision's Superseded status).
func TestTracker_announcesAnOlderRevisionListedAfterTheReleaseWasJudged(t *testing.T) {
	g := NewWithT(t)
	noObjects := func(context.Context, release.Key) ([]*unstructured.Unstructured, error) { return nil, nil }
	announced := func(r *recorder) []string {
		var out []string
		for _, e := range r.all() {
			if e.Kind == wire.EventReleaseStatus {
				out = append(out, fmt.Sprintf("%d %s", e.Revision, e.Reason))
			}
		}
		return out
	}
	rec := &recorder{}
	tr := New(Options{Spoke: "spoke-1", Settle: time.Millisecond}, rec, noObjects)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = tr.Start(ctx) }()

	tr.ObserveStorage(releaseSecret("web", 2, "deployed", "uid-2"), true)
	g.Eventually(func() []string { return announced(rec) }).WithTimeout(10 * time.Second).Should(ConsistOf("2 Deployed"))

	tr.ObserveStorage(releaseSecret("web", 1, "superseded", "uid-1"), true)
	g.Eventually(func() []string { return announced(rec) }).WithTimeout(10 * time.Second).Should(ConsistOf("2 Deployed", "1 Superseded"))
}
