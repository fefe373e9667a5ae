package health

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"tugboat.dev/tugboat/api/wire"
)

func compute(t *testing.T, objs ...runtime.Object) Result {
	t.Helper()
	us := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		us[i] = toUnstructured(t, o)
	}
	return Compute(us)
}

func TestCompute_deploymentRollout(t *testing.T) {
	tests := []struct {
		name   string
		objs   []runtime.Object
		health wire.Health
		reason string
	}{
		{
			name: "progressing: new ReplicaSet scaling up",
			objs: []runtime.Object{
				deployment("web", 1, 1, available(corev1.ConditionFalse), progressing("ReplicaSetUpdated", corev1.ConditionTrue)),
				readyPod("web-7d9f-a"), pod("web-7d9f-b", corev1.PodPending, false, waiting("web", "ContainerCreating", "")),
			},
			health: wire.HealthInProgress,
			reason: "Deployment apps/web: Updated: 1/3 (and 1 more inprogress)",
		},
		{
			name:   "available: rollout complete",
			objs:   []runtime.Object{rolledOut("web"), readyPod("web-7d9f-a"), readyPod("web-7d9f-b"), readyPod("web-7d9f-c")},
			health: wire.HealthCurrent,
			reason: ReasonRolloutComplete,
		},
		{
			name: "progress deadline exceeded",
			objs: []runtime.Object{deployment("web", 3, 1, available(corev1.ConditionFalse),
				appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
					Message: `ReplicaSet "web-7d9f" has timed out progressing.`})},
			health: wire.HealthFailed,
			reason: "Deployment apps/web: Progress deadline exceeded",
		},
		{
			name:   "spec change not yet observed",
			objs:   []runtime.Object{func() runtime.Object { d := rolledOut("web"); d.Generation = 3; return d }()},
			health: wire.HealthInProgress,
			reason: "Deployment apps/web: Deployment generation is 3, but latest observed generation is 2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			res := compute(t, tt.objs...)
			g.Expect(res.Health).To(Equal(tt.health))
			g.Expect(res.Reason).To(Equal(tt.reason))
			g.Expect(res.Objects).To(HaveLen(len(tt.objs)))
		})
	}
}

