package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1 "tugboat.dev/tugboat/api/v1alpha1"
)

func minimalPreview(name string) *tugboatv1.PromotionPreview {
	return &tugboatv1.PromotionPreview{
		ObjectMeta: meta(name),
		Spec: tugboatv1.PromotionPreviewSpec{
			Promotion: name, Version: "1.4.0", TotalTargets: 3,
			Deadline: metav1.NewTime(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)),
			Targets: []tugboatv1.PreviewTarget{{
				Spoke: "prod-1", Namespace: "apps", Release: "web", ActionID: strings.Repeat("0a", 16),
				ValuesDigest: "sha256:" + strings.Repeat("ab", 32), Targets: 3, Spokes: []string{"prod-1", "prod-2", "prod-3"},
			}},
		},
	}
}

func validGroup() tugboatv1.PreviewGroup {
	return tugboatv1.PreviewGroup{
		Digest: strings.Repeat("cd", 32), Targets: 3, Spokes: []string{"prod-1"}, FromVersion: "1.3.0", DryRun: "server",
		ObjectsChanged: 2, LinesChanged: 4,
		Objects: []tugboatv1.PreviewObject{
			{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web", Change: tugboatv1.PreviewChanged, Diff: "-a\n+b\n"},
			{APIVersion: "v1", Kind: "Secret", Namespace: "apps", Name: "web-db", Change: tugboatv1.PreviewChanged, Secret: true},
		},
		ValuesDiff: "-x: 1\n+x: 2\n",
	}
}

// testPromotionPreviews is TestAPIValidation's bad-input table for
// PromotionPreviews (issue 26) and status.preview: each row is refused
// with a message naming the field, and a valid preview round-trips.
func testPromotionPreviews(ctx context.Context, t *testing.T, c client.Client) {
	specRows := []struct {
		name   string
		mutate func(*tugboatv1.PromotionPreview)
		want   []string
	}{
		{"no targets", func(p *tugboatv1.PromotionPreview) { p.Spec.Targets = nil }, []string{"spec", "a promotion's preview names its version, targets"}},
		{"a promotion and a pipeline", func(p *tugboatv1.PromotionPreview) {
			p.Spec.Pipeline, p.Spec.From, p.Spec.To = "web", "staging", "production"
		},
			[]string{"spec", "a preview names either a promotion, or a pipeline"}},
		{"on demand, without from", func(p *tugboatv1.PromotionPreview) {
			p.Spec = tugboatv1.PromotionPreviewSpec{Pipeline: "web", To: "production"}
		}, []string{"spec", "an on-demand preview names from and to"}},
		{"on demand, from and to the same", func(p *tugboatv1.PromotionPreview) {
			p.Spec = tugboatv1.PromotionPreviewSpec{Pipeline: "web", From: "production", To: "production"}
		}, []string{"spec", "two environments of the pipeline"}},
		{"on demand, targets without a deadline", func(p *tugboatv1.PromotionPreview) {
			p.Spec.Promotion, p.Spec.Pipeline, p.Spec.From, p.Spec.To, p.Spec.Deadline = "", "web", "staging", "production", metav1.Time{}
		}, []string{"spec", "written together"}},
		{"more than 20 targets", func(p *tugboatv1.PromotionPreview) {
			for i := range 20 {
				tt := p.Spec.Targets[0]
				tt.ActionID = fmt.Sprintf("%032x", i+1)
				p.Spec.Targets = append(p.Spec.Targets, tt)
			}
		}, []string{"spec.targets", "must have at most 20 items"}},
		{"an action id that is not 32 hex digits", func(p *tugboatv1.PromotionPreview) { p.Spec.Targets[0].ActionID = "XYZ" }, []string{"spec.targets[0].actionID", "should match"}},
		{"a target standing for no target", func(p *tugboatv1.PromotionPreview) { p.Spec.Targets[0].Targets = 0 }, []string{"spec.targets[0].targets", "greater than or equal to 1"}},
		{"no version", func(p *tugboatv1.PromotionPreview) { p.Spec.Version = "" }, []string{"spec", "a promotion's preview names its version"}},
	}
	for i, row := range specRows {
		t.Run("spec: "+row.name, func(t *testing.T) {
			g := NewWithT(t)
			p := minimalPreview(fmt.Sprintf("preview-bad-spec-%d", i))
			row.mutate(p)
			err := c.Create(ctx, p)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			for _, w := range row.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}

	g := NewWithT(t)
	p := minimalPreview("preview-valid")
	g.Expect(c.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(ctx, p) })

	statusRows := []struct {
		name   string
		mutate func(*tugboatv1.PromotionPreviewStatus)
		want   []string
	}{
		{"a Secret's diff", func(s *tugboatv1.PromotionPreviewStatus) { s.Groups[0].Objects[1].Diff = "-password: hunter2\n" },
			[]string{"status.groups[0].objects", "a Secret's diff is never stored"}},
		{"a group's diffs over 128 KiB", func(s *tugboatv1.PromotionPreviewStatus) {
			for i := range 9 {
				s.Groups[0].Objects = append(s.Groups[0].Objects, tugboatv1.PreviewObject{
					Kind: "ConfigMap", Name: fmt.Sprintf("c%d", i), Change: tugboatv1.PreviewAdded, Diff: strings.Repeat("+x\n", 5000),
				})
			}
		}, []string{"status.groups[0]", "the diffs of a group must total at most 128 KiB"}},
		{"an object's diff over 16 KiB", func(s *tugboatv1.PromotionPreviewStatus) { s.Groups[0].Objects[0].Diff = strings.Repeat("+x\n", 6000) },
			[]string{"status.groups[0].objects[0].diff", "may not be more than 16384 bytes"}},
		{"an unknown change", func(s *tugboatv1.PromotionPreviewStatus) { s.Groups[0].Objects[0].Change = "Moved" },
			[]string{"status.groups[0].objects[0].change", `Unsupported value: "Moved"`}},
		{"five groups", func(s *tugboatv1.PromotionPreviewStatus) {
			for range 4 {
				s.Groups = append(s.Groups, s.Groups[0])
			}
		}, []string{"status.groups", "must have at most 4 items"}},
		{"a digest that is not 64 hex digits", func(s *tugboatv1.PromotionPreviewStatus) { s.Groups[0].Digest = "sha256:abc" },
			[]string{"status.groups[0].digest", "should match"}},
		{"an unknown dry run", func(s *tugboatv1.PromotionPreviewStatus) { s.Groups[0].DryRun = "maybe" },
			[]string{"status.groups[0].dryRun", `Unsupported value: "maybe"`}},
		{"an unknown target phase", func(s *tugboatv1.PromotionPreviewStatus) {
			s.Targets = []tugboatv1.PreviewTargetStatus{{ActionID: strings.Repeat("0a", 16), Phase: "Lost"}}
		}, []string{"status.targets[0].phase", `Unsupported value: "Lost"`}},
	}
	for _, row := range statusRows {
		t.Run("status: "+row.name, func(t *testing.T) {
			g := NewWithT(t)
			bad := p.DeepCopy()
			bad.Status.Groups = []tugboatv1.PreviewGroup{validGroup()}
			row.mutate(&bad.Status)
			err := c.Status().Update(ctx, bad)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			for _, w := range row.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}

	t.Run("a valid preview round-trips; its spec is immutable", func(t *testing.T) {
		g := NewWithT(t)
		got := &tugboatv1.PromotionPreview{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		got.Status = tugboatv1.PromotionPreviewStatus{
			Targets: []tugboatv1.PreviewTargetStatus{{ActionID: strings.Repeat("0a", 16), Phase: tugboatv1.ActionSucceeded, Message: "previewed", Digest: strings.Repeat("cd", 32), Revision: 3, Deliveries: 1}},
			Groups:  []tugboatv1.PreviewGroup{validGroup()}, OtherChanges: 1,
		}
		want := got.Status.DeepCopy()
		g.Expect(c.Status().Update(ctx, got)).To(Succeed())
		again := &tugboatv1.PromotionPreview{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), again)).To(Succeed())
		g.Expect(again.Status).To(Equal(*want))

		again.Spec.Version = "1.5.0"
		err := c.Update(ctx, again)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec is immutable"))
	})

	t.Run("an on-demand preview: the hub writes version and targets once", func(t *testing.T) {
		g := NewWithT(t)
		od := &tugboatv1.PromotionPreview{ObjectMeta: meta("preview-on-demand"),
			Spec: tugboatv1.PromotionPreviewSpec{Pipeline: "web", From: "staging", To: "production"}}
		g.Expect(c.Create(ctx, od)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, od) })
		moved := od.DeepCopy()
		moved.Spec.To = "dev"
		err := c.Update(ctx, moved)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec is immutable"))

		full := minimalPreview("x")
		od.Spec.Version, od.Spec.Targets, od.Spec.TotalTargets, od.Spec.Deadline = full.Spec.Version, full.Spec.Targets, full.Spec.TotalTargets, full.Spec.Deadline
		g.Expect(c.Update(ctx, od)).To(Succeed())
		od.Spec.Version = "9.9.9"
		err = c.Update(ctx, od)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec is immutable"))
	})

	t.Run("status.preview of a Promotion", func(t *testing.T) {
		g := NewWithT(t)
		pr := minimalPromotion("preview-summary")
		g.Expect(c.Create(ctx, pr)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, pr) })
		bad := pr.DeepCopy()
		bad.Status.Preview = &tugboatv1.PreviewSummary{Phase: "Guessed"}
		err := c.Status().Update(ctx, bad)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring(`status.preview.phase: Unsupported value: "Guessed"`))

		for _, row := range []struct {
			name  string
			reset int32
			want  string
		}{
			{"negative", -1, "status.preview.approvalsReset: Invalid value: -1: preview.approvalsReset in body should be greater than or equal to 0"},
			{"more than status.approvals holds", 21, "status.preview.approvalsReset: Invalid value: 21: preview.approvalsReset in body should be less than or equal to 20"},
		} {
			bad := pr.DeepCopy()
			bad.Status.Preview = &tugboatv1.PreviewSummary{Phase: tugboatv1.PreviewReady, ChangedSinceApproval: true, ApprovalsReset: row.reset}
			err := c.Status().Update(ctx, bad)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: want an Invalid error, got %v", row.name, err)
			g.Expect(err.Error()).To(ContainSubstring(row.want), row.name)
		}

		ok := pr.DeepCopy()
		now := metav1.NewTime(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
		ok.Status.Preview = &tugboatv1.PreviewSummary{Phase: tugboatv1.PreviewReady, Name: pr.Name, Digest: strings.Repeat("cd", 32),
			ObjectsChanged: 2, LinesChanged: 4, Groups: 1, TargetsPreviewed: 3, ComputedAt: &now,
			ApprovedPhase: tugboatv1.PreviewStale, ApprovedDigest: strings.Repeat("ab", 32), RecomputedAt: &now, ChangedSinceApproval: true, ApprovalsReset: 2}
		g.Expect(c.Status().Update(ctx, ok)).To(Succeed())
		again := &tugboatv1.Promotion{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pr), again)).To(Succeed())
		g.Expect(again.Status.Preview.ApprovalsReset).To(BeEquivalentTo(2))
	})

	// gates.reapproveOnChange (asking for approval again when the preview
	// changed after it) needs an approval gate.
	t.Run("gates.reapproveOnChange", func(t *testing.T) {
		for _, row := range []struct {
			name  string
			gates tugboatv1.Gates
			want  string
		}{
			{"without requireApproval", tugboatv1.Gates{ReapproveOnChange: true},
				"spec.environments[0].gates.reapproveOnChange: Invalid value: reapproveOnChange needs requireApproval"},
		} {
			g := NewWithT(t)
			err := c.Create(ctx, pipelineWith("reapprove-bad", func(p *tugboatv1.Pipeline) { p.Spec.Environments[0].Gates = row.gates }))
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: want an Invalid error, got %v", row.name, err)
			g.Expect(err.Error()).To(ContainSubstring(row.want), row.name)
		}
		for i, gates := range []tugboatv1.Gates{
			{RequireApproval: true, ReapproveOnChange: true},
			{RequireApproval: false, ReapproveOnChange: false},
		} {
			g := NewWithT(t)
			p := pipelineWith(fmt.Sprintf("reapprove-ok-%d", i), func(p *tugboatv1.Pipeline) { p.Spec.Environments[0].Gates = gates })
			g.Expect(c.Create(ctx, p)).To(Succeed())
			t.Cleanup(func() { _ = c.Delete(ctx, p) })
			got := &tugboatv1.Pipeline{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
			g.Expect(got.Spec.Environments[0].Gates.ReapproveOnChange).To(Equal(gates.ReapproveOnChange))
		}
	})
}
