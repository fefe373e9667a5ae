package interactions_test

import (
	"strings"
	"testing"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	notifyslack "tugboat.dev/tugboat/controllers/notify/slack"
	"tugboat.dev/tugboat/webhook/interactions"
)

// FuzzParse feeds the interaction parser arbitrary bodies: it never
// panics, and what it accepts is one tugboat decision with a valid
// Promotion reference and a Slack user.
func FuzzParse(f *testing.F) {
	f.Add("application/x-www-form-urlencoded", click(notifyslack.ActionApprove, "apps/web/web-production-1.4.0/slack", "U1", "pat", "https://hooks.slack.com/actions/T/1/x"))
	f.Add("application/x-www-form-urlencoded", click(notifyslack.ActionApprove, "apps/web-production-1.4.0/slack", "U1", "pat", "https://hooks.slack.com/actions/T/1/x"))
	f.Add("application/x-www-form-urlencoded", click(notifyslack.ActionReject, "apps/web-production-1.4.0/slack", "U1", "pat", ""))
	f.Add("application/x-www-form-urlencoded; charset=utf-8", []byte("payload=%7B%7D"))
	f.Add("text/plain", []byte("payload="))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		in, err := interactions.Parse(contentType, body)
		if err != nil {
			if in != nil {
				t.Fatal("an error with a result")
			}
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if in.Decision != tugboatv1alpha1.DecisionApprove && in.Decision != tugboatv1alpha1.DecisionReject {
			t.Fatalf("decision %q", in.Decision)
		}
		if in.UserID == "" || in.Namespace == "" || in.Promotion == "" || in.Notifier == "" {
			t.Fatalf("accepted an incomplete interaction: %+v", in)
		}
		if in.Pipeline != "" {
			if got := notifyslack.ActionValue(in.Namespace, in.Pipeline, in.Promotion, in.Notifier); strings.Count(got, "/") != 3 {
				t.Fatalf("value %q does not round-trip", got)
			}
		}
	})
}
