package tracker

import (
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tugboat.dev/tugboat/agent/release"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// ObserveObject handles a tracked workload added, updated or deleted: it
// schedules the release's health and emits an object event (not for the
// objects listed when the agent starts).
func (t *Tracker) ObserveObject(kind string, oldObj, obj metav1.Object, deleted, initial bool) {
	rel, ok := releaseOf(obj)
	if !ok {
		return
	}
	t.mu.Lock()
	e := t.releases[rel]
	revision, releaseUID := 1, ""
	if e != nil && e.latest != nil {
		revision, releaseUID = e.latest.Revision, e.latest.StorageUID
	}
	t.mu.Unlock()
	t.Touch(rel)
	if initial {
		return
	}
	ref := &wire.ObjectRef{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID())}
	var ev *wire.Event
	switch {
	case deleted:
		e := t.event(rel.Namespace, rel.Name, revision, releaseUID, wire.EventObjectDeleted, wire.EventTypeNormal, "Deleted",
			fmt.Sprintf("%s %s deleted", kind, obj.GetName()), ref, 0, nil)
		ev = &e
	case oldObj == nil:
		e := t.event(rel.Namespace, rel.Name, revision, releaseUID, wire.EventObjectCreated, wire.EventTypeNormal, "Created",
			fmt.Sprintf("%s %s created", kind, obj.GetName()), ref, 0, nil)
		ev = &e
	case oldObj.GetGeneration() != obj.GetGeneration() && kind != "Pod":
		e := t.event(rel.Namespace, rel.Name, revision, releaseUID, wire.EventObjectUpdated, wire.EventTypeNormal, "Modified",
			fmt.Sprintf("%s %s modified", kind, obj.GetName()), ref, obj.GetGeneration(), nil)
		ev = &e
	}
	if ev != nil {
		t.sink.Enqueue(*ev)
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		var oldPod *corev1.Pod
		if oldObj != nil {
			oldPod, _ = oldObj.(*corev1.Pod)
		}
		if reason := podProblem(pod); reason != "" && (oldPod == nil || podProblem(oldPod) != reason) {
			h := fnv.New64a()
			_, _ = h.Write([]byte(reason))
			t.sink.Enqueue(t.event(rel.Namespace, rel.Name, revision, releaseUID, wire.EventKubernetes, wire.EventTypeWarning, "PodFailed",
				fmt.Sprintf("Pod %s failed (%s)", pod.Name, reason), ref, int64(h.Sum64()>>1), nil))
		}
	}
}

// podProblem names why a pod cannot run, or "".
func podProblem(p *corev1.Pod) string {
	if p.Status.Phase == corev1.PodFailed {
		return "Failed"
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ImagePullBackOff", "ErrImagePull", "CrashLoopBackOff", "CreateContainerConfigError", "InvalidImageName":
				return w.Reason
			}
		}
	}
	return ""
}

func releaseOf(obj metav1.Object) (release.Key, bool) {
	l := obj.GetLabels()
	name, ns := l[tugboatv1alpha1.LabelRelease], l[tugboatv1alpha1.LabelReleaseNamespace]
	if name == "" || ns == "" {
		return release.Key{}, false
	}
	return release.Key{Namespace: ns, Name: name}, true
}
