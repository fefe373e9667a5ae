package agent

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"tugboat.dev/tugboat/agent/ownership"
)

// The informers' cache holds every tracked workload for as long as it
// exists, so what it keeps of each is most of the agent's memory: with
// 5,000 Pods, whole Pods (managed fields stripped) were about 60 % of the
// heap (docs/benchmarks.md). The transforms below keep only what the
// agent's readers use, and drop the rest before the object is stored:
//
//   - the tracker (agent/tracker): labels (the release), name, namespace,
//     UID and generation for its object events, and a Pod's phase and
//     container waiting reasons ("Pod failed (ImagePullBackOff)");
//   - the health computation (agent/health, kstatus): deletionTimestamp,
//     generation, creationTimestamp (an unschedulable Pod's grace),
//     controller ownerReferences (a bare failed Pod), the whole status but
//     what no rule reads, and the few spec fields kstatus reads: replicas,
//     progressDeadlineSeconds, a StatefulSet's updateStrategy, a Job's
//     parallelism and completions;
//   - the ownership index (agent/ownership): labels, UID, name, namespace,
//     and Helm's release annotations, which win over the labels.
//
// Pod templates, container specs, volumes, other annotations (among them
// kubectl's last-applied-configuration), finalizers, IPs and images are
// dropped. A reader that needs more must be added here: the transform tests
// check that health and events are the same on whole and trimmed objects.

// cacheTransform returns the transform for the informer of obj's type, or
// nil for types kept whole (managed fields are stripped by the cache's
// default transform either way).
func cacheTransform(obj any) toolscache.TransformFunc {
	switch obj.(type) {
	case *corev1.Pod:
		return transformPod
	case *appsv1.Deployment:
		return transformDeployment
	case *appsv1.StatefulSet:
		return transformStatefulSet
	case *appsv1.DaemonSet:
		return transformDaemonSet
	case *appsv1.ReplicaSet:
		return transformReplicaSet
	case *batchv1.Job:
		return transformJob
	}
	return nil
}

// The decoder allocates every string, map and slice of an object anew, for
// every object and every update, though most repeat: the Pods of a
// ReplicaSet have the same namespace, labels and owner, and conditions and
// containers the same types, reasons and names. The transforms intern them,
// so that one copy serves every object in the cache. Interned label maps and
// owner slices are shared between objects: like anything the informers hold,
// they must not be modified (the cache's Get and List return deep copies).
// Each table forgets everything when it holds its maximum, so values of the
// past (old pod-template-hashes) cannot pile up.
var (
	strs      = interner[string]{max: 20_000}
	labelSets = interner[map[string]string]{max: 5_000}
	ownerSets = interner[[]metav1.OwnerReference]{max: 5_000}
)

type interner[V any] struct {
	mu  sync.Mutex
	max int
	m   map[string]V
}

// intern returns the value interned for key, interning mk() first when
// there is none.
func (in *interner[V]) intern(key string, mk func() V) V {
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[key]; ok {
		return v
	}
	if in.m == nil || len(in.m) >= in.max {
		in.m = make(map[string]V)
	}
	v := mk()
	in.m[key] = v
	return v
}

// str interns s.
func str(s string) string {
	if s == "" {
		return ""
	}
	return strs.intern(s, func() string { return s })
}

// internLabels returns a shared copy of labels (annotations alike).
func internLabels(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(labels))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return labelSets.intern(b.String(), func() map[string]string {
		out := make(map[string]string, len(labels))
		for k, v := range labels {
			out[str(k)] = str(v)
		}
		return out
	})
}

// internOwners returns a shared copy of refs.
func internOwners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return nil
	}
	var b strings.Builder
	for _, r := range refs {
		fmt.Fprintf(&b, "%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00", r.APIVersion, r.Kind, r.Name, r.UID, boolKey(r.Controller), boolKey(r.BlockOwnerDeletion))
	}
	return ownerSets.intern(b.String(), func() []metav1.OwnerReference {
		out := make([]metav1.OwnerReference, len(refs))
		for i, r := range refs {
			out[i] = metav1.OwnerReference{
				APIVersion: str(r.APIVersion), Kind: str(r.Kind), Name: str(r.Name), UID: types.UID(str(string(r.UID))),
				Controller: r.Controller, BlockOwnerDeletion: r.BlockOwnerDeletion,
			}
		}
		return out
	})
}

func boolKey(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "t"
	}
	return "f"
}

