package health

import (
	"fmt"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"tugboat.dev/tugboat/api/wire"
)

// failedWaitingReasons are container waiting reasons tugboat calls Failed.
// This rule is tugboat's, not kstatus's: kstatus calls a Pod in them
// InProgress (only CrashLoopBackOff of a Running Pod is Failed there), so a
// Pending Pod whose image cannot be pulled would keep a release InProgress
// until its Deployment's progress deadline (ten minutes by default), and a
// Job's or a bare Pod's forever. They rarely clear by themselves (a wrong
// tag, a missing Secret); when one does (a registry hiccup behind
// ErrImagePull), the next computation sees the Pod recover, so reporting
// Failed early is the cheaper mistake.
var failedWaitingReasons = map[string]bool{
	"ImagePullBackOff":           true,
	"ErrImagePull":               true,
	"InvalidImageName":           true,
	"CrashLoopBackOff":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// ObjectStatusOf computes the status of one object with kstatus and
// tugboat's rules (see the package doc). It works on any kind, workload or
// not, and never panics: a status kstatus cannot compute (a malformed
// object, or nil) is Unknown.
func ObjectStatusOf(u *unstructured.Unstructured) ObjectStatus {
	if u == nil {
		return ObjectStatus{Status: status.UnknownStatus, Health: wire.HealthUnknown, Message: "no object"}
	}
	st := ObjectStatus{
		Kind:      u.GetKind(),
		Namespace: u.GetNamespace(),
		Name:      u.GetName(),
		UID:       string(u.GetUID()),
	}
	st.Status, st.Message = computeStatus(u)
	st.Health = healthOf(st.Status)
	return st
}

// computeStatus runs kstatus and then tugboat's rules. Both read status
// fields with unchecked type assertions here and there (kstatus) or deep
// copies that panic on values JSON cannot hold (unstructured), so a
// malformed object is recovered into Unknown.
func computeStatus(u *unstructured.Unstructured) (s status.Status, msg string) {
	defer func() {
		if p := recover(); p != nil {
			s, msg = status.UnknownStatus, fmt.Sprintf("cannot compute status: malformed object: %v", p)
		}
	}()
	res, err := status.Compute(u)
	if err != nil {
		return status.UnknownStatus, "cannot compute status: " + err.Error()
	}
	if res.Status != status.TerminatingStatus && res.Status != status.FailedStatus {
		if msg, failed := tugboatFailed(u); failed {
			return status.FailedStatus, msg
		}
	}
	return res.Status, res.Message
}

func healthOf(s status.Status) wire.Health {
	switch s {
	case status.CurrentStatus:
		return wire.HealthCurrent
	case status.FailedStatus:
		return wire.HealthFailed
	case status.InProgressStatus, status.TerminatingStatus:
		return wire.HealthInProgress
	default:
		return wire.HealthUnknown
	}
}

// tugboatFailed applies the rules kstatus lacks; it reports whether u has
// failed, and why.
func tugboatFailed(u *unstructured.Unstructured) (string, bool) {
	obj := u.UnstructuredContent()
	switch u.GroupVersionKind().GroupKind().String() {
	case "Pod":
		phase, _, _ := unstructured.NestedString(obj, "status", "phase")
		switch phase {
		case "Pending", "Running", "":
			return failedContainer(obj)
		case "Failed":
			// kstatus calls a failed Pod Current ("completed, but not
			// successfully"): right when a controller owns it (it will be
			// replaced, or its Job speaks for it), wrong for a bare Pod,
			// which nothing will replace.
			if !hasControllerOwner(u) {
				return podFailedMessage(obj), true
			}
		}
	case "Job.batch":
		// kstatus knows the Failed condition. Kubernetes 1.31+ first sets
		// FailureTarget (the Job is failing; its pods are being
		// terminated), during which kstatus says Current.
		if c, ok := condition(obj, "FailureTarget"); ok {
			return "Job failing: " + strings.TrimSpace(c.reason+" "+c.message), true
		}
	}
	return "", false
}

// failedContainer finds the first init or app container waiting for a reason
// in failedWaitingReasons.
func failedContainer(obj map[string]any) (string, bool) {
	for _, field := range []string{"initContainerStatuses", "containerStatuses"} {
		list, _, _ := unstructured.NestedSlice(obj, "status", field)
		for _, item := range list {
			cs, ok := item.(map[string]any)
			if !ok {
				continue
			}
			reason, _, _ := unstructured.NestedString(cs, "state", "waiting", "reason")
			if !failedWaitingReasons[reason] {
				continue
			}
			name, _, _ := unstructured.NestedString(cs, "name")
			msg := fmt.Sprintf("%s: container %q", reason, name)
			if detail, _, _ := unstructured.NestedString(cs, "state", "waiting", "message"); detail != "" {
				msg += ": " + detail
			}
			return msg, true
		}
	}
	return "", false
}

func podFailedMessage(obj map[string]any) string {
	msg := "Pod failed"
	if reason, _, _ := unstructured.NestedString(obj, "status", "reason"); reason != "" {
		msg += ": " + reason
	}
	if detail, _, _ := unstructured.NestedString(obj, "status", "message"); detail != "" {
		msg += ": " + detail
	}
	return msg
}

func hasControllerOwner(u *unstructured.Unstructured) bool {
	for _, ref := range u.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

type cond struct{ reason, message string }

// condition returns the status condition of the given type when it is True.
func condition(obj map[string]any, typ string) (cond, bool) {
	list, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
	for _, item := range list {
		c, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if t, _, _ := unstructured.NestedString(c, "type"); t != typ {
			continue
		}
		if s, _, _ := unstructured.NestedString(c, "status"); s != "True" {
			continue
		}
		reason, _, _ := unstructured.NestedString(c, "reason")
		message, _, _ := unstructured.NestedString(c, "message")
		return cond{reason, message}, true
	}
	return cond{}, false
}
