package health

import (
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tugboat.dev/tugboat/api/wire"
)

// Conditions as helm-controller v1.6 writes them (internal/reconcile:
// atomic_release.go summarize, upgrade.go, rollback_remediation.go).
var (
	readyUpgraded = hrCond(fluxmeta.ReadyCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason,
		"Helm upgrade succeeded for release apps/web.v3 with chart web@1.4.0")
	releasedUpgraded = hrCond(helmv2.ReleasedCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason,
		"Helm upgrade succeeded for release apps/web.v3 with chart web@1.4.0")
	readyUpgradeFailed = hrCond(fluxmeta.ReadyCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason,
		"Helm upgrade failed for release apps/web with chart web@1.4.0: context deadline exceeded")
	releasedUpgradeFailed = hrCond(helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason,
		"Helm upgrade failed for release apps/web with chart web@1.4.0: context deadline exceeded")
	stalledRetries = hrCond(fluxmeta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded",
		"Failed to upgrade after 1 attempt(s)")
	remediatedRollback = hrCond(helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.RollbackSucceededReason,
		"Helm rollback to previous release apps/web.v2 with chart web@1.3.0 succeeded")
	reconcilingRetry = hrCond(fluxmeta.ReconcilingCondition, metav1.ConditionTrue, "ProgressingWithRetry",
		"Detected failure, retrying upgrade")
	reconcilingRunning = hrCond(fluxmeta.ReconcilingCondition, metav1.ConditionTrue, fluxmeta.ProgressingReason,
		"Running 'upgrade' action with timeout of 5m0s")
	// readyRemediated is Ready as helm-controller summarizes it after a
	// rollback remediation: from Remediated, an error, whose message says
	// nothing of the failure (Released=False holds it).
	readyRemediated = hrCond(fluxmeta.ReadyCondition, metav1.ConditionFalse, helmv2.RollbackSucceededReason,
		"Helm rollback to previous release apps/web.v2 with chart web@1.3.0 succeeded")
	// reconcilingAfterRemediation is Reconciling as helm-controller keeps it
	// when it will retry after a remediation (ErrMustRequeue): Ready's
	// message.
	reconcilingAfterRemediation = hrCond(fluxmeta.ReconcilingCondition, metav1.ConditionTrue, "ProgressingWithRetry",
		"Helm rollback to previous release apps/web.v2 with chart web@1.3.0 succeeded")
	// reconcilingRoutine is what helm-controller sets at the start of every
	// reconcile, before it knows whether anything changed
	// (internal/controller: reconcileRelease).
	reconcilingRoutine = hrCond(fluxmeta.ReconcilingCondition, metav1.ConditionTrue, fluxmeta.ProgressingReason,
		"Fulfilling prerequisites")
	readyProgressing = hrCond(fluxmeta.ReadyCondition, metav1.ConditionUnknown, fluxmeta.ProgressingReason,
		"Running 'upgrade' action with timeout of 5m0s")
)

// stalledMessage is what the agent reports of a HelmRelease that stalled
// after readyUpgradeFailed.
const stalledMessage = "Failed to upgrade after 1 attempt(s); Helm upgrade failed for release apps/web with chart web@1.4.0: context deadline exceeded"

func hrCond(t string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: 2}
}

func hr(generation, observed int64, suspend bool, conds ...metav1.Condition) *helmv2.HelmRelease {
	o := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: generation}}
	o.Spec.Suspend = suspend
	o.Status.ObservedGeneration = observed
	o.Status.LastAttemptedRevision = "1.4.0"
	o.Status.Conditions = conds
	return o
}

// released is o with the Helm release of chartVersion as the latest
// entry of its status.history, as helm-controller records it.
func released(o *helmv2.HelmRelease, chartVersion string) *helmv2.HelmRelease {
	o.Status.History = helmv2.Snapshots{{Name: "web", Namespace: "apps", Version: 3, ChartName: "web", ChartVersion: chartVersion, Status: "deployed"}}
	return o
}

