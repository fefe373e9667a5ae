package health

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"tugboat.dev/tugboat/api/clip"
	"tugboat.dev/tugboat/api/wire"
)

// Reasons of a Result that is Current.
const (
	// ReasonRolloutComplete: every workload is Current.
	ReasonRolloutComplete = "rollout complete"
	// ReasonNoWorkloads: the release owns no workload, so nothing can be in
	// progress or fail.
	ReasonNoWorkloads = "no workloads"
)

// Result is the health of one release.
type Result struct {
	// Health is the aggregate: Failed if any workload failed, else
	// InProgress if any is still rolling out (or terminating), else Unknown
	// if the status of any could not be computed, else Current.
	Health wire.Health
	// Reason explains Health in one line of at most
	// wire.MaxHealthReasonLength characters, naming the workload that
	// decided it, e.g. "Pod apps/web-7d9f-x: ImagePullBackOff: ...".
	Reason string
	// Objects are the workloads considered, ordered by kind (Deployment,
	// StatefulSet, DaemonSet, Job, Pod), namespace and name.
	Objects []ObjectStatus
}

// ObjectStatus is the status of one workload.
type ObjectStatus struct {
	// Kind of the object, e.g. Deployment.
	Kind string
	// Namespace of the object.
	Namespace string
	// Name of the object.
	Name string
	// UID of the object.
	UID string
	// Status is the kstatus status after tugboat's rules: InProgress,
	// Current, Failed, Terminating or Unknown (kstatus could not compute
	// one).
	Status status.Status
	// Health is Status as a release health (Terminating is InProgress).
	Health wire.Health
	// Message is kstatus's message, or the rule's that overrode it.
	Message string
}

// String returns "Kind namespace/name".
func (o ObjectStatus) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// workloadRank lists the kinds that count, in the order Result.Objects
// reports them: owners before what they own.
var workloadRank = map[schema.GroupKind]int{
	{Group: "apps", Kind: "Deployment"}:  0,
	{Group: "apps", Kind: "StatefulSet"}: 1,
	{Group: "apps", Kind: "DaemonSet"}:   2,
	{Group: "batch", Kind: "Job"}:        3,
	{Group: "", Kind: "Pod"}:             4,
}

// IsWorkload reports whether objects of the group and kind count towards a
// release's health: apps Deployments, StatefulSets and DaemonSets, batch
// Jobs and core Pods.
func IsWorkload(gk schema.GroupKind) bool {
	_, ok := workloadRank[gk]
	return ok
}

// Compute returns the health of a release owning objs. Objects of other
// kinds than workloads (see IsWorkload) and nil entries are ignored; a
// release without workloads is Current. objs are not modified.
func Compute(objs []*unstructured.Unstructured) Result {
	type ranked struct {
		rank int
		st   ObjectStatus
	}
	var ws []ranked
	for _, u := range objs {
		if u == nil {
			continue
		}
		rank, ok := workloadRank[u.GroupVersionKind().GroupKind()]
		if !ok {
			continue
		}
		ws = append(ws, ranked{rank, ObjectStatusOf(u)})
	}
	slices.SortFunc(ws, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank),
			cmp.Compare(a.st.Namespace, b.st.Namespace), cmp.Compare(a.st.Name, b.st.Name))
	})
	res := Result{Objects: make([]ObjectStatus, len(ws))}
	for i := range ws {
		res.Objects[i] = ws[i].st
	}
	res.Health, res.Reason = aggregate(res.Objects)
	return res
}

// aggregate folds the workloads' health into the release's and names the
// workload that decided it.
func aggregate(objs []ObjectStatus) (wire.Health, string) {
	if len(objs) == 0 {
		return wire.HealthCurrent, ReasonNoWorkloads
	}
	for _, h := range []wire.Health{wire.HealthFailed, wire.HealthInProgress, wire.HealthUnknown} {
		var first *ObjectStatus
		n := 0
		for i := range objs {
			if objs[i].Health != h {
				continue
			}
			n++
			// A failed Pod is the root cause its Deployment's failure
			// (ProgressDeadlineExceeded) only hints at, so it is named first.
			// Otherwise the owner goes first: "Deployment apps/web: Updated:
			// 1/3" says more than one of its Pods.
			if first == nil || (h == wire.HealthFailed && objs[i].Kind == "Pod" && first.Kind != "Pod") {
				first = &objs[i]
			}
		}
		if first == nil {
			continue
		}
		reason := first.String() + ": " + first.Message
		if n > 1 {
			reason += fmt.Sprintf(" (and %d more %s)", n-1, strings.ToLower(string(h)))
		}
		return h, clean(reason)
	}
	return wire.HealthCurrent, ReasonRolloutComplete
}

// clean makes s fit wire's health reason: one line of printable characters,
// at most wire.MaxHealthReasonLength bytes (so as many characters at most),
// a cut marked (clip.String).
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return clip.String(s, wire.MaxHealthReasonLength)
}
