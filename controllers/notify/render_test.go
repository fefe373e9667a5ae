package notify_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
	"tugboat.dev/tugboat/controllers/notify/notifytest"
)

func TestTitle(t *testing.T) {
	g := NewWithT(t)
	for e, want := range map[tugboatv1alpha1.NotifyEvent]string{
		tugboatv1alpha1.EventPromotionCreated:         "web 1.4.0 → production: Created",
		tugboatv1alpha1.EventPromotionWaitingApproval: "web 1.4.0 → production: Waiting for approval",
		tugboatv1alpha1.EventPromotionSucceeded:       "web 1.4.0 → production: Succeeded",
		tugboatv1alpha1.EventPromotionFailed:          "web 1.4.0 → production: Failed",
		tugboatv1alpha1.EventPromotionRollingBack:     "web 1.4.0 → production: Rolling back",
	} {
		g.Expect(notify.Title(notifytest.Promotion(e))).To(Equal(want))
	}
	g.Expect(notify.Title(notifytest.Deployment(tugboatv1alpha1.EventDeploymentDegraded))).To(Equal("web 1.4.0 on staging-1/apps/web: Degraded"))
	hold := notify.Notice{Event: tugboatv1alpha1.EventHoldStarted, Pipeline: "web", Hold: &notify.Hold{Environment: "production", Version: "1.3.0"}}
	g.Expect(notify.Title(hold)).To(Equal("web: production held at 1.3.0"))
	hold.Event = tugboatv1alpha1.EventHoldReleased
	g.Expect(notify.Title(hold)).To(Equal("web: hold on production released"))

	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionFailed)
	n.Promotion.To = "prod\r\nBcc: evil@example.com"
	g.Expect(notify.Title(n)).NotTo(ContainSubstring("\n"), "a title is one line (it becomes a mail subject)")
}

func TestText(t *testing.T) {
	g := NewWithT(t)
	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionFailed)
	text := notify.Text(n)
	g.Expect(text).To(HavePrefix("web 1.4.0 → production: Failed\n\nPipeline: apps/web\n"))
	g.Expect(text).To(ContainSubstring("Reason: timed out after 30m"))
	g.Expect(text).To(ContainSubstring("Approvals: 2 of 2: Approve by alice@example.com (Kubernetes); Approve by U024BE7LH bob (Slack)"))
	g.Expect(text).To(ContainSubstring("Targets:\n  production prod-eu/apps/web: 1.4.0 revision 12, Current, done\n  production prod-us/apps/web: 1.4.0 revision 9, Failed\n"))
	g.Expect(text).To(ContainSubstring("Timeline:\n  2026-11-02 09:20:00 UTC hub: promotion created"))
	g.Expect(notify.IsFailure(n)).To(BeTrue())
}

func TestJoinLimited(t *testing.T) {
	g := NewWithT(t)
	lines := []string{"aaaa", "bbbb", "cccc", "dddd"}
	g.Expect(notify.JoinLimited(lines, "\n", 100)).To(Equal("aaaa\nbbbb\ncccc\ndddd"))
	g.Expect(notify.JoinLimited(lines, "\n", 19)).To(Equal("aaaa\nbbbb\ncccc\ndddd"), "exactly fits")
	got := notify.JoinLimited(lines, "\n", 18)
	g.Expect(got).To(Equal("aaaa\nbbbb\n… 2 more"))
	g.Expect(utf8.RuneCountInString(got)).To(BeNumerically("<=", 18))

	for max := 30; max < 3000; max += 7 {
		var many []string
		for i := range 500 {
			many = append(many, fmt.Sprintf("step %03d: Pod created", i))
		}
		got := notify.JoinLimited(many, "\n", max)
		g.Expect(utf8.RuneCountInString(got)).To(BeNumerically("<=", max), "max %d", max)
		shown := strings.Count(got, "step ")
		g.Expect(got).To(HaveSuffix(fmt.Sprintf("… %d more", 500-shown)), "max %d: %q", max, got)
	}
	g.Expect(notify.JoinLimited([]string{strings.Repeat("x", 50)}, "\n", 10)).To(Equal("xxxxxxxxx…"))
	g.Expect(utf8.RuneCountInString(notify.JoinLimited(lines, "\n", 3))).To(BeNumerically("<=", 3))
	g.Expect(notify.JoinLimited([]string{strings.Repeat("x", 50), "y"}, "\n", 20)).To(Equal("xxxxxxxxxx…\n… 1 more"))
	g.Expect(notify.Truncate("héllo wörld", 5)).To(Equal("héll…"))
}

func TestPrintable(t *testing.T) {
	g := NewWithT(t)
	g.Expect(notify.Printable("a\x00b\x1b[31m\n\tc  d\xff", 100)).To(Equal("ab[31m c d"))
	g.Expect(utf8.RuneCountInString(notify.Printable(strings.Repeat("é", 500), 200))).To(Equal(200))
}

func TestID(t *testing.T) {
	g := NewWithT(t)
	a := notifytest.Promotion(tugboatv1alpha1.EventPromotionRunning)
	g.Expect(notify.ID(a)).To(Equal(notify.ID(notifytest.Promotion(tugboatv1alpha1.EventPromotionRunning))), "stable")
	g.Expect(notify.ID(a)).NotTo(Equal(notify.ID(notifytest.Promotion(tugboatv1alpha1.EventPromotionSucceeded))))
	g.Expect(notify.ID(notifytest.Deployment(tugboatv1alpha1.EventDeploymentStarted))).NotTo(Equal(notify.ID(notifytest.Deployment(tugboatv1alpha1.EventDeploymentHealthy))))
}