func TestHelmReleaseStatus(t *testing.T) {
	tests := []struct {
		name string
		hr   *helmv2.HelmRelease
		want wire.HelmReleaseStatus
	}{
		{"upgraded", hr(2, 2, false, readyUpgraded, releasedUpgraded), wire.HelmReleaseStatus{
			Ready: wire.ConditionTrue, Reason: "UpgradeSucceeded", Message: readyUpgraded.Message,
			ObservedGeneration: 2, LastAttemptedRevision: "1.4.0",
		}},
		{"retries exceeded: Stalled's reason wins, its message goes first", hr(2, 2, false, readyUpgradeFailed, releasedUpgradeFailed, stalledRetries, remediatedRollback), wire.HelmReleaseStatus{
			Ready: wire.ConditionFalse, Reason: "RetriesExceeded", Message: stalledMessage, Stalled: true,
			ObservedGeneration: 2, LastAttemptedRevision: "1.4.0",
		}},
		{"remediated and stalled, as helm-controller v1.6 leaves it: the failure, then the rollback", hr(2, 2, false, readyRemediated, releasedUpgradeFailed, remediatedRollback, stalledRetries), wire.HelmReleaseStatus{
			Ready: wire.ConditionFalse, Reason: "RetriesExceeded", Stalled: true,
			Message:            "Failed to upgrade after 1 attempt(s); " + releasedUpgradeFailed.Message + "; " + readyRemediated.Message,
			ObservedGeneration: 2, LastAttemptedRevision: "1.4.0",
		}},
		{"remediated, to retry: the failure, then the rollback", hr(2, 2, false, readyRemediated, releasedUpgradeFailed, remediatedRollback, reconcilingAfterRemediation), wire.HelmReleaseStatus{
			Ready: wire.ConditionFalse, Reason: "RollbackSucceeded", Reconciling: true,
			Message:            releasedUpgradeFailed.Message + "; " + readyRemediated.Message,
			ObservedGeneration: 2, LastAttemptedRevision: "1.4.0",
		}},
		{"failed, retrying", hr(2, 2, false, readyUpgradeFailed, releasedUpgradeFailed, remediatedRollback, reconcilingRetry), wire.HelmReleaseStatus{
			Ready: wire.ConditionFalse, Reason: "UpgradeFailed", Message: readyUpgradeFailed.Message, Reconciling: true,
			ObservedGeneration: 2, LastAttemptedRevision: "1.4.0",
		}},
		{"a new generation is not stalled yet", hr(3, 2, false, readyUpgradeFailed, stalledRetries), wire.HelmReleaseStatus{
			Ready: wire.ConditionFalse, Reason: "UpgradeFailed", Message: readyUpgradeFailed.Message, Reconciling: true,
			ObservedGeneration: 2, LastAttemptedRevision: "1.4.0",
		}},
		{"suspended: its last conditions stand", hr(3, 2, true, readyUpgradeFailed, stalledRetries), wire.HelmReleaseStatus{
			Ready: wire.ConditionFalse, Reason: "RetriesExceeded", Message: stalledMessage, Stalled: true, Suspended: true,
			ObservedGeneration: 2, LastAttemptedRevision: "1.4.0",
		}},
		{"a routine reconcile of the release that runs is not reported", released(hr(2, 2, false, readyUpgraded, releasedUpgraded, reconcilingRoutine), "1.4.0"), wire.HelmReleaseStatus{
			Ready: wire.ConditionTrue, Reason: "UpgradeSucceeded", Message: readyUpgraded.Message,
			ObservedGeneration: 2, LastAttemptedRevision: "1.4.0",
		}},
		{"reconciling towards another chart version is reconciling", released(hr(2, 2, false, readyUpgraded, releasedUpgraded, reconcilingRoutine), "1.3.0"), wire.HelmReleaseStatus{
			Ready: wire.ConditionTrue, Reason: "UpgradeSucceeded", Message: readyUpgraded.Message, Reconciling: true,
			ObservedGeneration: 2, LastAttemptedRevision: "1.4.0",
		}},
		{"reconciling a new generation is reconciling", released(hr(3, 2, false, readyUpgraded, releasedUpgraded, reconcilingRoutine), "1.4.0"), wire.HelmReleaseStatus{
			Ready: wire.ConditionTrue, Reason: "UpgradeSucceeded", Message: readyUpgraded.Message, Reconciling: true,
			ObservedGeneration: 2, LastAttemptedRevision: "1.4.0",
		}},
		{"ready at an older generation, reconciling", released(hr(3, 3, false, readyUpgraded, releasedUpgraded, reconcilingRoutine), "1.4.0"), wire.HelmReleaseStatus{
			Ready: wire.ConditionTrue, Reason: "UpgradeSucceeded", Message: readyUpgraded.Message, Reconciling: true,
			ObservedGeneration: 3, LastAttemptedRevision: "1.4.0",
		}},
		{"upgrading the same chart version (values changed) is reconciling", released(hr(2, 2, false, readyProgressing, releasedUpgraded, reconcilingRunning), "1.4.0"), wire.HelmReleaseStatus{
			Ready: wire.ConditionUnknown, Reason: "Progressing", Message: readyProgressing.Message, Reconciling: true,
			ObservedGeneration: 2, LastAttemptedRevision: "1.4.0",
		}},
		{"no conditions yet", hr(1, 0, false), wire.HelmReleaseStatus{
			Ready: wire.ConditionUnknown, Reconciling: true, LastAttemptedRevision: "1.4.0",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(HelmReleaseStatus(tt.hr)).To(Equal(tt.want))
		})
	}
}

