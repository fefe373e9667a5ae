package slack

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackutilsx"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
)

// Slack's Block Kit limits (https://docs.slack.dev/reference/block-kit).
const (
	// MaxBlocks is the most blocks a message may hold.
	MaxBlocks = 50
	// MaxHeaderText is the longest header text.
	MaxHeaderText = 150
	// MaxSectionText is the longest section text.
	MaxSectionText = 3000
	// MaxSectionFields is the most fields a section may hold; MaxFieldText
	// the longest field.
	MaxSectionFields = 10
	MaxFieldText     = 2000
	// MaxButtonValue is the longest button value.
	MaxButtonValue = 2000
	// MaxButtonText is the longest button text; MaxButtonURL the longest
	// url of a link button.
	MaxButtonText = 75
	MaxButtonURL  = 3000
)

// Block ids of the blocks the hub's interaction endpoint looks for.
const (
	// DecisionBlockID is the actions block with the Approve and Reject
	// buttons.
	DecisionBlockID = "tugboat_decision"
	// OutcomeBlockID is the section DecisionMessage adds.
	OutcomeBlockID = "tugboat_outcome"
	// LinksBlockID is the actions block with the link to the Promotion's
	// page on the dashboard (kept when DecisionMessage removes the
	// decision buttons).
	LinksBlockID = "tugboat_links"
)

// facts that get a section of their own rather than a field (Dashboard: a
// button of its own).
var ownSection = map[string]bool{
	"Approvals": true, "Link": true, "Dashboard": true, "Reason": true, "Message": true, "Description": true, "Time": true,
}

// Blocks is n as Block Kit blocks: a header (the title), the facts as
// fields, the reason of a failure, the approvals, the link, the targets with
// their health, the timeline (cut to fit, "… N more"), a context line, and,
// when buttons is true and n.Approval is set, Approve and Reject buttons.
// Every Slack limit is respected (MaxBlocks, MaxHeaderText, MaxSectionText,
// MaxSectionFields, MaxFieldText).
func Blocks(n notify.Notice, buttons bool) []slack.Block {
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain(notify.Truncate(notify.Title(n), MaxHeaderText))),
	}
	var fields []*slack.TextBlockObject
	facts := map[string]string{}
	for _, f := range notify.Facts(n) {
		facts[f.Label] = f.Value
		if ownSection[f.Label] {
			continue
		}
		fields = append(fields, mrkdwn(notify.Truncate("*"+escape(f.Label)+"*\n"+escape(f.Value), MaxFieldText)))
	}
	for len(fields) > 0 {
		k := min(len(fields), MaxSectionFields)
		blocks = append(blocks, slack.NewSectionBlock(nil, fields[:k], nil))
		fields = fields[k:]
	}
	for _, label := range []string{"Reason", "Message", "Description"} {
		if v, ok := facts[label]; ok {
			blocks = append(blocks, section("*"+label+"*\n>"+escape(v)))
		}
	}
	if p := n.Promotion; p != nil && (p.ApprovalsRequired > 0 || len(p.Votes) > 0) {
		lines := []string{fmt.Sprintf("*Approvals* %s", approvalCount(*p))}
		for _, v := range p.Votes {
			lines = append(lines, "• "+vote(v))
		}
		blocks = append(blocks, section(notify.JoinLimited(lines, "\n", MaxSectionText)))
	}
	if p := n.Promotion; p != nil && p.URL != "" {
		if link, ok := mrkdwnLink(p.URL, p.URL); ok {
			label := "Link"
			if p.Strategy == tugboatv1alpha1.StrategyPullRequest {
				label = "Pull request"
			}
			blocks = append(blocks, section("*"+label+"*\n"+link))
		}
	}
	if p := n.Promotion; p != nil && p.DashboardURL != "" {
		if links := dashboardBlock(*p); links != nil {
			blocks = append(blocks, links)
		}
	}
	if len(n.Targets) > 0 {
		lines := make([]string, 0, len(n.Targets))
		for _, t := range n.Targets {
			lines = append(lines, "• "+healthEmoji(t.Health)+" "+escape(notify.TargetLine(t)))
		}
		blocks = append(blocks, section(limited("*Targets*", lines)))
	}
	if len(n.Timeline) > 0 {
		lines := make([]string, 0, len(n.Timeline))
		for _, s := range n.Timeline {
			lines = append(lines, escape(notify.StepLine(s)))
		}
		blocks = append(blocks, section(limited("*Timeline*", lines)))
	}
	ctx := "tugboat · " + string(n.Event)
	if n.Summary {
		ctx += " · summary"
	}
	if !n.Time.IsZero() {
		ctx += fmt.Sprintf(" · <!date^%d^{date_short_pretty} {time_secs}|%s>", n.Time.Unix(), n.Time.UTC().Format(notify.TimeLayout))
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn(ctx)))

	if buttons && n.Approval != nil {
		if actions := decisionBlock(*n.Approval); actions != nil {
			blocks = append(blocks, actions)
		}
	}
	if len(blocks) > MaxBlocks {
		// Keep the header and the end (context, buttons).
		keep := MaxBlocks - 2
		blocks = append(blocks[:keep], blocks[len(blocks)-2:]...)
	}
	return blocks
}