// trimMeta keeps the metadata the agent reads.
func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	m.Finalizers = nil
	m.GenerateName = ""
	m.Namespace = str(m.Namespace)
	var kept map[string]string
	for _, k := range []string{ownership.AnnotationHelmReleaseName, ownership.AnnotationHelmReleaseNamespace} {
		if v, ok := m.Annotations[k]; ok {
			if kept == nil {
				kept = make(map[string]string, 2)
			}
			kept[k] = v
		}
	}
	m.Annotations = internLabels(kept)
	m.Labels = internLabels(m.Labels)
	m.OwnerReferences = internOwners(m.OwnerReferences)
}

func transformPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone
	}
	trimMeta(&p.ObjectMeta)
	p.Spec = corev1.PodSpec{}
	s := &p.Status
	s.Phase = corev1.PodPhase(str(string(s.Phase)))
	s.Conditions = trimPodConditions(s.Conditions)
	s.InitContainerStatuses = trimContainerStatuses(s.InitContainerStatuses)
	s.ContainerStatuses = trimContainerStatuses(s.ContainerStatuses)
	s.EphemeralContainerStatuses = nil
	s.HostIP, s.HostIPs, s.PodIP, s.PodIPs = "", nil, "", nil
	s.NominatedNodeName = ""
	s.StartTime = nil
	s.QOSClass = ""
	s.Resize = ""
	s.ResourceClaimStatuses = nil
	s.ExtendedResourceClaimStatus = nil
	return p, nil
}

// podConditionsRead are the Pod conditions a reader looks at: kstatus
// reads Ready (a Running Pod) and PodScheduled (Unschedulable), and on any
// object Reconciling and Stalled.
var podConditionsRead = map[corev1.PodConditionType]bool{
	corev1.PodReady: true, corev1.PodScheduled: true, "Reconciling": true, "Stalled": true,
}

// trimPodConditions keeps the conditions read, with their type, status,
// reason and message; no reader uses the times.
func trimPodConditions(in []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range in {
		if !podConditionsRead[c.Type] {
			continue
		}
		if out == nil {
			out = make([]corev1.PodCondition, 0, 2)
		}
		out = append(out, corev1.PodCondition{
			Type: corev1.PodConditionType(str(string(c.Type))), Status: corev1.ConditionStatus(str(string(c.Status))),
			Reason: str(c.Reason), Message: c.Message,
		})
	}
	return out
}

// trimContainerStatuses keeps each container's name, state (a waiting
// reason and message decide Failed), readiness and restarts; images, IDs,
// the last state, resources and mounts go.
func trimContainerStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, cs := range in {
		st := cs.State
		if w := st.Waiting; w != nil {
			st.Waiting = &corev1.ContainerStateWaiting{Reason: str(w.Reason), Message: w.Message}
		}
		out[i] = corev1.ContainerStatus{Name: str(cs.Name), State: st, Ready: cs.Ready, RestartCount: cs.RestartCount}
	}
	return out
}

func transformDeployment(obj any) (any, error) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return obj, nil
	}
	trimMeta(&d.ObjectMeta)
	d.Spec = appsv1.DeploymentSpec{
		Replicas: d.Spec.Replicas, Strategy: appsv1.DeploymentStrategy{Type: d.Spec.Strategy.Type},
		MinReadySeconds: d.Spec.MinReadySeconds, Paused: d.Spec.Paused,
		ProgressDeadlineSeconds: d.Spec.ProgressDeadlineSeconds,
	}
	return d, nil
}

func transformStatefulSet(obj any) (any, error) {
	s, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return obj, nil
	}
	trimMeta(&s.ObjectMeta)
	s.Spec = appsv1.StatefulSetSpec{
		Replicas: s.Spec.Replicas, UpdateStrategy: s.Spec.UpdateStrategy, MinReadySeconds: s.Spec.MinReadySeconds,
	}
	return s, nil
}

func transformDaemonSet(obj any) (any, error) {
	d, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return obj, nil
	}
	trimMeta(&d.ObjectMeta)
	d.Spec = appsv1.DaemonSetSpec{UpdateStrategy: d.Spec.UpdateStrategy, MinReadySeconds: d.Spec.MinReadySeconds}
	return d, nil
}

// transformReplicaSet keeps metadata, replicas and status: ReplicaSets are
// tracked for their events and as owners (the index), not for health.
func transformReplicaSet(obj any) (any, error) {
	r, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return obj, nil
	}
	trimMeta(&r.ObjectMeta)
	r.Spec = appsv1.ReplicaSetSpec{Replicas: r.Spec.Replicas, MinReadySeconds: r.Spec.MinReadySeconds}
	return r, nil
}

// transformJob keeps the Job's spec but its Pod template and selector.
func transformJob(obj any) (any, error) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	trimMeta(&j.ObjectMeta)
	j.Spec.Template = corev1.PodTemplateSpec{}
	j.Spec.Selector = nil
	j.Spec.PodFailurePolicy = nil
	return j, nil
}
