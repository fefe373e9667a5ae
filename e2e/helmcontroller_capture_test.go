package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/e2e/harness"
)

// helmControllerCaptureDir holds what TestHelmController_capture recorded of
// a real helm-controller (docs/development.md says how).
const helmControllerCaptureDir = "testdata/helm-controller-v1.6.2"

var helmChartGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "HelmChart"}

// capturedHelmRelease is one state of the HelmRelease, as a watch saw it.
type capturedHelmRelease struct {
	Step               string             `json:"step"`
	Generation         int64              `json:"generation"`
	DeletionTimestamp  *metav1.Time       `json:"deletionTimestamp,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration"`
	LastAttempted      string             `json:"lastAttemptedRevision,omitempty"`
	History            []map[string]any   `json:"history,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// TestHelmController_capture runs the real helm-controller (the binary
// TUGBOAT_HELM_CONTROLLER names, built from its source; skipped without
// it) on a spoke cluster and records, into helmControllerCaptureDir, every
// state of one HelmRelease (conditions.jsonl) and every event it sends to
// notification-controller (events.jsonl, as posted to --events-addr):
// an install, routine reconciles under a 2 s interval, an upgrade to a
// chart the API server refuses (remediation: one retry, rollback) until it
// stalls, and the HelmRelease's deletion. This test plays source-controller:
// the HelmChart's artifact is served here.
func TestHelmController_capture(t *testing.T) {
	bin := os.Getenv("TUGBOAT_HELM_CONTROLLER")
	if bin == "" {
		t.Skip("TUGBOAT_HELM_CONTROLLER is not set (docs/development.md: capturing helm-controller)")
	}
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := harness.StartT(t, harness.Options{Name: "capture", CRDPaths: []string{fluxCRDs, "testdata/crds/source-controller"}})

	// The chart artifacts, as source-controller serves them.
	h := newHelm(t, c, "apps")
	artifacts := map[string][]byte{}
	for version, broken := range map[string]bool{"1.0.0": false, "1.1.0": true} {
		ch := webChartWith(h, version, nil)
		if broken {
			// Unconditionally: an archive keeps the chart's own values.yaml.
			ch = webChartWith(h, version, map[string]string{"broken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}_Not_A_DNS_Name\n"})
		}
		artifacts[version] = packageChart(t, ch)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	var mu sync.Mutex
	var events []json.RawMessage
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost { // helm-controller's events
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			events = append(events, json.RawMessage(bytes.TrimSpace(body)))
			mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
			return
		}
		b, ok := artifacts[filepath.Base(r.URL.Path)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + ln.Addr().String()

	g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}})).To(Succeed())
	setArtifact := func(version string) {
		hc := &unstructured.Unstructured{}
		hc.SetGroupVersionKind(helmChartGVK)
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "web"}, hc)
		if err != nil {
			hc.Object["spec"] = map[string]any{"chart": "web", "version": "*", "interval": "1h",
				"sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"}}
			hc.SetNamespace("apps")
			hc.SetName("web")
			g.Expect(c.Client.Create(ctx, hc)).To(Succeed())
		}
		now := time.Now().UTC().Format(time.RFC3339)
		sum := sha256.Sum256(artifacts[version])
		hc.Object["status"] = map[string]any{
			"observedGeneration": hc.GetGeneration(), "observedChartName": "web",
			"artifact": map[string]any{"path": "helmchart/apps/web/" + version, "url": base + "/" + version,
				"revision": version, "digest": fmt.Sprintf("sha256:%x", sum), "lastUpdateTime": now, "size": int64(len(artifacts[version]))},
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "ChartPullSucceeded",
				"message": "pulled 'web' chart with version '" + version + "'", "observedGeneration": hc.GetGeneration(), "lastTransitionTime": now}},
		}
		g.Expect(c.Client.Status().Update(ctx, hc)).To(Succeed())
	}
	setArtifact("1.0.0")

	logDir, err := os.MkdirTemp("", "tugboat-helm-controller-")
	g.Expect(err).NotTo(HaveOccurred())
	logFile, err := os.Create(filepath.Join(logDir, "helm-controller.log"))
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.CommandContext(ctx, bin, "--events-addr="+base+"/", "--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0",
		"--watch-all-namespaces=true", "--log-level=debug", "--requeue-dependency=1s")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath, "RUNTIME_NAMESPACE=flux-system")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() { cancel(); _ = cmd.Wait(); t.Logf("helm-controller log: %s", logFile.Name()) })

	// Every state of the HelmRelease, in order.
	wc, err := client.NewWithWatch(c.RESTConfig, client.Options{Scheme: c.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(helmReleaseGVK.GroupVersion().WithKind("HelmReleaseList"))
	w, err := wc.Watch(ctx, list, client.InNamespace("apps"))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	var step string
	var states []capturedHelmRelease
	var smu sync.Mutex
	gone := make(chan struct{})
	go func() {
		for ev := range w.ResultChan() {
			hr, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				close(gone)
				return
			}
			var st struct {
				ObservedGeneration int64              `json:"observedGeneration"`
				LastAttempted      string             `json:"lastAttemptedRevision"`
				History            []map[string]any   `json:"history"`
				Conditions         []metav1.Condition `json:"conditions"`
			}
			raw, _ := json.Marshal(hr.Object["status"])
			_ = json.Unmarshal(raw, &st)
			if len(st.History) > 1 {
				st.History = st.History[:1]
			}
			smu.Lock()
			states = append(states, capturedHelmRelease{Step: step, Generation: hr.GetGeneration(), DeletionTimestamp: hr.GetDeletionTimestamp(),
				ObservedGeneration: st.ObservedGeneration, LastAttempted: st.LastAttempted, History: st.History, Conditions: st.Conditions})
			smu.Unlock()
		}
	}()
	hrState := func(g Gomega) *unstructured.Unstructured {
		hr := &unstructured.Unstructured{}
		hr.SetGroupVersionKind(helmReleaseGVK)
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "web"}, hr)).To(Succeed())
		return hr
	}
	cond := func(g Gomega, typ string) map[string]any {
		conds, _, _ := unstructured.NestedSlice(hrState(g).Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == typ {
				return m
			}
		}
		return nil
	}
	setStep := func(s string) { smu.Lock(); step = s; smu.Unlock() }

	setStep("install")
	hr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"interval": "2s",
		"chartRef": map[string]any{"kind": "HelmChart", "name": "web"},
		"upgrade":  map[string]any{"remediation": map[string]any{"retries": int64(1), "remediateLastFailure": true}},
	}}}
	hr.SetGroupVersionKind(helmReleaseGVK)
	hr.SetNamespace("apps")
	hr.SetName("web")
	g.Expect(c.Client.Create(ctx, hr)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(cond(g, "Ready")).To(HaveKeyWithValue("status", "True")) }).
		WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())

	setStep("routine")
	routine := func() int {
		smu.Lock()
		defer smu.Unlock()
		n := 0
		for _, s := range states {
			for _, c := range s.Conditions {
				if s.Step == "routine" && c.Type == "Reconciling" && c.Status == metav1.ConditionTrue {
					n++
				}
			}
		}
		return n
	}
	g.Eventually(routine).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(BeNumerically(">=", 3))

	setStep("upgrade-fails")
	setArtifact("1.1.0")
	g.Eventually(func(g Gomega) { g.Expect(cond(g, "Stalled")).To(HaveKeyWithValue("status", "True")) }).
		WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())

	setStep("delete")
	g.Expect(c.Client.Delete(ctx, hrState(g))).To(Succeed())
	g.Eventually(gone).WithTimeout(2 * time.Minute).Should(BeClosed())

	// Events are posted asynchronously: the uninstall's may come last.
	g.Eventually(func() []json.RawMessage {
		mu.Lock()
		defer mu.Unlock()
		return append([]json.RawMessage(nil), events...)
	}).
		WithTimeout(10 * time.Second).Should(ContainElement(ContainSubstring("UninstallSucceeded")))

	if os.Getenv("TUGBOAT_CAPTURE_WRITE") == "" {
		return
	}
	g.Expect(os.MkdirAll(helmControllerCaptureDir, 0o755)).To(Succeed())
	var out bytes.Buffer
	smu.Lock()
	for _, s := range states {
		b, err := json.Marshal(s)
		g.Expect(err).NotTo(HaveOccurred())
		out.Write(append(b, '\n'))
	}
	smu.Unlock()
	g.Expect(os.WriteFile(filepath.Join(helmControllerCaptureDir, "conditions.jsonl"), out.Bytes(), 0o644)).To(Succeed())
	out.Reset()
	mu.Lock()
	for _, e := range events {
		var compact bytes.Buffer
		g.Expect(json.Compact(&compact, e)).To(Succeed())
		out.Write(append(compact.Bytes(), '\n'))
	}
	mu.Unlock()
	g.Expect(os.WriteFile(filepath.Join(helmControllerCaptureDir, "events.jsonl"), out.Bytes(), 0o644)).To(Succeed())
}

// packageChart is ch as a chart archive (.tgz).
func packageChart(t *testing.T, ch *chart.Chart) []byte {
	t.Helper()
	dir := t.TempDir()
	path, err := chartutil.Save(ch, dir)
	if err != nil {
		t.Fatalf("packaging chart %s: %v", ch.Metadata.Version, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readCaptured reads the JSON lines of name in helmControllerCaptureDir
// into a slice of T.
func readCaptured[T any](t *testing.T, name string) []T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(helmControllerCaptureDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestHub_replaysHelmControllerEvents posts the events the real
// helm-controller v1.6.2 sent (TestHelmController_capture: an install, an
// upgrade failed and rolled back twice, then stalled, and the uninstall of
// its deletion) to the hub's Flux endpoint as notification-controller
// forwards them (metadata keys without helm-controller's group prefix, the
// Alert's cluster added, signed with the Spoke's Flux key; times moved to
// now). One revision at most is deployed after each; after the rollbacks
// the health is Unknown, never Current (no event tells of the stall); and
// Helm's own revision numbers come out.
func TestHub_replaysHelmControllerEvents(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(t, startHubCluster(t))
	f.registerSpoke("edge-1")
	key := f.registerFluxKey("edge-1")
	f.waitReceiverReady(g)

	captured := readCaptured[fluxEventBody](t, "events.jsonl")
	g.Expect(captured).To(HaveLen(6))
	shift := time.Now().UTC().Truncate(time.Second).Add(-time.Minute).Sub(captured[0].Timestamp)
	for i, ev := range captured {
		md := map[string]string{"cluster": "edge-1"}
		for k, v := range ev.Metadata {
			if name, ok := strings.CutPrefix(k, "helm.toolkit.fluxcd.io/"); ok {
				md[name] = v
			}
		}
		ev.Metadata, ev.Timestamp = md, ev.Timestamp.Add(shift)
		r := f.do(f.fluxPost("edge-1", key, mustJSON(t, ev)))
		g.Expect(r.code).To(Equal(http.StatusAccepted), "%d %s: %s", i, ev.Reason, r.body)
		g.Expect(r.accepted(g)).To(Equal(wire.AcceptedResponse{Received: 1, Accepted: 1}), "%d %s", i, ev.Reason)
		g.Eventually(func(g Gomega) {
			rh := f.history(g, "edge-1", "apps", "web")
			g.Expect(rh).NotTo(BeNil())
			n := 0
			for _, rev := range rh.Status.Revisions {
				for _, e := range rev.Events {
					if e.Reason == ev.Reason && e.Time.Time.Equal(ev.Timestamp) {
						n++
					}
				}
			}
			g.Expect(n).To(Equal(1), "%d %s recorded", i, ev.Reason)
			var deployed []int32
			for _, rev := range rh.Status.Revisions {
				if rev.Status == tugboatv1alpha1.ReleaseStatusDeployed {
					deployed = append(deployed, rev.Revision)
				}
			}
			g.Expect(len(deployed)).To(BeNumerically("<=", 1), "%d %s: deployed %v", i, ev.Reason, deployed)
			if ev.Reason == "RollbackSucceeded" {
				g.Expect(rh.Status.Current.Health).To(Equal(tugboatv1alpha1.HealthUnknown), "%d %s", i, ev.Reason)
			}
		}).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	}

	rh := f.history(g, "edge-1", "apps", "web")
	statuses := map[int32]tugboatv1alpha1.ReleaseStatus{}
	for _, r := range rh.Status.Revisions {
		statuses[r.Revision] = r.Status
	}
	g.Expect(statuses).To(Equal(map[int32]tugboatv1alpha1.ReleaseStatus{
		1: tugboatv1alpha1.ReleaseStatusSuperseded, 2: tugboatv1alpha1.ReleaseStatusFailed, 3: tugboatv1alpha1.ReleaseStatusSuperseded,
		4: tugboatv1alpha1.ReleaseStatusFailed, 5: tugboatv1alpha1.ReleaseStatusUninstalled,
	}), "Helm's own numbering: v1 installed, v2 failed, v3 the rollback, v4 failed, v5 the rollback, uninstalled")
}
