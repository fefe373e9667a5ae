package webhook_test

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify/notifytest"
	"tugboat.dev/tugboat/controllers/notify/webhook"
)

// The signed webhook payload carries the preview's summary (issue 26) in
// promotion.preview.
func TestPayload_carriesThePreviewSummary(t *testing.T) {
	g := NewWithT(t)
	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionWaitingApproval)
	n.Promotion.Preview = "Ready: 3 objects and 7 lines change (tugboat diff web-production-1.4.0)"
	b, err := json.Marshal(webhook.NewPayload(n))
	g.Expect(err).NotTo(HaveOccurred())
	var raw map[string]any
	g.Expect(json.Unmarshal(b, &raw)).To(Succeed())
	g.Expect(raw["promotion"]).To(HaveKeyWithValue("preview", n.Promotion.Preview))
}
