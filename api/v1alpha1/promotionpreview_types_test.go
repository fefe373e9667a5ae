package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1 "tugboat.dev/tugboat/api/v1alpha1"
)

// TestPromotionPreview_sizeAtEveryLimit fills a PromotionPreview to every
// schema limit (most targets, groups, spokes and objects, longest strings,
// each group's diffs at their 128 KiB budget): it stays far below etcd's
// 1.5 MiB object limit, however many targets the environment has.
func TestPromotionPreview_sizeAtEveryLimit(t *testing.T) {
	g := NewWithT(t)
	long := func(prefix string, n int) string { return (prefix + strings.Repeat("x", n))[:n] }
	now := metav1.NewTime(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	var spokes []string
	for i := range tugboatv1.MaxPreviewSpokes {
		spokes = append(spokes, long(fmt.Sprintf("spoke-%d-", i), 63))
	}
	pp := tugboatv1.PromotionPreview{
		ObjectMeta: metav1.ObjectMeta{Name: long("p", 253), Namespace: long("n", 63)},
		Spec:       tugboatv1.PromotionPreviewSpec{Promotion: long("p", 253), Version: long("v", 64), TotalTargets: 5000, Deadline: now},
	}
	for i := range tugboatv1.MaxPreviewTargets {
		id := fmt.Sprintf("%032x", i)
		pp.Spec.Targets = append(pp.Spec.Targets, tugboatv1.PreviewTarget{
			Spoke: long("s", 63), Namespace: long("n", 63), Release: long("r", 53), ActionID: id, ValuesDigest: long("d", 128), Targets: 5000, Spokes: spokes,
		})
		pp.Status.Targets = append(pp.Status.Targets, tugboatv1.PreviewTargetStatus{
			ActionID: id, Phase: tugboatv1.ActionDelivered, Message: long("m", 1024), Digest: long("d", 64), Revision: 1 << 30, Deliveries: 1 << 30,
		})
	}
	// Each group: its diffs at the budget, spread over the most objects,
	// with the JSON escaping a diff's quotes and newlines cost.
	diffLine := `+  "quoted": "value"` + "\n"
	for i := range tugboatv1.MaxPreviewGroups {
		grp := tugboatv1.PreviewGroup{
			Digest: fmt.Sprintf("%064x", i), Targets: 5000, Spokes: spokes, FromVersion: long("v", 128), DryRun: "server",
			ObjectsChanged: 1 << 30, LinesChanged: 1 << 30, Truncated: true, Note: long("n", 1024),
			ValuesDiff: strings.Repeat(diffLine, tugboatv1.MaxPreviewValuesDiff/len(diffLine)),
		}
		perObject := (tugboatv1.MaxPreviewGroupDiffs - len(grp.ValuesDiff)) / tugboatv1.MaxPreviewObjects
		for j := range tugboatv1.MaxPreviewObjects {
			grp.Objects = append(grp.Objects, tugboatv1.PreviewObject{
				APIVersion: long("a", 128), Kind: long("k", 63), Namespace: long("n", 63), Name: long(fmt.Sprintf("o%d", j), 253),
				Change: tugboatv1.PreviewChanged, Diff: strings.Repeat(diffLine, perObject/len(diffLine)), Truncated: true,
			})
		}
		pp.Status.Groups = append(pp.Status.Groups, grp)
	}
	data, err := json.Marshal(pp)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("PromotionPreview at every limit: %d bytes", len(data))
	g.Expect(len(data)).To(BeNumerically("<", 1<<20), "far below etcd's 1.5 MiB")

	summary, err := json.Marshal(tugboatv1.PreviewSummary{
		Phase: tugboatv1.PreviewReady, Name: long("p", 253), Digest: long("d", 64), ObjectsChanged: 1 << 30, LinesChanged: 1 << 30,
		Groups: 4, TargetsPreviewed: 5000, Reason: long("r", 1024), ComputedAt: &now,
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(summary)).To(BeNumerically("<", 2<<10), "status.preview adds little to the Promotion")
}

func TestPreviewSummary_lineCountsInWords(t *testing.T) {
	for _, tc := range []struct {
		s    *tugboatv1.PreviewSummary
		want string
	}{
		{nil, ""},
		{&tugboatv1.PreviewSummary{Phase: tugboatv1.PreviewReady, ObjectsChanged: 1, LinesChanged: 1, TargetsPreviewed: 1}, "Ready: 1 object and 1 line change (1 target previewed)"},
		{&tugboatv1.PreviewSummary{Phase: tugboatv1.PreviewReady, ObjectsChanged: 3, LinesChanged: 12, Groups: 2, TargetsPreviewed: 5}, "Ready: 3 objects and 12 lines change (2 distinct changes; 5 targets previewed)"},
		{&tugboatv1.PreviewSummary{Phase: tugboatv1.PreviewStale, ChangedSinceApproval: true, ObjectsChanged: 0, LinesChanged: 2}, "Stale: changed since approval: 0 objects and 2 lines change"},
		{&tugboatv1.PreviewSummary{Phase: tugboatv1.PreviewFailed, Reason: "the spoke is unreachable"}, "Failed: the spoke is unreachable"},
	} {
		if got := tc.s.Line(); got != tc.want {
			t.Errorf("Line() = %q, want %q", got, tc.want)
		}
	}
}
