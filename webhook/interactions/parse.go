package interactions

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// Interaction is the part of a Slack block_actions payload the hub acts on.
type Interaction struct {
	// Decision is Approve or Reject, from the clicked button's action id.
	Decision tugboatv1alpha1.Decision
	// Namespace, Promotion and Notifier come from the button's value.
	Namespace, Promotion, Notifier string
	// UserID and UserName identify the Slack user who clicked (trusted only
	// once the signature verified).
	UserID, UserName string
	// ResponseURL updates the message.
	ResponseURL string
}

// ActionValue is the value of a button about a Promotion, for the Slack
// notifier's notifier (the inverse of ParseActionValue).
func ActionValue(namespace, promotion, notifier string) string {
	return namespace + "/" + promotion + "/" + notifier
}

// ParseActionValue splits a button's value into the Promotion's namespace
// and name and the notifier's name.
func ParseActionValue(v string) (namespace, promotion, notifier string, err error) {
	parts := strings.Split(v, "/")
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("action value %q: want namespace/promotion/notifier", clip(v, 80))
	}
	namespace, promotion, notifier = parts[0], parts[1], parts[2]
	switch {
	case len(validation.IsDNS1123Label(namespace)) > 0:
		return "", "", "", fmt.Errorf("action value: namespace %q is not a valid namespace", clip(namespace, 80))
	case len(promotion) > 253 || len(validation.IsDNS1123Subdomain(promotion)) > 0:
		return "", "", "", fmt.Errorf("action value: promotion %q is not a valid name", clip(promotion, 80))
	case len(validation.IsDNS1123Label(notifier)) > 0:
		return "", "", "", fmt.Errorf("action value: notifier %q is not a valid name", clip(notifier, 80))
	}
	return namespace, promotion, notifier, nil
}

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
		return nil, fmt.Errorf("malformed form body: %v", err)
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
		return nil, fmt.Errorf("payload.type: %q is not handled; only block_actions", clip(string(cb.Type), 40))
	}
	if cb.User.ID == "" {
		return nil, errors.New("payload.user.id: required")
	}
	var found *slack.BlockAction
	for _, a := range cb.ActionCallback.BlockActions {
		if a != nil && (a.ActionID == ActionApprove || a.ActionID == ActionReject) {
			if found != nil {
				return nil, errors.New("payload.actions: more than one tugboat action")
			}
			found = a
		}
	}
	if found == nil {
		return nil, errors.New("payload.actions: no " + ActionApprove + " or " + ActionReject + " action")
	}
	in := &Interaction{Decision: tugboatv1alpha1.DecisionApprove, UserID: cb.User.ID, UserName: cb.User.Name, ResponseURL: cb.ResponseURL}
	if found.ActionID == ActionReject {
		in.Decision = tugboatv1alpha1.DecisionReject
	}
	if in.UserName == "" {
		in.UserName = cb.User.Name
	}
	if len(in.UserID) > 64 || len(in.UserName) > 256 {
		return nil, errors.New("payload.user: id or name too long")
	}
	if in.Namespace, in.Promotion, in.Notifier, err = ParseActionValue(found.Value); err != nil {
		return nil, fmt.Errorf("payload.actions[].value: %v", err)
	}
	return in, nil
}

func clipErr(err error) string { return clip(err.Error(), 200) }

// classify maps an error of request.Decide to a status code and a message
// for the person who clicked.
func classify(err error) (int, string) {
	switch {
	case errors.Is(err, request.ErrNotWaiting):
		return 409, "This promotion no longer waits for approval: " + clip(err.Error(), 300)
	case errors.Is(err, request.ErrNotFound):
		return 404, clip(err.Error(), 300)
	case errors.Is(err, request.ErrInvalid):
		return 400, clip(err.Error(), 300)
	}
	if isNotAllowed(err) {
		return 403, clip(err.Error(), 300)
	}
	return 503, "The hub could not record the decision; try again."
}

func metaNow(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }
