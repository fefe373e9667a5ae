package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/agent/health"
	"tugboat.dev/tugboat/agent/ownership"
	"tugboat.dev/tugboat/agent/tracker"
	"tugboat.dev/tugboat/api/wire"
)

// fixtures decodes the typed objects of testdata/objects, as an informer
// delivers them: whole, TypeMeta empty.
func fixtures(t *testing.T) []client.Object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "objects", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var out []client.Object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var raw runtime.RawExtension
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(raw.Raw, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, obj.(client.Object))
		}
	}
	return out
}

func kindOf(t *testing.T, obj client.Object) string {
	t.Helper()
	for _, w := range workloads {
		if reflect.TypeOf(w.obj) == reflect.TypeOf(obj) {
			return w.kind
		}
	}
	t.Fatalf("%T is not a tracked workload", obj)
	return ""
}

// asListed converts obj the way listWorkloads hands it to the health
// computation.
func asListed(t *testing.T, obj client.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	for _, w := range workloads {
		if reflect.TypeOf(w.obj) == reflect.TypeOf(obj) {
			u.SetGroupVersionKind(w.gvk)
		}
	}
	return u
}

// trimmed returns obj through its informer's transform, leaving obj whole.
func trimmed(t *testing.T, obj client.Object) client.Object {
	t.Helper()
	tr := cacheTransform(obj)
	if tr == nil {
		t.Fatalf("no cache transform for %T", obj)
	}
	in := obj.DeepCopyObject().(client.Object)
	in.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	out, err := tr(in)
	if err != nil {
		t.Fatal(err)
	}
	return out.(client.Object)
}

