package releasehistory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
)

// Issue 28, item 2: the API server stores and processes a ReleaseHistory's
// managedFields on every write. With map-keyed revision and event lists
// they named every field of every revision and event (half the object, and
// growing with the history); atomic lists keep them to one entry per list,
// the same size whatever the history holds.
func TestRecorder_managedFieldsDoNotGrowWithTheHistory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const name = "sizes"
	sp := newSpoke(t, g, name)
	version := func(rev int) string { return fmt.Sprintf("1.%d.0", rev) }
	sizes := map[int][2]int{}
	for rev := 1; rev <= 10; rev++ {
		evs := []wire.Event{releaseEvent(name, releaseState(rev, version(rev), wire.StatusDeployed, wire.HealthCurrent), 1, "UpgradeSucceeded")}
		if rev > 1 {
			evs = append(evs, releaseEvent(name, releaseState(rev-1, version(rev-1), wire.StatusSuperseded, wire.HealthCurrent), 2, "Superseded"))
		}
		g.Expect(recorder.RecordEvents(ctx, ingest.Spoke{Name: name}, evs)).To(Succeed())
		rh := getHistory(g, sp, "web")
		g.Expect(rh.Status.Revisions).To(HaveLen(rev), "the recorder keeps 10 revisions by default")
		all, err := json.Marshal(rh)
		g.Expect(err).NotTo(HaveOccurred())
		mf, err := json.Marshal(rh.ManagedFields)
		g.Expect(err).NotTo(HaveOccurred())
		sizes[rev] = [2]int{len(all), len(mf)}
	}
	t.Logf("bytes of the object / of its managedFields: 1 revision %v, 3 revisions %v, 10 revisions %v", sizes[1], sizes[3], sizes[10])
	// The entries' times and owner UID have fixed lengths, so the size is
	// the same to the byte.
	g.Expect(sizes[10][1]).To(Equal(sizes[1][1]), "managedFields grew with the history: %v", sizes)
	g.Expect(sizes[10][1]).To(BeNumerically("<", 1024))
}
