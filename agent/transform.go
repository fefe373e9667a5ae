package agent

import (
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

// strs interns the strings that objects repeat: namespaces, label keys and
// values (a ReplicaSet's Pods share all of theirs), owners, condition types
// and reasons, container names. The decoder allocates each anew for every
// object and every update; interned, one copy serves them all. It forgets
// everything when it holds maxInterned strings, so values of the past (old
// pod-template-hashes) cannot pile up.
var strs = interner{m: map[string]string{}}

const maxInterned = 20_000

type interner struct {
	mu sync.Mutex
	m  map[string]string
}

func (in *interner) get(s string) string {
	if s == "" {
		return ""
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if c, ok := in.m[s]; ok {
		return c
	}
	if len(in.m) >= maxInterned {
		clear(in.m)
	}
	in.m[s] = s
	return s
}

// trimMeta keeps the metadata the agent reads.
func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	m.Finalizers = nil
	m.GenerateName = ""
	m.Namespace = strs.get(m.Namespace)
	var kept map[string]string
	for _, k := range []string{ownership.AnnotationHelmReleaseName, ownership.AnnotationHelmReleaseNamespace} {
		if v, ok := m.Annotations[k]; ok {
			if kept == nil {
				kept = make(map[string]string, 2)
			}
			kept[strs.get(k)] = strs.get(v)
		}
	}
	m.Annotations = kept
	if len(m.Labels) > 0 {
		labels := make(map[string]string, len(m.Labels))
		for k, v := range m.Labels {
			labels[strs.get(k)] = strs.get(v)
		}
		m.Labels = labels
	}
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name, r.UID = strs.get(r.APIVersion), strs.get(r.Kind), strs.get(r.Name), types.UID(strs.get(string(r.UID)))
	}
}

func transformPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone
	}
	trimMeta(&p.ObjectMeta)
	p.Spec = corev1.PodSpec{}
	s := &p.Status
	s.Phase = corev1.PodPhase(strs.get(string(s.Phase)))
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
			Type: corev1.PodConditionType(strs.get(string(c.Type))), Status: corev1.ConditionStatus(strs.get(string(c.Status))),
			Reason: strs.get(c.Reason), Message: c.Message,
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
			st.Waiting = &corev1.ContainerStateWaiting{Reason: strs.get(w.Reason), Message: w.Message}
		}
		out[i] = corev1.ContainerStatus{Name: strs.get(cs.Name), State: st, Ready: cs.Ready, RestartCount: cs.RestartCount}
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
