package releasehistory

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// lives lists the revisions as "life/revision version status", newest first.
func lives(st *tugboatv1alpha1.ReleaseHistoryStatus) []string {
	var out []string
	for _, r := range st.Revisions {
		out = append(out, fmt.Sprintf("%d/%d %s %s", r.Life(), r.Revision, r.ChartVersion, r.Status))
	}
	return out
}

// occurrence scripts what an agent reports about one release: each state
// event carries the revision's storage UID, as the tracker sends it.
type occurrence struct {
	seq    int64
	events []wire.Event
}

func (o *occurrence) state(uid string, rev int, chart, version string, status wire.ReleaseStatus, health wire.Health) {
	o.seq++
	s := &wire.ReleaseState{Namespace: "apps", Release: "web", Chart: chart, ChartVersion: version, Revision: rev,
		Status: status, Health: health, ReleaseUID: uid}
	e := wire.Event{Spoke: "s1", Namespace: "apps", Release: "web", Revision: rev, Kind: wire.EventReleaseStatus,
		Type: wire.EventTypeNormal, Reason: "Status", Message: string(status), Sequence: o.seq, State: s, ReleaseUID: uid,
		Time: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(o.seq) * time.Second)}
	e.ID = e.ComputeID()
	o.events = append(o.events, e)
}

func (o *occurrence) object(uid string, rev int, reason string) {
	o.seq++
	e := wire.Event{Spoke: "s1", Namespace: "apps", Release: "web", Revision: rev, Kind: wire.EventObjectCreated,
		Type: wire.EventTypeNormal, Reason: reason, Message: reason + " " + uid, Sequence: o.seq, ReleaseUID: uid,
		Object: &wire.ObjectRef{Kind: "Deployment", Namespace: "apps", Name: "web", UID: "d-" + uid},
		Time:   time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(o.seq) * time.Second)}
	e.ID = e.ComputeID()
	o.events = append(o.events, e)
}

// Issue 13, bug 7 (the hub's half): install, upgrade, uninstall, reinstall
// of the same chart, uninstall, reinstall of another chart, upgrade,
// uninstall, and an install that fails. Every occurrence is in the
// history once, in order (newest first), with its own state and its own
// events, and a redelivery of everything changes nothing.
func TestRecordEvent_eachOccurrenceOnceInOrder(t *testing.T) {
	g := NewWithT(t)
	var o occurrence
	// Life 1: install 1.0.0 (a1), upgrade to 1.1.0 (a2), uninstall.
	o.state("a1", 1, "web", "1.0.0", wire.StatusPendingInstall, wire.HealthInProgress)
	o.object("a1", 1, "Created")
	o.state("a1", 1, "web", "1.0.0", wire.StatusDeployed, wire.HealthCurrent)
	o.state("a2", 2, "web", "1.1.0", wire.StatusPendingUpgrade, wire.HealthInProgress)
	o.state("a1", 1, "web", "1.0.0", wire.StatusSuperseded, wire.HealthCurrent)
	o.state("a2", 2, "web", "1.1.0", wire.StatusDeployed, wire.HealthCurrent)
	o.state("a2", 2, "web", "1.1.0", wire.StatusUninstalled, wire.HealthUnknown)
	// Life 2: the same chart again (b1), uninstalled.
	o.state("b1", 1, "web", "1.0.0", wire.StatusPendingInstall, wire.HealthInProgress)
	o.object("b1", 1, "Created")
	o.state("b1", 1, "web", "1.0.0", wire.StatusDeployed, wire.HealthCurrent)
	o.state("b1", 1, "web", "1.0.0", wire.StatusUninstalled, wire.HealthUnknown)
	// Life 3: another chart under the same name (c1), upgraded (c2),
	// uninstalled.
	o.state("c1", 1, "webapp", "2.0.0", wire.StatusDeployed, wire.HealthCurrent)
	o.object("c1", 1, "Created")
	o.state("c2", 2, "webapp", "2.1.0", wire.StatusDeployed, wire.HealthCurrent)
	o.state("c1", 1, "webapp", "2.0.0", wire.StatusSuperseded, wire.HealthCurrent)
	o.state("c2", 2, "webapp", "2.1.0", wire.StatusUninstalled, wire.HealthUnknown)
	// Life 4: an install that fails.
	o.state("d1", 1, "web", "3.0.0", wire.StatusPendingInstall, wire.HealthInProgress)
	o.state("d1", 1, "web", "3.0.0", wire.StatusFailed, wire.HealthFailed)
	// A late event of life 2's revision 1 (delayed on the way): it goes
	// to that revision, by its storage object, not to revision 1 of now.
	o.object("b1", 1, "Created")

	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	spec := &tugboatv1alpha1.ReleaseHistorySpec{}
	for i := range o.events {
		recordEvent(st, spec, &o.events[i], 40)
	}
	trim(st, 10, 1<<20)
	g.Expect(lives(st)).To(Equal([]string{
		"4/1 3.0.0 failed",
		"3/2 2.1.0 uninstalled",
		"3/1 2.0.0 superseded",
		"2/1 1.0.0 uninstalled",
		"1/2 1.1.0 uninstalled",
		"1/1 1.0.0 superseded",
	}))
	g.Expect(st.Current.Installation).To(Equal(int32(4)))
	g.Expect(st.Current.Status).To(Equal(tugboatv1alpha1.ReleaseStatusFailed))
	g.Expect(st.Revisions[0].Events).NotTo(BeEmpty(), "the failed install has its events")
	// Each life's object event is in its own revision 1.
	for _, r := range st.Revisions {
		for _, e := range r.Events {
			if e.Reason == "Created" {
				g.Expect(e.Message).To(Equal("Created "+r.ReleaseUID), "life %d revision %d", r.Life(), r.Revision)
			}
		}
	}
	// A redelivery of everything, in any order, changes nothing.
	before := st.DeepCopy()
	for i := len(o.events) - 1; i >= 0; i-- {
		g.Expect(recordEvent(st, spec, &o.events[i], 40)).To(BeFalse(), "event %d", i)
	}
	g.Expect(st).To(Equal(before))
}

