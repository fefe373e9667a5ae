package releasehistory_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
)

// TestRecorder_anOlderSnapshotCannotUndoNewerNews: the receiver persists
// a spoke's last snapshot time only with its heartbeat, so a restarted hub
// or another replica may accept a replayed (or late) snapshot. The
// recorder itself must keep such a snapshot from undoing what events
// reported after it was taken: a health that changed since, a release
// installed since (which the old snapshot lacks). A snapshot taken after
// that news applies as before.
func TestRecorder_anOlderSnapshotCannotUndoNewerNews(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sp := newSpoke(t, g, "replayed")
	stats := recorder.Stats()

	t0 := time.Now().Add(-time.Minute)
	web := releaseState(1, "1.0.0", wire.StatusDeployed, wire.HealthCurrent)
	old := snapshot("replayed", web)
	old.TakenAt = t0
	g.Expect(recorder.RecordState(ctx, ingest.Spoke{Name: "replayed"}, old)).To(Succeed())
	g.Expect(getHistory(g, sp, "web").Status.Current.Health).To(Equal(tugboatv1alpha1.HealthCurrent))

	// After the snapshot: web turns Failed, api is installed.
	failed := web
	failed.Health, failed.HealthReason = wire.HealthFailed, "Deployment web: ProgressDeadlineExceeded"
	ev := releaseEvent("replayed", failed, 1, "HealthChanged")
	ev.Kind, ev.Time = wire.EventHealthChanged, t0.Add(10*time.Second)
	ev.ID = ev.ComputeID()
	api := wire.ReleaseState{Namespace: "apps", Release: "api", Chart: "api", ChartVersion: "2.0.0", Revision: 1,
		Status: wire.StatusDeployed, Health: wire.HealthCurrent}
	install := releaseEvent("replayed", api, 1, "InstallSucceeded")
	install.Time = t0.Add(20 * time.Second)
	install.ID = install.ComputeID()
	g.Expect(recorder.RecordEvents(ctx, ingest.Spoke{Name: "replayed"}, []wire.Event{ev, install})).To(Succeed())
	g.Expect(getHistory(g, sp, "web").Status.Current.Health).To(Equal(tugboatv1alpha1.HealthFailed))
	g.Expect(getHistory(g, sp, "web").Status.ReportedAt.Time).To(BeTemporally("~", ev.Time, time.Microsecond))

	// The old snapshot again: nothing changes, and both releases count as
	// stale.
	staleBefore := stats.StaleReleases.Load()
	webBefore, apiBefore := getHistory(g, sp, "web"), getHistory(g, sp, "api")
	g.Expect(recorder.RecordState(ctx, ingest.Spoke{Name: "replayed"}, old)).To(Succeed())
	webAfter, apiAfter := getHistory(g, sp, "web"), getHistory(g, sp, "api")
	g.Expect(webAfter.Status.Current.Health).To(Equal(tugboatv1alpha1.HealthFailed), "the replay must not make web healthy again")
	g.Expect(apiAfter.Status.Current.Status).To(Equal(tugboatv1alpha1.ReleaseStatusDeployed), "the replay must not uninstall api")
	g.Expect(webAfter.ResourceVersion).To(Equal(webBefore.ResourceVersion))
	g.Expect(apiAfter.ResourceVersion).To(Equal(apiBefore.ResourceVersion))
	g.Expect(stats.StaleReleases.Load() - staleBefore).To(Equal(int64(2)))

	// A snapshot taken after the news applies: web healthy again, api gone.
	fresh := snapshot("replayed", web)
	g.Expect(recorder.RecordState(ctx, ingest.Spoke{Name: "replayed"}, fresh)).To(Succeed())
	g.Expect(getHistory(g, sp, "web").Status.Current.Health).To(Equal(tugboatv1alpha1.HealthCurrent))
	g.Expect(getHistory(g, sp, "api").Status.Current.Status).To(Equal(tugboatv1alpha1.ReleaseStatusUninstalled))
	g.Expect(getHistory(g, sp, "api").Status.ReportedAt.Time).To(BeTemporally("~", fresh.TakenAt, time.Microsecond))

	// The heartbeat persisted the snapshot's time on the Spoke, for the
	// receiver's floor.
	var got tugboatv1alpha1.Spoke
	g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(sp), &got)).To(Succeed())
	g.Expect(got.Status.LastSnapshotTakenAt).NotTo(BeNil())
	g.Expect(got.Status.LastSnapshotTakenAt.Time).To(BeTemporally(">=", t0.Truncate(time.Microsecond)))
}

// TestRecorder_anEventFromAClockAheadHoldsSnapshotsOffForAWindowAtMost: an
// event stamped by a spoke clock an hour ahead records reportedAt at most
// the replay window ahead of the hub's clock, so snapshots after the clock
// is fixed are not ignored for the hour.
func TestRecorder_anEventFromAClockAheadHoldsSnapshotsOffForAWindowAtMost(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sp := newSpoke(t, g, "ahead")
	web := releaseState(1, "1.0.0", wire.StatusDeployed, wire.HealthCurrent)
	ev := releaseEvent("ahead", web, 1, "InstallSucceeded")
	ev.Time = time.Now().Add(time.Hour)
	ev.ID = ev.ComputeID()
	g.Expect(recorder.RecordEvents(ctx, ingest.Spoke{Name: "ahead"}, []wire.Event{ev})).To(Succeed())
	g.Expect(getHistory(g, sp, "web").Status.ReportedAt.Time).To(BeTemporally("<=", time.Now().Add(wire.DefaultWindow)))
}
