package releasehistory

import (
	"testing"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// The recorder trims after every write: one revision over the limit is one
// too many.
func TestTrim_neverMoreThanTheLimit(t *testing.T) {
	g := NewWithT(t)
	st := &tugboatv1alpha1.ReleaseHistoryStatus{}
	for rev := 1; rev <= 12; rev++ {
		applyState(st, state(rev, "1.0.0", wire.StatusDeployed, wire.HealthCurrent))
		trim(st, 10, 256<<10)
		g.Expect(len(st.Revisions)).To(Equal(min(rev, 10)), "after revision %d", rev)
	}
	g.Expect(st.Revisions[9].Revision).To(Equal(int32(3)), "the oldest go first")
}

// A redelivered install batch after an uninstall is a redelivery, not a
// reinstall: the history is unchanged (its state would otherwise start the
// release over, wiping its revisions).
func TestRecordEvent_redeliveryAfterUninstallIsNotAReinstall(t *testing.T) {
	g := NewWithT(t)
	st, spec := &tugboatv1alpha1.ReleaseHistoryStatus{}, &tugboatv1alpha1.ReleaseHistorySpec{}
	status := func(rev int, version string, s wire.ReleaseStatus, sec int) *wire.Event {
		e := event(rev, int64(sec), string(s), "revision status")
		e.Kind, e.Object = wire.EventReleaseStatus, nil
		e.State = state(rev, version, s, wire.HealthCurrent)
		e.ID = e.ComputeID()
		return e
	}
	install := []*wire.Event{status(1, "1.0.0", wire.StatusPendingInstall, 1), status(1, "1.0.0", wire.StatusDeployed, 2)}
	record(st, spec, install)
	record(st, spec, []*wire.Event{status(2, "1.1.0", wire.StatusDeployed, 3), status(2, "1.1.0", wire.StatusUninstalled, 4)})
	want := snapshot(g, st, spec)
	g.Expect(st.Revisions).To(HaveLen(2))

	record(st, spec, install)
	g.Expect(snapshot(g, st, spec)).To(Equal(want))
}