// limited is heading and as many lines as fit a section, "… N more" after.
func limited(heading string, lines []string) string {
	return heading + "\n" + notify.JoinLimited(lines, "\n", MaxSectionText-len([]rune(heading))-1)
}

func approvalCount(p notify.Promotion) string {
	approvals := 0
	for _, v := range p.Votes {
		if v.Decision == tugboatv1alpha1.DecisionApprove {
			approvals++
		}
	}
	s := fmt.Sprintf("%d of %d", approvals, p.ApprovalsRequired)
	switch {
	case p.ApprovedBy != "":
		s += ", approved"
	case p.RejectedBy != "":
		s += ", rejected"
	}
	return s
}

var slackUserID = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)

// vote renders a vote, mentioning Slack users (Slack shows their name).
func vote(v tugboatv1alpha1.ApprovalVote) string {
	mark := ":white_check_mark:"
	if v.Decision == tugboatv1alpha1.DecisionReject {
		mark = ":x:"
	}
	who := escape(notify.OneLine(v.User))
	if v.Source == tugboatv1alpha1.ApprovalSourceSlack && slackUserID.MatchString(v.User) {
		who = "<@" + v.User + ">"
	} else if v.DisplayName != "" {
		who += " (" + escape(notify.OneLine(v.DisplayName)) + ")"
	}
	s := fmt.Sprintf("%s %s by %s via %s", mark, v.Decision, who, v.Source)
	if v.Message != "" {
		s += ": " + escape(notify.OneLine(v.Message))
	}
	return s
}

func healthEmoji(h tugboatv1alpha1.Health) string {
	switch h {
	case tugboatv1alpha1.HealthCurrent:
		return ":large_green_circle:"
	case tugboatv1alpha1.HealthFailed:
		return ":red_circle:"
	case tugboatv1alpha1.HealthInProgress:
		return ":large_blue_circle:"
	}
	return ":white_circle:"
}

// decisionBlock is the actions block with Approve and Reject; nil when the
// request does not fit a button value.
func decisionBlock(a notify.ApprovalRequest) *slack.ActionBlock {
	value := ActionValue(a.Namespace, a.Pipeline, a.Promotion, a.Notifier)
	if len(value) > MaxButtonValue {
		return nil
	}
	approve := slack.NewButtonBlockElement(ActionApprove, value, plain("Approve")).WithStyle(slack.StylePrimary)
	reject := slack.NewButtonBlockElement(ActionReject, value, plain("Reject")).WithStyle(slack.StyleDanger).
		WithConfirm(slack.NewConfirmationBlockObject(
			plain("Reject this promotion?"),
			mrkdwn(notify.Truncate("Promotion *"+escape(a.Promotion)+"* will be aborted. Your Slack user is recorded as the one who rejected it.", 300)),
			plain("Reject"),
			plain("Cancel"),
		).WithStyle(slack.StyleDanger))
	return slack.NewActionBlock(DecisionBlockID, approve, reject)
}

// dashboardBlock is an actions block with a link button to the
// Promotion's page on the dashboard (its preview, when it has one); nil
// when the address is not an absolute http(s) URL of at most MaxButtonURL
// characters.
func dashboardBlock(p notify.Promotion) *slack.ActionBlock {
	u, err := url.Parse(p.DashboardURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(p.DashboardURL) > MaxButtonURL {
		return nil
	}
	text := "Open in the dashboard"
	if p.Preview != "" {
		text = "See what changes (dashboard)"
	}
	b := slack.NewButtonBlockElement(ActionOpenDashboard, "", plain(notify.Truncate(text, MaxButtonText)))
	b.URL = p.DashboardURL
	return slack.NewActionBlock(LinksBlockID, b)
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, true, false)
}

func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, false)
}

func section(text string) *slack.SectionBlock {
	return slack.NewSectionBlock(mrkdwn(notify.Truncate(text, MaxSectionText)), nil, nil)
}

// escape escapes the three characters mrkdwn gives a meaning to (&, <, >),
// so that names and messages cannot mention, link or format.
func escape(s string) string { return slackutilsx.EscapeMessage(s) }

// mrkdwnLink is <url|label> for an absolute http(s) URL.
func mrkdwnLink(raw, label string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false
	}
	target := strings.NewReplacer("|", "%7C", ">", "%3E", "<", "%3C", " ", "%20").Replace(u.String())
	return "<" + escape(target) + "|" + strings.ReplaceAll(escape(notify.OneLine(label)), "|", "¦") + ">", true
}