func TestHelmReleaseStatus_cleansForTheWire(t *testing.T) {
	g := NewWithT(t)
	o := hr(1, 1, false, hrCond(fluxmeta.ReadyCondition, "Maybe", "Some Reason", strings.Repeat("é", 2000)+"\x00"))
	o.Status.LastAttemptedRevision = "1.4.0 " + strings.Repeat("9", 100)
	st := HelmReleaseStatus(o)
	g.Expect(st.Ready).To(Equal(wire.ConditionUnknown))
	g.Expect(st.Reason).To(Equal("SomeReason"))
	g.Expect(len(st.Message)).To(BeNumerically("<=", wire.MaxMessageLength))
	g.Expect(st.Message).To(Equal(strings.Repeat("é", (wire.MaxMessageLength-len("…"))/2)+"…"), "cut on a rune boundary, marked")
	g.Expect(st.LastAttemptedRevision).To(HaveLen(wire.MaxVersionLength))
	s := wire.ReleaseState{Namespace: "apps", Release: "web", Chart: "web", ChartVersion: "1.4.0", Revision: 1,
		Status: wire.StatusDeployed, Health: wire.HealthCurrent,
		HelmRelease: &wire.HelmReleaseRef{Namespace: "apps", Name: "web"}, HelmReleaseStatus: &st}
	snap := wire.StateSnapshot{Spoke: "s", AgentVersion: "v1", TakenAt: metav1.Now().Time, Releases: []wire.ReleaseState{s}}
	g.Expect(snap.Validate()).To(Succeed())
}

