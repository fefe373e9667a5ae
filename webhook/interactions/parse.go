package interactions

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"time"

	"github.com/slack-go/slack"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	notifyslack "tugboat.dev/tugboat/controllers/notify/slack"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// Interaction is the part of a Slack block_actions payload the hub acts on.
type Interaction struct {
	// Decision is Approve or Reject, from the clicked button's action id.
	Decision tugboatv1alpha1.Decision
	// Namespace, Pipeline, Promotion and Notifier come from the button's
	// value (Pipeline is empty in a message posted before the value named
	// it). Only the signing secret of that notifier of that Pipeline
	// authenticates the click.
	Namespace, Pipeline, Promotion, Notifier string
	// UserID and UserName identify the Slack user who clicked (trusted only
	// once the signature verified).
	UserID, UserName string
	// ResponseURL updates the message.
	ResponseURL string
	// Message is the clicked message's blocks, to update it in place.
	Message []slack.Block
}

// ErrLinkClick is Parse's answer to a click on the link button to the
// dashboard: Slack opened the page and tells the endpoint, which has
// nothing to record.
var ErrLinkClick = errors.New("a click on the dashboard link: nothing to record")

// Parse decodes an interaction request's body: a form with a "payload"
// field holding a block_actions interaction whose one tugboat action is an
// Approve or Reject button. The error names what is wrong.
func Parse(contentType string, body []byte) (*Interaction, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, errors.New("content type must be application/x-www-form-urlencoded")
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("malformed form body: %w", err)
	}
	raw := form.Get("payload")
	if raw == "" {
		return nil, errors.New("payload: required")
	}
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(raw), &cb); err != nil {
		return nil, fmt.Errorf("payload: malformed JSON: %v", clipErr(err))
	}
	if cb.Type != slack.InteractionTypeBlockActions {
		return nil, fmt.Errorf("payload.type: %q is not handled; only block_actions", clip.String(string(cb.Type), 40))
	}
	if cb.User.ID == "" {
		return nil, errors.New("payload.user.id: required")
	}
	var found *slack.BlockAction
	for _, a := range cb.ActionCallback.BlockActions {
		if a != nil && (a.ActionID == notifyslack.ActionApprove || a.ActionID == notifyslack.ActionReject) {
			if found != nil {
				return nil, errors.New("payload.actions: more than one tugboat action")
			}
			found = a
		}
	}
	if found == nil {
		for _, a := range cb.ActionCallback.BlockActions {
			if a != nil && a.ActionID == notifyslack.ActionOpenDashboard {
				return nil, ErrLinkClick
			}
		}
		return nil, errors.New("payload.actions: no " + notifyslack.ActionApprove + " or " + notifyslack.ActionReject + " action")
	}
	in := &Interaction{Decision: tugboatv1alpha1.DecisionApprove, UserID: cb.User.ID, UserName: cb.User.Name, ResponseURL: cb.ResponseURL,
		Message: cb.Message.Blocks.BlockSet}
	if found.ActionID == notifyslack.ActionReject {
		in.Decision = tugboatv1alpha1.DecisionReject
	}
	if in.UserName == "" {
		in.UserName = cb.User.Username
	}
	if len(in.UserID) > 64 || len(in.UserName) > 256 {
		return nil, errors.New("payload.user: id or name too long")
	}
	a, err := notifyslack.ParseActionValue(found.Value)
	if err != nil {
		return nil, fmt.Errorf("payload.actions[].value: %w", err)
	}
	in.Namespace, in.Pipeline, in.Promotion, in.Notifier = a.Namespace, a.Pipeline, a.Promotion, a.Notifier
	return in, nil
}

func clipErr(err error) string { return clip.String(err.Error(), 200) }

// classify maps an error of request.Decide to a status code and a message
// for the person who clicked.
func classify(err error) (int, string) {
	switch {
	case errors.Is(err, request.ErrNotWaiting):
		return 409, "This promotion no longer waits for approval: " + clip.String(err.Error(), 300)
	case errors.Is(err, request.ErrNotFound):
		return 404, clip.String(err.Error(), 300)
	case errors.Is(err, request.ErrInvalid):
		return 400, clip.String(err.Error(), 300)
	}
	if isNotAllowed(err) {
		return 403, clip.String(err.Error(), 300)
	}
	return 503, "The hub could not record the decision; try again."
}

func metaNow(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }
