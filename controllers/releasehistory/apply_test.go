package releasehistory

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

func state(rev int, version string, status wire.ReleaseStatus, health wire.Health) *wire.ReleaseState {
	return &wire.ReleaseState{
		Namespace: "apps", Release: "web", Chart: "web", ChartVersion: version,
		Revision: rev, Status: status, Health: health,
	}
}

func event(rev int, seq int64, reason, msg string) *wire.Event {
	e := &wire.Event{
		Spoke: "s1", Namespace: "apps", Release: "web", Revision: rev, Kind: wire.EventObjectUpdated,
		Type: wire.EventTypeNormal, Reason: reason, Message: msg, Sequence: seq,
		Object: &wire.ObjectRef{Kind: "Deployment", Namespace: "apps", Name: "web", UID: "u1"},
		Time:   time.Date(2026, 11, 1, 10, 0, int(seq), 0, time.UTC),
	}
	e.ID = e.ComputeID()
	return e
}

func TestApplyState_newerRevisionBecomesCurrentOlderDoesNot(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	applyState(st, state(1, "1.0.0", wire.StatusDeployed, wire.HealthCurrent))
	applyState(st, state(2, "1.1.0", wire.StatusPendingUpgrade, wire.HealthInProgress))
	g.Expect(st.Current.Revision).To(Equal(int32(2)))
	// Helm marks revision 1 superseded after the upgrade: current stays 2.
	applyState(st, state(1, "1.0.0", wire.StatusSuperseded, wire.HealthCurrent))
	g.Expect(st.Current.Revision).To(Equal(int32(2)))
	g.Expect(st.Current.ChartVersion).To(Equal("1.1.0"))
	g.Expect(st.Revisions).To(HaveLen(2))
	g.Expect(st.Revisions[0].Revision).To(Equal(int32(2)), "newest first")
	g.Expect(st.Revisions[1].Status).To(Equal(tugboatv1alpha1.ReleaseStatusSuperseded))
}

func TestApplyState_unknownRevisionMatchesChartVersionOrAppends(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	g.Expect(applyState(st, state(0, "1.0.0", wire.StatusDeployed, wire.HealthCurrent))).To(Equal(revKey{1, 1}))
	g.Expect(applyState(st, state(0, "1.0.0", wire.StatusDeployed, wire.HealthCurrent))).To(Equal(revKey{1, 1}))
	g.Expect(applyState(st, state(0, "1.1.0", wire.StatusFailed, wire.HealthFailed))).To(Equal(revKey{1, 2}))
	g.Expect(applyState(st, state(0, "1.1.0", wire.StatusDeployed, wire.HealthCurrent))).To(Equal(revKey{1, 2}))
	g.Expect(st.Current.Status).To(Equal(tugboatv1alpha1.ReleaseStatusDeployed))
}

func TestApplyEvent_compactsRepeatsAndDeduplicates(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	applyState(st, state(1, "1.0.0", wire.StatusDeployed, wire.HealthCurrent))
	e1 := event(1, 1, "Modified", "Deployment web modified")
	g.Expect(applyEvent(st, e1, revKey{1, 1}, 40)).To(BeTrue())
	g.Expect(applyEvent(st, e1, revKey{1, 1}, 40)).To(BeFalse(), "same id twice")
	g.Expect(applyEvent(st, event(1, 2, "Modified", "Deployment web modified"), revKey{1, 1}, 40)).To(BeTrue())
	g.Expect(applyEvent(st, event(1, 3, "Modified", "Deployment web modified"), revKey{1, 1}, 40)).To(BeTrue())
	g.Expect(st.Revisions[0].Events).To(HaveLen(1))
	g.Expect(st.Revisions[0].Events[0].Count).To(Equal(int32(3)))
	g.Expect(applyEvent(st, event(1, 4, "RolloutComplete", "rollout complete"), revKey{1, 1}, 40)).To(BeTrue())
	g.Expect(st.Revisions[0].Events).To(HaveLen(2))
	g.Expect(st.LastEventTime.Time).To(Equal(time.Date(2026, 11, 1, 10, 0, 4, 0, time.UTC)))
}

func TestApplyEvent_boundsEventsAndUnknownRevision(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	g.Expect(applyEvent(st, event(3, 1, "X", "x"), revKey{1, 3}, 5)).To(BeFalse(), "no revision to attach to")
	applyState(st, state(2, "1.0.0", wire.StatusDeployed, wire.HealthCurrent))
	for i := 0; i < 20; i++ {
		g.Expect(applyEvent(st, event(3, int64(i), "Reason", strings.Repeat("m", i+1)), revKey{1, 3}, 5)).To(BeTrue())
	}
	g.Expect(st.Revisions[0].Events).To(HaveLen(5), "attached to revision 2, bounded")
	g.Expect(st.Revisions[0].Events[4].Message).To(HaveLen(20), "newest kept")
}

func TestTrim_revisionLimitAndSizeCap(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	for rev := 1; rev <= 15; rev++ {
		applyState(st, state(rev, "1.0.0", wire.StatusSuperseded, wire.HealthCurrent))
		for i := 0; i < 40; i++ {
			applyEvent(st, event(rev, int64(i), "Reason", strings.Repeat("x", 500)+string(rune('a'+i%26))), revKey{1, int32(rev)}, 40)
		}
	}
	trim(st, 10, 64<<10)
	g.Expect(st.Revisions).To(HaveLen(10))
	g.Expect(st.Revisions[0].Revision).To(Equal(int32(15)))
	g.Expect(size(st)).To(BeNumerically("<=", 64<<10))
	g.Expect(st.Revisions[0].Events).NotTo(BeEmpty(), "the newest revision's events go last")
}

func TestMarkUninstalled(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	g.Expect(markUninstalled(st)).To(BeFalse())
	applyState(st, state(1, "1.0.0", wire.StatusDeployed, wire.HealthCurrent))
	g.Expect(markUninstalled(st)).To(BeTrue())
	g.Expect(st.Current.Status).To(Equal(tugboatv1alpha1.ReleaseStatusUninstalled))
	g.Expect(markUninstalled(st)).To(BeFalse())
}

// TestApplyState_clipsAHealthReasonToItsLimitOnARuneBoundary: the schema
// holds a health reason to 512; a longer one (from an agent that sends
// characters, not bytes) is cut within the limit, as valid UTF-8, marked.
func TestApplyState_clipsAHealthReasonToItsLimitOnARuneBoundary(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	s := state(1, "1.0.0", wire.StatusDeployed, wire.HealthFailed)
	s.HealthReason = strings.Repeat("é", 500) // 1000 bytes
	applyState(st, s)
	reason := st.Current.HealthReason
	g.Expect(len(reason)).To(BeNumerically("<=", 512))
	g.Expect(utf8.ValidString(reason)).To(BeTrue(), "a rune was cut")
	g.Expect(reason).To(HaveSuffix("…"))
	g.Expect(reason).To(HavePrefix(strings.Repeat("é", 254)))
}

func TestApplyState_neverMovesARevisionBack(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	applyState(st, state(2, "1.1.0", wire.StatusDeployed, wire.HealthCurrent))
	applyState(st, state(2, "1.1.0", wire.StatusPendingUpgrade, wire.HealthInProgress))
	g.Expect(st.Current.Status).To(Equal(tugboatv1alpha1.ReleaseStatusDeployed))
	g.Expect(st.Current.Health).To(Equal(tugboatv1alpha1.HealthCurrent))
	// An older revision's late news changes that revision, not current.
	applyState(st, state(1, "1.0.0", wire.StatusSuperseded, wire.HealthCurrent))
	g.Expect(st.Current.Revision).To(Equal(int32(2)))
}

// Without storage UIDs (an older agent), an install after an uninstall the
// hub saw still starts a new life, and keeps the old one.
func TestApplyState_reinstallAfterUninstallStartsANewLife(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	applyState(st, state(1, "1.0.0", wire.StatusSuperseded, wire.HealthCurrent))
	applyState(st, state(2, "1.1.0", wire.StatusDeployed, wire.HealthCurrent))
	markUninstalled(st)
	applyState(st, state(1, "1.2.0", wire.StatusPendingInstall, wire.HealthInProgress))
	g.Expect(lives(st)).To(Equal([]string{"2/1 1.2.0 pending-install", "1/2 1.1.0 uninstalled", "1/1 1.0.0 superseded"}))
	g.Expect(st.Current.ChartVersion).To(Equal("1.2.0"))
	g.Expect(st.Current.Installation).To(Equal(int32(2)))
	g.Expect(st.Current.Status).To(Equal(tugboatv1alpha1.ReleaseStatusPendingInstall))
}

func TestApplyState_recordsTheHelmReleaseOfTheCurrentRevisionOnly(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	withHR := func(s *wire.ReleaseState, h wire.HelmReleaseStatus) *wire.ReleaseState {
		s.HelmRelease = &wire.HelmReleaseRef{Namespace: "apps", Name: "web"}
		s.HelmReleaseStatus = &h
		return s
	}
	applyState(st, withHR(state(2, "1.1.0", wire.StatusFailed, wire.HealthFailed), wire.HelmReleaseStatus{
		Ready: wire.ConditionFalse, Reason: "RetriesExceeded", Message: "Failed to upgrade after 1 attempt(s)",
		Stalled: true, LastAttemptedRevision: "1.1.0",
	}))
	g.Expect(st.HelmRelease).To(Equal(&tugboatv1alpha1.HelmReleaseStatus{
		Ready: "False", Reason: "RetriesExceeded", Message: "Failed to upgrade after 1 attempt(s)",
		Stalled: true, LastAttemptedRevision: "1.1.0",
	}))
	// News of an older revision does not speak for the HelmRelease now.
	applyState(st, withHR(state(1, "1.0.0", wire.StatusSuperseded, wire.HealthCurrent), wire.HelmReleaseStatus{Ready: wire.ConditionTrue}))
	g.Expect(st.HelmRelease.Stalled).To(BeTrue())
	// A state naming the HelmRelease without its status (Flux's own
	// events, through the hub's Flux endpoint) leaves it.
	fromFlux := state(2, "1.1.0", wire.StatusFailed, wire.HealthFailed)
	fromFlux.HelmRelease = &wire.HelmReleaseRef{Namespace: "apps", Name: "web"}
	applyState(st, fromFlux)
	g.Expect(st.HelmRelease.Reason).To(Equal("RetriesExceeded"))
	applyState(st, withHR(state(3, "1.1.0", wire.StatusDeployed, wire.HealthCurrent), wire.HelmReleaseStatus{
		Ready: wire.ConditionTrue, Reason: "UpgradeSucceeded", Suspended: true, LastAttemptedRevision: "1.1.0",
	}))
	g.Expect(st.HelmRelease).To(Equal(&tugboatv1alpha1.HelmReleaseStatus{
		Ready: "True", Reason: "UpgradeSucceeded", Suspended: true, LastAttemptedRevision: "1.1.0",
	}))
	// The HelmRelease is deleted: the current revision is managed by none.
	applyState(st, state(3, "1.1.0", wire.StatusDeployed, wire.HealthCurrent))
	g.Expect(st.HelmRelease).To(BeNil())
}

// fluxEvent is a release status event as the hub's Flux endpoint maps
// helm-controller's event (webhook/receiver mapFluxEvent): no storage
// object uid, the revision from the message (0 for a rollback, whose
// message names the revision rolled back to).
func fluxEvent(sec int, rev int, version, reason, msg string, status wire.ReleaseStatus, health wire.Health) *wire.Event {
	at := time.Date(2026, 11, 1, 10, 0, sec, 0, time.UTC)
	s := state(rev, version, status, health)
	s.HelmRelease = &wire.HelmReleaseRef{Namespace: "apps", Name: "web"}
	if status == wire.StatusDeployed {
		s.LastDeployed = at
	}
	e := &wire.Event{
		Spoke: "s1", Namespace: "apps", Release: "web", Revision: rev, Kind: wire.EventReleaseStatus,
		Type: wire.EventTypeNormal, Reason: reason, Message: msg, Sequence: int64(sec) * 1000, Time: at,
		Object: &wire.ObjectRef{Kind: "HelmRelease", Namespace: "apps", Name: "web", UID: "hr1"}, State: s,
	}
	if health == wire.HealthFailed {
		e.Type = wire.EventTypeWarning
	}
	e.ID = e.ComputeID()
	return e
}

// TestRecordEvent_fluxDeployedRevisionSupersedesOlderOnes replays what
// notification-controller sends of one HelmRelease's life (install,
// upgrades, a failed upgrade and its rollback): only the newest deployed
// revision stays deployed, as Helm's storage (and an agent) says.
func TestRecordEvent_fluxDeployedRevisionSupersedesOlderOnes(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	spec := &tugboatv1alpha1.ReleaseHistorySpec{}
	for _, e := range []*wire.Event{
		fluxEvent(1, 1, "1.0.0", "InstallSucceeded", "Helm install succeeded for release apps/web.v1 with chart web@1.0.0", wire.StatusDeployed, wire.HealthCurrent),
		fluxEvent(2, 2, "1.1.0", "UpgradeSucceeded", "Helm upgrade succeeded for release apps/web.v2 with chart web@1.1.0", wire.StatusDeployed, wire.HealthCurrent),
		fluxEvent(3, 3, "1.2.0", "UpgradeSucceeded", "Helm upgrade succeeded for release apps/web.v3 with chart web@1.2.0", wire.StatusDeployed, wire.HealthCurrent),
		fluxEvent(4, 0, "1.3.0", "UpgradeFailed", "Helm upgrade failed for release apps/web with chart web@1.3.0: timed out", wire.StatusFailed, wire.HealthFailed),
		fluxEvent(5, 0, "1.2.0", "RollbackSucceeded", "Helm rollback to previous release apps/web.v3 with chart web@1.2.0 succeeded", wire.StatusDeployed, wire.HealthCurrent),
	} {
		g.Expect(recordEvent(st, spec, e, 40)).To(BeTrue(), e.Reason)
	}
	statuses := map[int32]tugboatv1alpha1.ReleaseStatus{}
	for _, r := range st.Revisions {
		statuses[r.Revision] = r.Status
	}
	g.Expect(statuses).To(Equal(map[int32]tugboatv1alpha1.ReleaseStatus{
		1: tugboatv1alpha1.ReleaseStatusSuperseded, 2: tugboatv1alpha1.ReleaseStatusSuperseded, 3: tugboatv1alpha1.ReleaseStatusSuperseded,
		4: tugboatv1alpha1.ReleaseStatusFailed, 5: tugboatv1alpha1.ReleaseStatusDeployed,
	}))
	g.Expect(st.Current.Revision).To(Equal(int32(5)))
	g.Expect(st.Current.ChartVersion).To(Equal("1.2.0"))

	// Late news of an older revision (redelivered, out of order) does not
	// make it deployed again.
	g.Expect(recordEvent(st, spec, fluxEvent(6, 2, "1.1.0", "TestSucceeded", "Helm test succeeded for release apps/web.v2 with chart web@1.1.0", wire.StatusDeployed, wire.HealthCurrent), 40)).To(BeTrue())
	g.Expect(st.Revisions[3].Revision).To(Equal(int32(2)))
	g.Expect(st.Revisions[3].Status).To(Equal(tugboatv1alpha1.ReleaseStatusSuperseded))
	g.Expect(st.Current.Revision).To(Equal(int32(5)))
}
