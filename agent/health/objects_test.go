package health

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Realistic workloads, shaped like what the API server returns for a chart
// "web" in namespace apps: typed objects converted to unstructured, as the
// agent's dynamic informers deliver them.

var created = metav1.NewTime(time.Now().Add(-5 * time.Minute))

func toUnstructured(t testing.TB, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// deployment returns Deployment apps/web with 3 replicas, of which updated
// and available are rolled out, observed at generation 2.
func deployment(name string, updated, available int32, conditions ...appsv1.DeploymentCondition) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name), Generation: 2, CreationTimestamp: created},
		Spec: appsv1.DeploymentSpec{
			Replicas:                ptr.To[int32](3),
			ProgressDeadlineSeconds: ptr.To[int32](600),
			Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration:  2,
			Replicas:            3,
			UpdatedReplicas:     updated,
			ReadyReplicas:       available,
			AvailableReplicas:   available,
			UnavailableReplicas: 3 - available,
			Conditions:          conditions,
		},
	}
}

func progressing(reason string, st corev1.ConditionStatus) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: st, Reason: reason,
		Message: `ReplicaSet "web-7d9f" is progressing.`}
}

func available(st corev1.ConditionStatus) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: st, Reason: "MinimumReplicasAvailable"}
}

func rolledOut(name string) *appsv1.Deployment {
	return deployment(name, 3, 3, available(corev1.ConditionTrue), progressing("NewReplicaSetAvailable", corev1.ConditionTrue))
}

// pod returns Pod apps/<name>, owned by ReplicaSet web-7d9f.
func pod(name string, phase corev1.PodPhase, ready bool, containers ...corev1.ContainerStatus) *corev1.Pod {
	readyStatus := corev1.ConditionFalse
	if ready {
		readyStatus = corev1.ConditionTrue
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: created,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f", UID: "uid-rs", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "ghcr.io/acme/web:2.3.1"}}},
		Status: corev1.PodStatus{
			Phase: phase,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: readyStatus},
			},
			ContainerStatuses: containers,
		},
	}
}

func running(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: true, Image: "ghcr.io/acme/web:2.3.1",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}}
}

func waiting(name, reason, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Image: "ghcr.io/acme/web:2.3.1",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}
}

func readyPod(name string) *corev1.Pod { return pod(name, corev1.PodRunning, true, running("web")) }

func job(name string, conditions ...batchv1.JobCondition) *batchv1.Job {
	start := metav1.NewTime(created.Add(time.Second))
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: created},
		Spec:       batchv1.JobSpec{Completions: ptr.To[int32](1), Parallelism: ptr.To[int32](1), BackoffLimit: ptr.To[int32](2)},
		Status:     batchv1.JobStatus{StartTime: &start, Conditions: conditions},
	}
}

func jobCondition(typ batchv1.JobConditionType, reason, message string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: message}
}

// statefulSet returns StatefulSet apps/db with 3 replicas, ready of them
// ready, current of them on the current revision.
func statefulSet(ready, updated int32, currentRevision, updateRevision string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db", UID: "uid-db", Generation: 3, CreationTimestamp: created},
		Spec: appsv1.StatefulSetSpec{
			Replicas:       ptr.To[int32](3),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
		},
		Status: appsv1.StatefulSetStatus{
			ObservedGeneration: 3,
			Replicas:           3,
			ReadyReplicas:      ready,
			AvailableReplicas:  ready,
			CurrentReplicas:    3 - updated,
			UpdatedReplicas:    updated,
			CurrentRevision:    currentRevision,
			UpdateRevision:     updateRevision,
		},
	}
}
