package slack_test

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"

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
