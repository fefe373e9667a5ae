package slack

import (
	"fmt"
	"strings"

	"github.com/slack-go/slack"
	"k8s.io/apimachinery/pkg/util/validation"

	"tugboat.dev/tugboat/controllers/notify"
)

// Action ids of the buttons (unique within a message). The button value of
// both is ActionValue(namespace, pipeline, promotion, notifier).
const (
	ActionApprove = "tugboat_approve"
	ActionReject  = "tugboat_reject"
	// ActionOpenDashboard is the link button to the Promotion's page on
	// the dashboard: Slack opens the page, and tells the interaction
	// endpoint, which has nothing to do.
	ActionOpenDashboard = "tugboat_open_dashboard"
)

// Action is what a button's value names: the Promotion, and the notifier
// of its Pipeline that posted the message, whose signing secret alone may
// authenticate a click on it.
type Action struct {
	Namespace, Pipeline, Promotion, Notifier string
}

// ActionValue is a button's value:
// "<namespace>/<pipeline>/<promotion>/<notifier>".
func ActionValue(namespace, pipeline, promotion, notifier string) string {
	return namespace + "/" + pipeline + "/" + promotion + "/" + notifier
}

// ParseActionValue splits a button value made by ActionValue. It checks the
// shape only (a namespace and a notifier name that are DNS labels, Pipeline
// and Promotion names that are DNS subdomains): the value comes from Slack,
// and the signature on the interaction is what makes it trustworthy.
//
// Messages posted before the value named the Pipeline carry
// "<namespace>/<promotion>/<notifier>": that value is taken too, with
// Pipeline empty (the hub then reads it from the Promotion).
func ParseActionValue(value string) (Action, error) {
	if len(value) > MaxButtonValue {
		return Action{}, fmt.Errorf("action value is longer than %d bytes", MaxButtonValue)
	}
	parts := strings.Split(value, "/")
	var a Action
	switch len(parts) {
	case 4:
		a = Action{Namespace: parts[0], Pipeline: parts[1], Promotion: parts[2], Notifier: parts[3]}
	case 3:
		a = Action{Namespace: parts[0], Promotion: parts[1], Notifier: parts[2]}
	default:
		return Action{}, fmt.Errorf("action value %q is not namespace/pipeline/promotion/notifier", notify.Truncate(notify.Printable(value, 100), 100))
	}
	if errs := validation.IsDNS1123Label(a.Namespace); len(errs) > 0 {
		return Action{}, fmt.Errorf("action value: namespace: %s", strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(a.Pipeline); len(parts) == 4 && len(errs) > 0 {
		return Action{}, fmt.Errorf("action value: pipeline: %s", strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(a.Promotion); len(errs) > 0 {
		return Action{}, fmt.Errorf("action value: promotion: %s", strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(a.Notifier); len(errs) > 0 {
		return Action{}, fmt.Errorf("action value: notifier: %s", strings.Join(errs, "; "))
	}
	return a, nil
}

// OutcomeKind is what became of a click on Approve or Reject.
type OutcomeKind string

// Outcomes.
const (
	// OutcomeApproved: the click approved the promotion (the gate is
	// satisfied). The buttons are removed.
	OutcomeApproved OutcomeKind = "Approved"
	// OutcomeRejected: the click rejected the promotion. The buttons are
	// removed.
	OutcomeRejected OutcomeKind = "Rejected"
	// OutcomeVoted: the approval was recorded, more are needed. The
	// buttons stay.
	OutcomeVoted OutcomeKind = "Voted"
	// OutcomeRefused: the click was refused (the user may not approve, or
	// already voted). The buttons stay, for someone who may.
	OutcomeRefused OutcomeKind = "Refused"
	// OutcomeClosed: the promotion no longer waits for approval (decided
	// elsewhere, aborted, gone). The buttons are removed.
	OutcomeClosed OutcomeKind = "Closed"
)

// Outcome is what the hub did with a click, for DecisionMessage.
type Outcome struct {
	Kind OutcomeKind
	// UserID is the Slack user id from the verified interaction (mentioned,
	// so Slack shows the name); UserName is shown when the id is not a
	// Slack user id.
	UserID, UserName string
	// Message adds detail: "1 of 2 approvals", the reason of a refusal.
	Message string
}

// Text is the outcome as one mrkdwn line.
func (o Outcome) Text() string {
	who := escape(notify.OneLine(o.UserName))
	if slackUserID.MatchString(o.UserID) {
		who = "<@" + o.UserID + ">"
	} else if who == "" {
		who = escape(notify.OneLine(o.UserID))
	}
	var s string
	switch o.Kind {
	case OutcomeApproved:
		s = ":white_check_mark: Approved by " + who
	case OutcomeRejected:
		s = ":x: Rejected by " + who
	case OutcomeVoted:
		s = ":ballot_box_with_check: Approval by " + who + " recorded"
	case OutcomeRefused:
		s = ":warning: The decision of " + who + " was refused"
	default:
		s = ":information_source: No longer waiting for approval"
	}
	if o.Message != "" {
		s += ": " + escape(notify.OneLine(o.Message))
	}
	return notify.Truncate(s, MaxSectionText)
}

func (o Outcome) keepsButtons() bool { return o.Kind == OutcomeVoted || o.Kind == OutcomeRefused }

// DecisionMessage is the message the hub posts to an interaction's
// response_url to replace the clicked message (replace_original): the
// original blocks (the interaction payload's message.blocks), with the
// outcome in a section below them (replacing an earlier outcome), and
// without the Approve/Reject buttons unless the outcome keeps them (a vote
// that needs more, a refused click).
func DecisionMessage(original []slack.Block, o Outcome) *slack.WebhookMessage {
	blocks := make([]slack.Block, 0, len(original)+1)
	var actions slack.Block
	for _, b := range original {
		switch {
		case b == nil, b.ID() == OutcomeBlockID:
			continue
		case b.BlockType() == slack.MBTAction && b.ID() == DecisionBlockID:
			actions = b
			continue
		}
		blocks = append(blocks, b)
	}
	if len(blocks) > MaxBlocks-2 {
		blocks = blocks[:MaxBlocks-2]
	}
	blocks = append(blocks, slack.NewSectionBlock(mrkdwn(o.Text()), nil, nil, slack.SectionBlockOptionBlockID(OutcomeBlockID)))
	if actions != nil && o.keepsButtons() {
		blocks = append(blocks, actions)
	}
	return &slack.WebhookMessage{
		Text:            o.Text(),
		Blocks:          &slack.Blocks{BlockSet: blocks},
		ReplaceOriginal: true,
	}
}