func TestFoldHelmRelease(t *testing.T) {
	const name = "apps/web"
	status := func(o *helmv2.HelmRelease) wire.HelmReleaseStatus { return HelmReleaseStatus(o) }
	tests := []struct {
		name       string
		health     wire.Health
		reason     string
		st         wire.HelmReleaseStatus
		wantHealth wire.Health
		wantReason string
	}{
		{"ready: the workloads decide", wire.HealthCurrent, ReasonRolloutComplete,
			status(hr(2, 2, false, readyUpgraded, releasedUpgraded)), wire.HealthCurrent, ReasonRolloutComplete},
		{"ready, a workload failed", wire.HealthFailed, "Pod apps/web-x: ImagePullBackOff",
			status(hr(2, 2, false, readyUpgraded)), wire.HealthFailed, "Pod apps/web-x: ImagePullBackOff"},
		{"stalled is failed however healthy the workloads", wire.HealthCurrent, ReasonRolloutComplete,
			status(hr(2, 2, false, readyUpgradeFailed, releasedUpgradeFailed, stalledRetries, remediatedRollback)),
			wire.HealthFailed, "HelmRelease apps/web is stalled (RetriesExceeded): " + stalledMessage},
		{"stalled wins over a workload's failure", wire.HealthFailed, "Pod apps/web-x: CrashLoopBackOff",
			status(hr(2, 2, false, readyUpgradeFailed, stalledRetries)),
			wire.HealthFailed, "HelmRelease apps/web is stalled (RetriesExceeded): " + stalledMessage},
		{"failed without a retry is failed", wire.HealthCurrent, ReasonRolloutComplete,
			status(hr(2, 2, false, readyUpgradeFailed, releasedUpgradeFailed)),
			wire.HealthFailed, "HelmRelease apps/web failed (UpgradeFailed): " + readyUpgradeFailed.Message},
		{"failed and retrying is in progress", wire.HealthCurrent, ReasonRolloutComplete,
			status(hr(2, 2, false, readyUpgradeFailed, remediatedRollback, reconcilingRetry)),
			wire.HealthInProgress, "HelmRelease apps/web is reconciling (UpgradeFailed): " + readyUpgradeFailed.Message},
		{"upgrading, workloads still at the old revision", wire.HealthCurrent, ReasonRolloutComplete,
			status(hr(2, 2, false, readyProgressing, reconcilingRunning)),
			wire.HealthInProgress, "HelmRelease apps/web is reconciling (Progressing): Running 'upgrade' action with timeout of 5m0s"},
		{"upgrading, the workloads' progress says more", wire.HealthInProgress, "Deployment apps/web: 1 of 3 updated",
			status(hr(2, 2, false, readyProgressing, reconcilingRunning)), wire.HealthInProgress, "Deployment apps/web: 1 of 3 updated"},
		{"a new generation not reconciled yet", wire.HealthCurrent, ReasonRolloutComplete,
			status(hr(3, 2, false, readyUpgraded)),
			wire.HealthInProgress, "HelmRelease apps/web is reconciling (UpgradeSucceeded): " + readyUpgraded.Message},
		{"a stale stall of an older generation is not a failure", wire.HealthCurrent, ReasonRolloutComplete,
			status(hr(3, 2, false, readyUpgradeFailed, stalledRetries)),
			wire.HealthInProgress, "HelmRelease apps/web is reconciling (UpgradeFailed): " + readyUpgradeFailed.Message},
		{"a routine reconcile (every spec.interval) keeps the workloads' health", wire.HealthCurrent, ReasonRolloutComplete,
			status(released(hr(2, 2, false, readyUpgraded, releasedUpgraded, reconcilingRoutine), "1.4.0")), wire.HealthCurrent, ReasonRolloutComplete},
		{"a reconcile towards another chart version is in progress", wire.HealthCurrent, ReasonRolloutComplete,
			status(released(hr(2, 2, false, readyUpgraded, releasedUpgraded, reconcilingRoutine), "1.3.0")),
			wire.HealthInProgress, "HelmRelease apps/web is reconciling (UpgradeSucceeded): " + readyUpgraded.Message},
		{"no Ready condition", wire.HealthCurrent, ReasonNoWorkloads,
			wire.HelmReleaseStatus{Ready: wire.ConditionUnknown}, wire.HealthInProgress, "HelmRelease apps/web is not ready yet"},
		{"suspended and ready: healthy", wire.HealthCurrent, ReasonRolloutComplete,
			status(hr(3, 2, true, readyUpgraded)), wire.HealthCurrent, ReasonRolloutComplete},
		{"suspended and stalled: failed", wire.HealthCurrent, ReasonRolloutComplete,
			status(hr(2, 2, true, readyUpgradeFailed, stalledRetries)),
			wire.HealthFailed, "HelmRelease apps/web is stalled (RetriesExceeded): " + stalledMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h, reason := FoldHelmRelease(tt.health, tt.reason, tt.st, name)
			g.Expect(h).To(Equal(tt.wantHealth))
			g.Expect(reason).To(Equal(tt.wantReason))
		})
	}
}

func TestFoldHelmRelease_reasonFitsTheWire(t *testing.T) {
	g := NewWithT(t)
	st := wire.HelmReleaseStatus{Ready: wire.ConditionFalse, Reason: "UpgradeFailed", Message: strings.Repeat("x", wire.MaxMessageLength) + "\nmore"}
	h, reason := FoldHelmRelease(wire.HealthCurrent, "", st, "apps/web")
	g.Expect(h).To(Equal(wire.HealthFailed))
	g.Expect(reason).To(HaveLen(wire.MaxHealthReasonLength))
	g.Expect(reason).To(HaveSuffix("…"))
	g.Expect(reason).NotTo(ContainSubstring("\n"))
}