func jsonSize(t *testing.T, obj any) int {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestCacheTransform_sameHealth checks that every workload fixture has the
// same health, ownership and identity trimmed as whole, that the trimmed
// object holds no managed fields, and that it is much smaller.
func TestCacheTransform_sameHealth(t *testing.T) {
	objs := fixtures(t)
	// The fixtures cover the rules that read more than generation and
	// status counters; a transform dropping what they read changes these.
	want := map[string]status.Status{
		"Deployment/web":           status.InProgressStatus,
		"Deployment/worker":        status.FailedStatus,  // ProgressDeadlineExceeded
		"Deployment/cache":         status.CurrentStatus, // spec.replicas, NewReplicaSetAvailable
		"StatefulSet/db":           status.CurrentStatus, // needs the partition
		"DaemonSet/node-agent":     status.InProgressStatus,
		"Job/migrate":              status.FailedStatus, // FailureTarget
		"Job/seed":                 status.CurrentStatus,
		"Pod/web-7d9f6c5b4-x2m8q":  status.CurrentStatus,
		"Pod/web-7d9f6c5b4-p4n7r":  status.FailedStatus, // ImagePullBackOff
		"Pod/web-7d9f6c5b4-k9d2z":  status.FailedStatus, // CrashLoopBackOff
		"Pod/web-7d9f6c5b4-r5t6y":  status.InProgressStatus,
		"Pod/web-smoke-test":       status.FailedStatus,  // bare, so no owner replaces it
		"Pod/web-7d9f6c5b4-e1v2c":  status.CurrentStatus, // failed, but its ReplicaSet replaces it
		"Pod/web-7d9f6c5b4-u8s9h":  status.FailedStatus,  // unschedulable long enough
		"Pod/web-7d9f6c5b4-t3m4n":  status.TerminatingStatus,
		"Pod/web-7d9f6c5b4-i5n6t":  status.FailedStatus, // init container CreateContainerConfigError
		"Pod/web-7d9f6c5b4-o0b1s":  status.InProgressStatus,
		"ReplicaSet/web-7d9f6c5b4": status.InProgressStatus,
	}
	var fullList, trimList []*unstructured.Unstructured
	for _, obj := range objs {
		kind := kindOf(t, obj)
		id := kind + "/" + obj.GetName()
		t.Run(id, func(t *testing.T) {
			tr := trimmed(t, obj)
			full, small := asListed(t, obj), asListed(t, tr)
			fullList, trimList = append(fullList, full), append(trimList, small)

			fs, ts := health.ObjectStatusOf(full), health.ObjectStatusOf(small)
			if fs != ts {
				t.Errorf("health differs:\nwhole:   %+v\ntrimmed: %+v", fs, ts)
			}
			if w, ok := want[id]; !ok {
				t.Errorf("fixture %s has no expected status", id)
			} else if ts.Status != w {
				t.Errorf("status %s (%s), want %s", ts.Status, ts.Message, w)
			}

			fr, fok := ownership.ReleaseOf(obj)
			tr2, tok := ownership.ReleaseOf(tr)
			if fr != tr2 || fok != tok || !fok {
				t.Errorf("ownership differs: whole %v %v, trimmed %v %v", fr, fok, tr2, tok)
			}
			if obj.GetName() != tr.GetName() || obj.GetNamespace() != tr.GetNamespace() || obj.GetUID() != tr.GetUID() ||
				obj.GetResourceVersion() != tr.GetResourceVersion() || obj.GetGeneration() != tr.GetGeneration() ||
				!reflect.DeepEqual(obj.GetLabels(), tr.GetLabels()) || !reflect.DeepEqual(obj.GetOwnerReferences(), tr.GetOwnerReferences()) ||
				!obj.GetCreationTimestamp().Time.Equal(tr.GetCreationTimestamp().Time) ||
				!reflect.DeepEqual(obj.GetDeletionTimestamp(), tr.GetDeletionTimestamp()) {
				t.Errorf("identity, labels or owners differ:\nwhole:   %+v\ntrimmed: %+v", full.Object["metadata"], small.Object["metadata"])
			}
			if len(tr.GetManagedFields()) != 0 {
				t.Error("managed fields kept")
			}
			// Pods are most of the cache, and a Pod template most of the
			// objects that hold one.
			fsz, tsz := jsonSize(t, obj), jsonSize(t, tr)
			if big := kind == "Pod" || obj.GetName() == "web"; (big && tsz*2 > fsz) || tsz >= fsz {
				t.Errorf("trimmed to %d bytes of JSON from %d: want less (at most half for Pods and Deployment web)", tsz, fsz)
			}
		})
	}
	fh, th := health.Compute(fullList), health.Compute(trimList)
	if fh.Health != th.Health || fh.Reason != th.Reason || !reflect.DeepEqual(fh.Objects, th.Objects) {
		t.Errorf("release health differs:\nwhole:   %s %s\ntrimmed: %s %s", fh.Health, fh.Reason, th.Health, th.Reason)
	}
}

type recordingSink struct{ events []wire.Event }

func (s *recordingSink) Enqueue(events ...wire.Event) {
	for _, e := range events {
		e.Time, e.ID = time.Time{}, "" // compared without the time (the ID hashes it)
		s.events = append(s.events, e)
	}
}

// TestCacheTransform_sameEvents checks that the tracker reports the same
// object events for trimmed objects as for whole ones: created, modified,
// deleted, and a Pod's failure reason when it appears.
func TestCacheTransform_sameEvents(t *testing.T) {
	objs := fixtures(t)
	var healthy *corev1.Pod
	for _, obj := range objs {
		if obj.GetName() == "web-7d9f6c5b4-x2m8q" {
			healthy = obj.(*corev1.Pod)
		}
	}
	if healthy == nil {
		t.Fatal("no healthy Pod fixture")
	}
	events := func(trim bool) []wire.Event {
		sink := &recordingSink{}
		tr := tracker.New(tracker.Options{Spoke: "s"}, sink, nil)
		prep := func(o client.Object) client.Object {
			if trim {
				return trimmed(t, o)
			}
			return o.DeepCopyObject().(client.Object)
		}
		for _, obj := range objs {
			kind := kindOf(t, obj)
			tr.ObserveObject(kind, nil, prep(obj), false, false)
			older := prep(obj)
			older.SetGeneration(obj.GetGeneration() - 1)
			tr.ObserveObject(kind, older, prep(obj), false, false)
			if kind == "Pod" {
				tr.ObserveObject(kind, prep(healthy), prep(obj), false, false)
			}
			tr.ObserveObject(kind, prep(obj), prep(obj), true, false)
		}
		return sink.events
	}
	whole, small := events(false), events(true)
	if !reflect.DeepEqual(whole, small) {
		t.Errorf("events differ:\nwhole:   %+v\ntrimmed: %+v", whole, small)
	}
	failed := 0
	for _, e := range small {
		if e.Reason == "PodFailed" {
			failed++
		}
	}
	// ImagePullBackOff, CrashLoopBackOff, two Failed phases and
	// CreateContainerConfigError, each once from nothing and once from a
	// healthy Pod.
	if failed != 10 {
		t.Errorf("%d PodFailed events, want 10: %+v", failed, small)
	}
}

// TestCacheTransform_sharesRepeats checks that Pods of one ReplicaSet share
// their label map and owner slice once trimmed, and that the interning
// tables stay bounded.
func TestCacheTransform_sharesRepeats(t *testing.T) {
	var pods []*corev1.Pod
	for _, obj := range fixtures(t) {
		if p, ok := obj.(*corev1.Pod); ok && len(p.OwnerReferences) > 0 {
			pods = append(pods, trimmed(t, p).(*corev1.Pod))
		}
	}
	if len(pods) < 2 {
		t.Fatal("want two Pods of a ReplicaSet among the fixtures")
	}
	a, b := pods[0], pods[1]
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("two Pods with the same labels hold two label maps")
	}
	if &a.OwnerReferences[0] != &b.OwnerReferences[0] {
		t.Error("two Pods with the same owner hold two owner slices")
	}
	for i := range 3 * labelSets.max {
		internLabels(map[string]string{"pod-template-hash": strconv.Itoa(i)})
	}
	labelSets.mu.Lock()
	n := len(labelSets.m)
	labelSets.mu.Unlock()
	if n > labelSets.max {
		t.Errorf("%d label sets interned, want at most %d", n, labelSets.max)
	}
}
