package slack_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	slackapi "github.com/slack-go/slack"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify/notifytest"
	"tugboat.dev/tugboat/controllers/notify/slack"
)

// The Slack approval message carries the preview's summary line (issue 26).
func TestBlocks_approvalMessageCarriesThePreviewSummary(t *testing.T) {
	g := NewWithT(t)
	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionWaitingApproval)
	n.Promotion.Preview = "Ready: 3 objects and 7 lines change (tugboat diff web-production-1.4.0)"
	b, err := json.Marshal(slack.Blocks(n, true))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring("Preview"))
	g.Expect(string(b)).To(ContainSubstring("Ready: 3 objects and 7 lines change (tugboat diff web-production-1.4.0)"))
}

// The approval message links to the Promotion's page on the dashboard (its
// preview): a URL button in a block of its own, within Slack's limits,
// that stays when a decision removes the Approve and Reject buttons.
func TestSlack_approvalMessageLinksToTheDashboard(t *testing.T) {
	g := NewWithT(t)
	fs, srv := newFakeSlack(t)
	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionWaitingApproval)
	n.Promotion.Preview = "Ready: 3 objects and 7 lines change (tugboat diff web-production-1.4.0)"
	n.Promotion.DashboardURL = "https://tugboat.example.com/ui/promotions/web-production-1.4.0"
	_, err := webhookNotifier(t, srv, "signing-secret").Notify(context.Background(), n, "")
	g.Expect(err).NotTo(HaveOccurred())
	calls, problems := fs.snapshot()
	g.Expect(problems).To(BeEmpty())
	g.Expect(allText(calls[0].Blocks)).To(ContainSubstring("Ready: 3 objects and 7 lines change"))
	actions := blocksOfType(calls[0].Blocks, "actions")
	g.Expect(actions).To(HaveLen(2))
	g.Expect(actions[0]["block_id"]).To(Equal(slack.LinksBlockID))
	g.Expect(actions[1]["block_id"]).To(Equal(slack.DecisionBlockID))
	link := actions[0]["elements"].([]any)[0].(map[string]any)
	g.Expect(link["action_id"]).To(Equal(slack.ActionOpenDashboard))
	g.Expect(link["url"]).To(Equal("https://tugboat.example.com/ui/promotions/web-production-1.4.0"))
	g.Expect(link["text"].(map[string]any)["text"]).To(Equal("See what changes (dashboard)"))
	g.Expect(link).NotTo(HaveKey("value"))

	raw, _ := json.Marshal(calls[0].Blocks)
	var original slackapi.Blocks
	g.Expect(json.Unmarshal(raw, &original)).To(Succeed())
	decided, err := json.Marshal(slack.DecisionMessage(original.BlockSet, slack.Outcome{Kind: slack.OutcomeApproved, UserID: "U0CAROL"}))
	g.Expect(err).NotTo(HaveOccurred())
	var m struct {
		Text   string           `json:"text"`
		Blocks []map[string]any `json:"blocks"`
	}
	g.Expect(json.Unmarshal(decided, &m)).To(Succeed())
	g.Expect(validateMessage(m.Text, m.Blocks)).To(BeEmpty())
	after := blocksOfType(m.Blocks, "actions")
	g.Expect(after).To(HaveLen(1), "the decision buttons go, the link stays")
	g.Expect(after[0]["block_id"]).To(Equal(slack.LinksBlockID))
}

// An address Slack would refuse, or that is not a web page, gets no
// button; the message is still valid and delivered.
func TestSlack_dashboardLinkBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		button    bool
	}{
		{"none", "", false},
		{"at Slack's limit", "https://tugboat.example.com/" + strings.Repeat("a", 3000-len("https://tugboat.example.com/")), true},
		{"longer than Slack's 3000", "https://tugboat.example.com/" + strings.Repeat("a", 3001-len("https://tugboat.example.com/")), false},
		{"javascript", "javascript:alert(1)", false},
		{"relative", "/ui/promotions/web", false},
		{"no host", "https:///ui/promotions/web", false},
		{"not a URL", "https://tugboat.example.com/%zz", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fs, srv := newFakeSlack(t)
			n := notifytest.Promotion(tugboatv1alpha1.EventPromotionWaitingApproval)
			n.Promotion.DashboardURL = tc.url
			_, err := webhookNotifier(t, srv, "").Notify(context.Background(), n, "")
			g.Expect(err).NotTo(HaveOccurred())
			calls, problems := fs.snapshot()
			g.Expect(problems).To(BeEmpty())
			g.Expect(calls).To(HaveLen(1))
			actions := blocksOfType(calls[0].Blocks, "actions")
			if !tc.button {
				g.Expect(actions).To(BeEmpty())
				return
			}
			g.Expect(actions).To(HaveLen(1))
			link := actions[0]["elements"].([]any)[0].(map[string]any)
			g.Expect(link["url"]).To(Equal(tc.url))
			g.Expect(link["text"].(map[string]any)["text"]).To(Equal("Open in the dashboard"))
		})
	}
}