// The hub missed the uninstall (the agent's events of it were dropped):
// a snapshot's revision 1 with another storage object than the recorded
// revision 1, or a revision below the current one the history does not
// hold, is a new life; late news of the old life's revision (by its UID)
// updates that revision and leaves current alone.
func TestApplyState_aMissedUninstallIsSeenByTheStorageUID(t *testing.T) {
	g := NewWithT(t)
	withUID := func(s *wire.ReleaseState, uid string) *wire.ReleaseState { s.ReleaseUID = uid; return s }
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	applyState(st, withUID(state(1, "1.0.0", wire.StatusDeployed, wire.HealthCurrent), "a1"))
	applyState(st, withUID(state(1, "1.0.0", wire.StatusDeployed, wire.HealthCurrent), "b1"))
	g.Expect(lives(st)).To(Equal([]string{"2/1 1.0.0 deployed", "1/1 1.0.0 deployed"}))

	st = &tugboatv1alpha1.ReleaseHistoryStatus{}
	applyState(st, withUID(state(3, "1.2.0", wire.StatusDeployed, wire.HealthCurrent), "a3"))
	applyState(st, withUID(state(1, "2.0.0", wire.StatusDeployed, wire.HealthCurrent), "b1"))
	g.Expect(lives(st)).To(Equal([]string{"2/1 2.0.0 deployed", "1/3 1.2.0 deployed"}))
	// Late news of the old life: it lands there.
	applyState(st, withUID(state(3, "1.2.0", wire.StatusUninstalled, wire.HealthUnknown), "a3"))
	g.Expect(lives(st)).To(Equal([]string{"2/1 2.0.0 deployed", "1/3 1.2.0 uninstalled"}))
	g.Expect(st.Current.Installation).To(Equal(int32(2)))
	// News of an ending never starts a life; neither does the same object.
	applyState(st, withUID(state(1, "2.0.0", wire.StatusDeployed, wire.HealthCurrent), "b1"))
	applyState(st, withUID(state(1, "1.0.0", wire.StatusSuperseded, wire.HealthCurrent), "zz"))
	g.Expect(lives(st)).To(Equal([]string{"2/1 2.0.0 deployed", "1/3 1.2.0 uninstalled"}))
}

// A rollback hold needs a rollback within one life: a reinstall of an
// older version is a new life, not a rollback (pipeline's rollbackOf reads
// the two newest revisions; they must be of one life). Here the ordering
// it relies on: a new life's revisions come first whatever their numbers.
func TestSortRevisions_newLifeFirst(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{Revisions: []tugboatv1alpha1.Revision{
		{RevisionSummary: tugboatv1alpha1.RevisionSummary{Revision: 5, Installation: 1}},
		{RevisionSummary: tugboatv1alpha1.RevisionSummary{Revision: 1, Installation: 2}},
		{RevisionSummary: tugboatv1alpha1.RevisionSummary{Revision: 2}}, // recorded before lives: life 1
		{RevisionSummary: tugboatv1alpha1.RevisionSummary{Revision: 2, Installation: 2}},
	}}
	sortRevisions(st)
	var got []string
	for _, r := range st.Revisions {
		got = append(got, fmt.Sprintf("%d/%d", r.Life(), r.Revision))
	}
	g.Expect(got).To(Equal([]string{"2/2", "2/1", "1/5", "1/2"}))
}

// A reinstall reported without a storage UID (an agent of before the UIDs,
// or Flux's events): revision 1 installed, uninstalled, then revision 1
// deployed again is a new installation, not a release left uninstalled
// (issue 29, item 6: no test held it).
func TestApplyState_aReinstallWithoutAStorageUIDIsANewLife(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	applyState(st, state(1, "1.0.0", wire.StatusDeployed, wire.HealthCurrent))
	applyState(st, state(1, "1.0.0", wire.StatusUninstalled, wire.HealthUnknown))
	g.Expect(lives(st)).To(Equal([]string{"1/1 1.0.0 uninstalled"}))
	applyState(st, state(1, "1.0.0", wire.StatusDeployed, wire.HealthCurrent))
	g.Expect(lives(st)).To(Equal([]string{"2/1 1.0.0 deployed", "1/1 1.0.0 uninstalled"}))
	g.Expect(st.Current).NotTo(BeNil())
	g.Expect(st.Current.Status).To(Equal(tugboatv1alpha1.ReleaseStatusDeployed))
	g.Expect(st.Current.Installation).To(Equal(int32(2)))
}
