package health

import (
	"strings"
	"unicode"
	"unicode/utf8"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tugboat.dev/tugboat/api/clip"
	"tugboat.dev/tugboat/api/wire"
)

// HelmReleaseStatus reads what a Flux HelmRelease's status says, the way
// helm-controller v1 writes it: the Ready condition's status, reason and
// message (when Ready=False after a remediation, the failure the Released
// or TestSuccess condition holds goes first: failureCause); Stalled=True
// (helm-controller gave up, e.g. RetriesExceeded: its reason then wins,
// and its message goes first); Reconciling=True, unless it is a routine
// reconcile of the revision that runs (routineReconcile); spec.suspend;
// and status.lastAttemptedRevision.
//
// A HelmRelease whose generation helm-controller has not observed yet
// (status.observedGeneration behind metadata.generation) and that is not
// suspended counts as Reconciling and never as Stalled: its conditions
// speak of a spec that is gone (kstatus reads Flux objects the same way).
// Reasons and messages are cleaned to fit the wire protocol.
func HelmReleaseStatus(hr *helmv2.HelmRelease) wire.HelmReleaseStatus {
	st := wire.HelmReleaseStatus{
		Ready:                 wire.ConditionUnknown,
		Suspended:             hr.Spec.Suspend,
		ObservedGeneration:    max(hr.Status.ObservedGeneration, 0),
		LastAttemptedRevision: token(hr.Status.LastAttemptedRevision, wire.MaxVersionLength),
	}
	conds := hr.Status.Conditions
	if c := apimeta.FindStatusCondition(conds, fluxmeta.ReadyCondition); c != nil {
		switch c.Status {
		case metav1.ConditionTrue, metav1.ConditionFalse:
			st.Ready = wire.ConditionStatus(c.Status)
		}
		st.Reason, st.Message = c.Reason, c.Message
	}
	if st.Ready == wire.ConditionFalse {
		st.Message = join(failureCause(conds, st.Message), st.Message)
	}
	stale := !hr.Spec.Suspend && hr.Generation > hr.Status.ObservedGeneration
	if c := apimeta.FindStatusCondition(conds, fluxmeta.StalledCondition); c != nil && c.Status == metav1.ConditionTrue && !stale {
		st.Stalled = true
		// "Failed to upgrade after 1 attempt(s); Helm upgrade failed for
		// release ...: <cause>; Helm rollback to previous release ...
		// succeeded": why it gave up, what failed, and what it did then.
		st.Message = join(c.Message, st.Message)
		st.Reason = c.Reason
	}
	if c := apimeta.FindStatusCondition(conds, fluxmeta.ReconcilingCondition); (c != nil && c.Status == metav1.ConditionTrue && !routineReconcile(hr)) || stale {
		st.Reconciling = true
	}
	st.Reason = token(st.Reason, wire.MaxReasonLength)
	st.Message = text(st.Message, wire.MaxMessageLength)
	return st
}

// failureCause returns what failed, when the Ready condition (whose
// message is ready) does not say it: after a remediation helm-controller
// summarizes Ready from the Remediated condition ("Helm rollback to
// previous release apps/web.v2 with chart web@1.3.0 succeeded"), and the
// failure that caused it stays in Released=False (or TestSuccess=False).
func failureCause(conds []metav1.Condition, ready string) string {
	for _, typ := range []string{helmv2.ReleasedCondition, helmv2.TestSuccessCondition} {
		if c := apimeta.FindStatusCondition(conds, typ); c != nil && c.Status == metav1.ConditionFalse && c.Message != ready {
			return c.Message
		}
	}
	return ""
}

// join joins the non-empty, distinct parts of a message with "; ".
func join(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" && (len(kept) == 0 || kept[len(kept)-1] != p) {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "; ")
}

// routineReconcile reports whether hr's Reconciling=True is one of
// helm-controller's routine reconciles, which change nothing: it sets
// Reconciling=True at the start of every reconcile (each spec.interval,
// "Fulfilling prerequisites") and removes it when it finds the release in
// sync, milliseconds later, leaving Ready as it was. Such a HelmRelease is
// Ready=True at its current generation (status.observedGeneration and the
// Ready condition's both metadata.generation) and attempts the revision it
// runs (status.lastAttemptedRevision is the chart version of the latest
// status.history entry): it is healthy, and the window is not reported.
// Any real change shows otherwise: a new generation leaves them behind, and
// before an install, upgrade or rollback helm-controller sets Ready=Unknown
// ("Running 'upgrade' action"), and Ready=False while it retries.
func routineReconcile(hr *helmv2.HelmRelease) bool {
	ready := apimeta.FindStatusCondition(hr.Status.Conditions, fluxmeta.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionTrue ||
		ready.ObservedGeneration != hr.Generation || hr.Status.ObservedGeneration != hr.Generation {
		return false
	}
	latest := hr.Status.History.Latest()
	return latest != nil && latest.ChartVersion == hr.Status.LastAttemptedRevision
}

// FoldHelmRelease folds what the HelmRelease name (namespace/name) says
// into the health h (and its reason) computed from the release's
// workloads, so that a release helm-controller failed is never healthy,
// whatever its workloads say:
//
//   - Stalled: Failed, with the Stalled condition's reason and message;
//   - Ready=False while not reconciling (the last attempt failed and no
//     retry is under way): Failed, with the Ready condition's;
//   - reconciling (a retry, an upgrade under way, a new generation), or
//     Ready=Unknown: at best InProgress; the workloads' own failure or
//     progress, being more precise, is kept;
//   - Ready=True: the workloads' health.
//
// Suspension changes nothing here: the conditions of a suspended
// HelmRelease are those of its last reconciliation, and the release is
// reported as suspended beside its health (wire.HelmReleaseStatus).
func FoldHelmRelease(h wire.Health, reason string, st wire.HelmReleaseStatus, name string) (wire.Health, string) {
	what := "HelmRelease " + name
	explain := func(state string) string {
		s := what + " " + state
		if st.Reason != "" {
			s += " (" + st.Reason + ")"
		}
		if st.Message != "" {
			s += ": " + st.Message
		}
		return clean(s)
	}
	switch {
	case st.Stalled:
		return wire.HealthFailed, explain("is stalled")
	case st.Ready == wire.ConditionFalse && !st.Reconciling:
		return wire.HealthFailed, explain("failed")
	case h == wire.HealthFailed || h == wire.HealthInProgress:
		return h, reason
	case st.Reconciling:
		return wire.HealthInProgress, explain("is reconciling")
	case st.Ready != wire.ConditionTrue:
		return wire.HealthInProgress, explain("is not ready yet")
	}
	return h, reason
}

// token makes s a wire token: no spaces or unprintable characters, at most
// n characters; empty when nothing printable is left.
func token(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n])
	}
	return s
}

// text makes s wire text: no control characters but newlines and tabs, at
// most n bytes (so as many characters at most), a cut marked (clip.String).
func text(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r == utf8.RuneError || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return clip.String(s, n)
}
