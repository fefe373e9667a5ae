package releasehistory

import (
	"encoding/json"
	"math/rand"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// batch is what an agent sends for one upgrade: the release's status
// events (with state), repeats of one object event (compacted), a repeat
// within one second, and an event of another object.
func batch() []*wire.Event {
	var b []*wire.Event
	st := func(rev int, status wire.ReleaseStatus, sec int, msg string) {
		e := event(rev, int64(sec), string(status), msg)
		e.Kind, e.Object = wire.EventReleaseStatus, nil
		e.State = state(rev, "1.1.0", status, wire.HealthCurrent)
		e.Time = time.Date(2026, 11, 1, 10, 0, sec, 0, time.UTC)
		e.ID = e.ComputeID()
		b = append(b, e)
	}
	st(2, wire.StatusPendingUpgrade, 0, "revision 2 (web 1.1.0) pending-upgrade")
	for seq := int64(1); seq <= 5; seq++ {
		b = append(b, event(2, seq, "Modified", "Deployment web modified"))
	}
	same := event(2, 6, "Modified", "Deployment web modified")
	same.Time = b[len(b)-1].Time // within the same second as the last repeat
	same.ID = same.ComputeID()
	b = append(b, same)
	other := event(2, 7, "Created", "Pod web-1 created")
	other.Object = &wire.ObjectRef{Kind: "Pod", Namespace: "apps", Name: "web-1", UID: "u2"}
	other.ID = other.ComputeID()
	b = append(b, other)
	b = append(b, event(2, 8, "Modified", "Deployment web modified"))
	st(2, wire.StatusDeployed, 9, "revision 2 (web 1.1.0) deployed: Upgrade complete")
	return b
}

func record(st *tugboatv1alpha1.ReleaseHistoryStatus, spec *tugboatv1alpha1.ReleaseHistorySpec, events []*wire.Event) {
	for _, e := range events {
		recordEvent(st, spec, e, 40)
	}
}

func snapshot(g Gomega, st *tugboatv1alpha1.ReleaseHistoryStatus, spec *tugboatv1alpha1.ReleaseHistorySpec) string {
	b, err := json.Marshal(struct {
		Spec   *tugboatv1alpha1.ReleaseHistorySpec
		Status *tugboatv1alpha1.ReleaseHistoryStatus
	}{spec, st})
	g.Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// Issue 13, bug 2: a batch redelivered any number of times, in any order,
// leaves the ReleaseHistory byte-identical (a merged event's id was
// overwritten by the latest repeat's, and counted again).
func TestRecordEvent_redeliveredBatchLeavesHistoryByteIdentical(t *testing.T) {
	g := NewWithT(t)
	st, spec := &tugboatv1alpha1.ReleaseHistoryStatus{}, &tugboatv1alpha1.ReleaseHistorySpec{}
	applyState(st, state(1, "1.0.0", wire.StatusDeployed, wire.HealthCurrent))
	record(st, spec, batch())
	want := snapshot(g, st, spec)
	g.Expect(st.Revisions[0].Events).To(HaveLen(5), "pending, the repeats compacted, the Pod, the repeat after it, deployed")
	g.Expect(st.Revisions[0].Events[1].Count).To(Equal(int32(5)), "five repeats in five seconds; the one within the same second counts once")

	rnd := rand.New(rand.NewSource(13))
	for i := 1; i <= 5; i++ {
		b := batch()
		switch i % 3 {
		case 1: // reversed
			for l, r := 0, len(b)-1; l < r; l, r = l+1, r-1 {
				b[l], b[r] = b[r], b[l]
			}
		case 2:
			rnd.Shuffle(len(b), func(x, y int) { b[x], b[y] = b[y], b[x] })
		}
		record(st, spec, b)
		g.Expect(snapshot(g, st, spec)).To(Equal(want), "redelivery %d", i)
	}
	// And a partial redelivery (the first half of the batch).
	record(st, spec, batch()[:5])
	g.Expect(snapshot(g, st, spec)).To(Equal(want))
}

// Issue 13, bug 9: an uninstall is not recorded with the message (or the
// health reason) of the last upgrade, and a superseded revision does not
// repeat the description of the action that made it.
func TestRecordEvent_uninstallAndSupersededSayWhatHappened(t *testing.T) {
	g := NewWithT(t)
	st, spec := &tugboatv1alpha1.ReleaseHistoryStatus{}, &tugboatv1alpha1.ReleaseHistorySpec{}
	status := func(rev int, version string, s wire.ReleaseStatus, sec int, msg string) *wire.Event {
		e := event(rev, int64(sec), string(s), msg)
		e.Kind, e.Object = wire.EventReleaseStatus, nil
		e.State = state(rev, version, s, wire.HealthFailed)
		e.State.HealthReason = "Upgrade \"web\" failed: timed out"
		e.Time = time.Date(2026, 11, 1, 10, 0, sec, 0, time.UTC)
		e.ID = e.ComputeID()
		return e
	}
	record(st, spec, []*wire.Event{
		status(1, "1.0.0", wire.StatusDeployed, 1, "revision 1 (web 1.0.0) deployed: Install complete"),
		status(2, "1.1.0", wire.StatusDeployed, 2, "revision 2 (web 1.1.0) deployed: Upgrade complete"),
		status(1, "1.0.0", wire.StatusSuperseded, 3, "revision 1 (web 1.0.0) superseded: Install complete"),
		status(2, "1.1.0", wire.StatusUninstalled, 4, "revision 2 (web 1.1.0) uninstalled: Upgrade complete"),
	})
	rev := func(n int32) *tugboatv1alpha1.Revision { return findRevision(st, revKey{life: newestLife(st), rev: n}) }
	messages := func(r *tugboatv1alpha1.Revision) []string {
		var m []string
		for _, e := range r.Events {
			m = append(m, e.Message)
		}
		return m
	}
	g.Expect(messages(rev(1))).To(Equal([]string{"revision 1 (web 1.0.0) deployed: Install complete", "revision 1 (web 1.0.0) superseded"}))
	g.Expect(messages(rev(2))).To(Equal([]string{"revision 2 (web 1.1.0) deployed: Upgrade complete", "revision 2 (web 1.1.0) uninstalled"}))
	g.Expect(st.Current.Status).To(Equal(tugboatv1alpha1.ReleaseStatusUninstalled))
	g.Expect(st.Current.Health).To(Equal(tugboatv1alpha1.HealthUnknown))
	g.Expect(st.Current.HealthReason).To(Equal("the release was uninstalled"))
}
