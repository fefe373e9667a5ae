package interactions_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	notifyslack "tugboat.dev/tugboat/controllers/notify/slack"
	"tugboat.dev/tugboat/webhook/interactions"
)

// linkClick is the block_actions payload Slack sends when someone clicks
// the link button to the dashboard.
func linkClick(actionID string) string {
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]any{"id": "UAPPROVER1"},
		"actions": []map[string]any{{"action_id": actionID, "block_id": notifyslack.LinksBlockID, "type": "button",
			"url": "https://tugboat.example.com/ui/promotions/web-production-1.4.0"}},
	})
	return url.Values{"payload": {string(p)}}.Encode()
}

// A click on the dashboard link is acknowledged (Slack shows no error
// beside the button) and records nothing; any other unknown action is
// still refused.
func TestInteractions_dashboardLinkClickIsAcknowledged(t *testing.T) {
	g := NewWithT(t)
	_, err := interactions.Parse("application/x-www-form-urlencoded", []byte(linkClick(notifyslack.ActionOpenDashboard)))
	g.Expect(err).To(MatchError(interactions.ErrLinkClick))
	_, err = interactions.Parse("application/x-www-form-urlencoded", []byte(linkClick("somebody_else")))
	g.Expect(err).To(MatchError(ContainSubstring("no tugboat_approve or tugboat_reject action")))

	// Nothing is read or written for a link click: the handler needs no
	// client to answer it.
	h := interactions.New(nil, nil, nil, nil, interactions.Options{})
	for _, tc := range []struct {
		action string
		code   int
	}{{notifyslack.ActionOpenDashboard, http.StatusOK}, {"somebody_else", http.StatusBadRequest}} {
		req := httptest.NewRequest(http.MethodPost, interactions.Path, strings.NewReader(linkClick(tc.action)))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		g.Expect(rec.Code).To(Equal(tc.code), rec.Body.String())
	}
}
