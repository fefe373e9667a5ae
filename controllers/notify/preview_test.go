package notify_test

import (
	"testing"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
	"tugboat.dev/tugboat/controllers/notify/notifytest"
)

// previewLine is the summary the deliverer puts in a notice (issue 26).
const previewLine = "Ready: 3 objects and 7 lines change (2 distinct changes; 3 targets previewed) (tugboat diff web-production-1.4.0)"

// The approval notice carries the preview's summary line (email, and every
// notifier that renders the facts or the text).
func TestText_carriesThePreviewSummary(t *testing.T) {
	g := NewWithT(t)
	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionWaitingApproval)
	g.Expect(notify.Text(n)).NotTo(ContainSubstring("Preview:"), "no preview, no line")
	n.Promotion.Preview = previewLine
	g.Expect(notify.Facts(n)).To(ContainElement(notify.Fact{Label: "Preview", Value: previewLine}))
	g.Expect(notify.Text(n)).To(ContainSubstring("\nPreview: " + previewLine + "\n"))
}