func TestCompute_podsThatWillNotRecoverAreFailed(t *testing.T) {
	tests := []struct {
		name   string
		pod    *corev1.Pod
		reason string
	}{
		{"ImagePullBackOff", pod("web-7d9f-x", corev1.PodPending, false,
			waiting("web", "ImagePullBackOff", `Back-off pulling image "ghcr.io/acme/web:2.4.0-typo"`)),
			`Pod apps/web-7d9f-x: ImagePullBackOff: container "web": Back-off pulling image "ghcr.io/acme/web:2.4.0-typo"`},
		{"ErrImagePull", pod("web-7d9f-x", corev1.PodPending, false,
			waiting("web", "ErrImagePull", "rpc error: code = NotFound")),
			`Pod apps/web-7d9f-x: ErrImagePull: container "web": rpc error: code = NotFound`},
		{"CrashLoopBackOff while Running", pod("web-7d9f-x", corev1.PodRunning, false,
			running("sidecar"), waiting("web", "CrashLoopBackOff", "back-off 40s restarting failed container=web")),
			// kstatus's own rule, kept.
			`Pod apps/web-7d9f-x: Containers in CrashLoop state: web`},
		{"init container CrashLoopBackOff while Pending", func() *corev1.Pod {
			p := pod("web-7d9f-x", corev1.PodPending, false, waiting("web", "PodInitializing", ""))
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{waiting("migrate", "CrashLoopBackOff", "")}
			return p
		}(), `Pod apps/web-7d9f-x: CrashLoopBackOff: container "migrate"`},
		{"CreateContainerConfigError", pod("web-7d9f-x", corev1.PodPending, false,
			waiting("web", "CreateContainerConfigError", `secret "web-db" not found`)),
			`Pod apps/web-7d9f-x: CreateContainerConfigError: container "web": secret "web-db" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			// The Deployment alone would still say InProgress: kstatus waits
			// for the progress deadline.
			res := compute(t, deployment("web", 3, 2, available(corev1.ConditionTrue), progressing("ReplicaSetUpdated", corev1.ConditionTrue)),
				readyPod("web-7d9f-a"), readyPod("web-7d9f-b"), tt.pod)
			g.Expect(res.Health).To(Equal(wire.HealthFailed))
			g.Expect(res.Reason).To(Equal(tt.reason))
			g.Expect(res.Reason).To(HavePrefix("Pod apps/web-7d9f-x: "))
			g.Expect(res.Objects[0].Health).To(Equal(wire.HealthInProgress), "the Deployment")
		})
	}
}

func TestCompute_podRulesLeaveOthersAlone(t *testing.T) {
	g := NewWithT(t)
	pulling := pod("web-7d9f-x", corev1.PodPending, false, waiting("web", "ContainerCreating", ""))
	g.Expect(compute(t, pulling).Health).To(Equal(wire.HealthInProgress))

	terminating := pod("web-7d9f-x", corev1.PodRunning, false, waiting("web", "CrashLoopBackOff", ""))
	terminating.DeletionTimestamp = &metav1.Time{Time: created.Time}
	res := compute(t, terminating)
	g.Expect(res.Health).To(Equal(wire.HealthInProgress), "an old Pod going away is not a failure")
	g.Expect(res.Objects[0].Status).To(Equal(status.TerminatingStatus))

	evicted := pod("web-7d9f-x", corev1.PodFailed, false)
	evicted.Status.Reason = "Evicted"
	g.Expect(compute(t, evicted).Health).To(Equal(wire.HealthCurrent), "its ReplicaSet replaces it")

	bare := pod("smoke-test", corev1.PodFailed, false)
	bare.OwnerReferences = nil
	bare.Status.Reason, bare.Status.Message = "Error", "exit code 1"
	res = compute(t, bare)
	g.Expect(res.Health).To(Equal(wire.HealthFailed), "nothing replaces a bare Pod")
	g.Expect(res.Reason).To(Equal("Pod apps/smoke-test: Pod failed: Error: exit code 1"))
}

func TestCompute_jobs(t *testing.T) {
	g := NewWithT(t)
	res := compute(t, job("migrate", jobCondition(batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods")))
	g.Expect(res.Health).To(Equal(wire.HealthCurrent))
	g.Expect(res.Objects[0].Message).To(HavePrefix("Job Completed"))

	failed := job("migrate",
		jobCondition(batchv1.JobFailureTarget, "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
		jobCondition(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
	failed.Status.Failed = 3
	res = compute(t, failed)
	g.Expect(res.Health).To(Equal(wire.HealthFailed))
	g.Expect(res.Reason).To(Equal("Job apps/migrate: Job Failed. failed: 3/1"))

	failing := job("migrate", jobCondition(batchv1.JobFailureTarget, "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
	res = compute(t, failing)
	g.Expect(res.Health).To(Equal(wire.HealthFailed))
	g.Expect(res.Reason).To(Equal("Job apps/migrate: Job failing: BackoffLimitExceeded Job has reached the specified backoff limit"))

	notStarted := job("migrate")
	notStarted.Status.StartTime = nil
	g.Expect(compute(t, notStarted).Health).To(Equal(wire.HealthInProgress))
}

func TestCompute_statefulSetRolling(t *testing.T) {
	g := NewWithT(t)
	res := compute(t, statefulSet(2, 1, "db-6c7d", "db-7f8e"))
	g.Expect(res.Health).To(Equal(wire.HealthInProgress))
	g.Expect(res.Reason).To(Equal("StatefulSet apps/db: Ready: 2/3"))

	res = compute(t, statefulSet(3, 1, "db-6c7d", "db-7f8e"))
	g.Expect(res.Health).To(Equal(wire.HealthInProgress))
	g.Expect(res.Reason).To(Equal("StatefulSet apps/db: current: 2/3"))

	res = compute(t, statefulSet(3, 0, "db-7f8e", "db-7f8e"))
	g.Expect(res.Health).To(Equal(wire.HealthCurrent))
}

func TestCompute_onlyWorkloadsCount(t *testing.T) {
	g := NewWithT(t)
	rs := &appsv1.ReplicaSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-7d9f", Generation: 1},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3)},
		Status:     appsv1.ReplicaSetStatus{ObservedGeneration: 1, Replicas: 1},
	}
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}

	res := compute(t, rs, svc, cm)
	g.Expect(res).To(Equal(Result{Health: wire.HealthCurrent, Reason: ReasonNoWorkloads, Objects: []ObjectStatus{}}))
	g.Expect(Compute(nil).Health).To(Equal(wire.HealthCurrent))
	g.Expect(Compute([]*unstructured.Unstructured{nil}).Reason).To(Equal(ReasonNoWorkloads))

	g.Expect(IsWorkload(schema.GroupKind{Group: "apps", Kind: "Deployment"})).To(BeTrue())
	g.Expect(IsWorkload(schema.GroupKind{Kind: "Pod"})).To(BeTrue())
	g.Expect(IsWorkload(schema.GroupKind{Group: "apps", Kind: "ReplicaSet"})).To(BeFalse())
	g.Expect(IsWorkload(schema.GroupKind{Group: "example.com", Kind: "Deployment"})).To(BeFalse())
}

func TestCompute_orderAndReason(t *testing.T) {
	g := NewWithT(t)
	res := compute(t,
		pod("web-7d9f-b", corev1.PodPending, false, waiting("web", "ImagePullBackOff", "")),
		readyPod("web-7d9f-a"),
		job("migrate", jobCondition(batchv1.JobFailed, "DeadlineExceeded", "")),
		statefulSet(3, 0, "db-1", "db-1"),
		deployment("web", 3, 3, available(corev1.ConditionFalse),
			appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}),
		pod("web-7d9f-c", corev1.PodPending, false, waiting("web", "ErrImagePull", "")),
	)
	var names []string
	for _, o := range res.Objects {
		names = append(names, o.String())
	}
	g.Expect(names).To(Equal([]string{"Deployment apps/web", "StatefulSet apps/db", "Job apps/migrate",
		"Pod apps/web-7d9f-a", "Pod apps/web-7d9f-b", "Pod apps/web-7d9f-c"}))
	g.Expect(res.Health).To(Equal(wire.HealthFailed))
	g.Expect(res.Reason).To(Equal(`Pod apps/web-7d9f-b: ImagePullBackOff: container "web" (and 3 more failed)`),
		"a failed Pod is the root cause and is named first")
	g.Expect(res.Objects[1].UID).To(Equal("uid-db"))
}

func TestCompute_reasonFitsTheWire(t *testing.T) {
	g := NewWithT(t)
	p := pod("web-7d9f-x", corev1.PodPending, false,
		waiting("web", "ErrImagePull", "line one\nline two\x00"+strings.Repeat("é", 600)))
	res := compute(t, p)
	g.Expect(res.Health).To(Equal(wire.HealthFailed))
	g.Expect(len(res.Reason)).To(BeNumerically("<=", wire.MaxHealthReasonLength))
	g.Expect(len(res.Reason)).To(BeNumerically(">", wire.MaxHealthReasonLength-utf8.UTFMax-len("…")), "cut no shorter than needed")
	g.Expect(utf8.ValidString(res.Reason)).To(BeTrue(), "no rune cut")
	g.Expect(res.Reason).To(HaveSuffix("…"))
	g.Expect(res.Reason).To(ContainSubstring("line one line two "))

	st := wire.ReleaseState{Namespace: "apps", Release: "web", Chart: "web", ChartVersion: "1.4.0", Revision: 1,
		Status: wire.StatusDeployed, Health: res.Health, HealthReason: res.Reason}
	snap := wire.StateSnapshot{Spoke: "staging-1", AgentVersion: "v0", TakenAt: created.Time, Releases: []wire.ReleaseState{st}}
	g.Expect(snap.Validate()).To(Succeed())
}

func TestCompute_malformedObjectsDoNotPanic(t *testing.T) {
	g := NewWithT(t)
	bad := []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p1", "namespace": "apps"},
			"status": map[string]any{"phase": "Running", "containerStatuses": []any{"not a map", int64(42)}}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p2", "namespace": "apps"},
			"status": map[string]any{"phase": "Running", "containerStatuses": []any{map[string]any{"name": "web", "state": "x"}}}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p3", "namespace": "apps"},
			"status": map[string]any{"phase": "Exploded"}}},
		{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d", "generation": "two"},
			"status": "nope"}},
		{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "j"},
			"status": map[string]any{"conditions": []any{"x", map[string]any{"type": 1}}}}},
	}
	var res Result
	g.Expect(func() { res = Compute(bad) }).NotTo(Panic())
	g.Expect(res.Health).To(Equal(wire.HealthUnknown))
	g.Expect(res.Reason).To(HavePrefix("Deployment d: cannot compute status: "))
	for _, o := range res.Objects {
		g.Expect(o.Status).To(Equal(status.UnknownStatus), o.String()+": "+o.Message)
	}
	g.Expect(ObjectStatusOf(nil).Health).To(Equal(wire.HealthUnknown))
}
