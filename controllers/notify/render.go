package notify

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// The plain-text rendering of a Notice, shared by the notifiers that send
// text (email, webhook, flux): a one-line Title, labeled Facts, one line per
// Target and per timeline Step. Slack builds its blocks from the same parts.

// TimeLayout is how rendered notices print times.
const TimeLayout = "2006-01-02 15:04:05 MST"

// Fact is one labeled value of a notice ("Version": "1.4.0").
type Fact struct {
	Label, Value string
}

// Title is the notice's headline on one line, e.g.
// "web 1.4.0 → production: Succeeded".
func Title(n Notice) string {
	name := n.Pipeline
	if name == "" {
		name = n.Release
	}
	switch {
	case n.Promotion != nil && n.Event == tugboatv1alpha1.EventPromotionWaveCompleted && n.Promotion.Wave != "":
		p := n.Promotion
		return OneLine(fmt.Sprintf("%s %s → %s: wave %s completed", name, p.Version, p.To, p.Wave))
	case n.Promotion != nil && isPromotionEvent(n.Event):
		p := n.Promotion
		return OneLine(fmt.Sprintf("%s %s → %s: %s", name, p.Version, p.To, EventOutcome(n.Event)))
	case n.Hold != nil:
		h := n.Hold
		if n.Event == tugboatv1alpha1.EventHoldReleased {
			return OneLine(fmt.Sprintf("%s: hold on %s released", name, h.Environment))
		}
		return OneLine(fmt.Sprintf("%s: %s held at %s", name, h.Environment, h.Version))
	case n.Deployment != nil:
		d := n.Deployment
		return OneLine(fmt.Sprintf("%s %s on %s: %s", name, d.ChartVersion, DeploymentTarget(*d), EventOutcome(n.Event)))
	}
	return OneLine(fmt.Sprintf("%s: %s", name, EventOutcome(n.Event)))
}

// EventOutcome is a short word for what an event says: "Succeeded",
// "Waiting for approval", "Healthy".
func EventOutcome(e tugboatv1alpha1.NotifyEvent) string {
	switch e {
	case tugboatv1alpha1.EventPromotionCreated:
		return "Created"
	case tugboatv1alpha1.EventPromotionWaitingApproval:
		return "Waiting for approval"
	case tugboatv1alpha1.EventPromotionPreviewChanged:
		return "Preview changed since approval"
	case tugboatv1alpha1.EventPromotionRunning:
		return "Running"
	case tugboatv1alpha1.EventPromotionWaveCompleted:
		return "Wave completed"
	case tugboatv1alpha1.EventPromotionPaused:
		return "Paused"
	case tugboatv1alpha1.EventPromotionResumed:
		return "Resumed"
	case tugboatv1alpha1.EventPromotionRollingBack:
		return "Rolling back"
	case tugboatv1alpha1.EventPromotionSucceeded:
		return "Succeeded"
	case tugboatv1alpha1.EventPromotionFailed:
		return "Failed"
	case tugboatv1alpha1.EventPromotionAborted:
		return "Aborted"
	case tugboatv1alpha1.EventHoldStarted:
		return "Held"
	case tugboatv1alpha1.EventHoldReleased:
		return "Hold released"
	case tugboatv1alpha1.EventDeploymentStarted:
		return "Started"
	case tugboatv1alpha1.EventDeploymentHealthy:
		return "Healthy"
	case tugboatv1alpha1.EventDeploymentFailed:
		return "Failed"
	case tugboatv1alpha1.EventDeploymentDegraded:
		return "Degraded"
	}
	return string(e)
}

// IsFailure reports whether the notice reports something that went wrong (a
// failed promotion, a failed or degraded deployment): error severity, red.
func IsFailure(n Notice) bool {
	switch n.Event {
	case tugboatv1alpha1.EventPromotionFailed, tugboatv1alpha1.EventPromotionRollingBack, tugboatv1alpha1.EventDeploymentFailed, tugboatv1alpha1.EventDeploymentDegraded:
		return true
	}
	return false
}

func isPromotionEvent(e tugboatv1alpha1.NotifyEvent) bool {
	return strings.HasPrefix(string(e), "Promotion")
}

// DeploymentTarget names a deployment's target as spoke/namespace/release.
func DeploymentTarget(d Deployment) string {
	return d.Spoke + "/" + d.Namespace + "/" + d.Release
}

// TargetName names a target as spoke/namespace/release.
func TargetName(t Target) string {
	return t.Spoke + "/" + t.Namespace + "/" + t.Release
}

// Facts are the notice's labeled values, in display order; empty values
// are left out.
func Facts(n Notice) []Fact {
	var f []Fact
	add := func(label, value string) {
		if value = OneLine(value); value != "" {
			f = append(f, Fact{Label: label, Value: value})
		}
	}
	if n.Namespace != "" || n.Pipeline != "" {
		add("Pipeline", n.Namespace+"/"+n.Pipeline)
	}
	if p := n.Promotion; p != nil {
		add("Promotion", p.Name)
		add("Version", p.Version)
		add("From → To", strings.TrimSpace(p.From+" → "+p.To))
		add("Phase", string(p.Phase))
		add("Strategy", string(p.Strategy))
		add("Requested by", requester(p))
		add("Approvals", Approvals(*p))
		add("Preview", p.Preview)
		add("Dashboard", p.DashboardURL)
		add("Wave", p.Wave)
		add("Rollout", p.Rollout)
		add("Approved by", p.ApprovedBy)
		add("Rejected by", p.RejectedBy)
		add("Link", p.URL)
		if p.Message != "" {
			label := "Message"
			if n.Event == tugboatv1alpha1.EventPromotionFailed || p.Phase == tugboatv1alpha1.PromotionFailed {
				label = "Reason"
			}
			add(label, p.Message)
		}
	}
	if h := n.Hold; h != nil {
		add("Environment", h.Environment)
		add("Held at", h.Version)
		if !h.Since.IsZero() {
			add("Since", h.Since.UTC().Format(TimeLayout))
		}
		add("Reason", h.Message)
	}
	if d := n.Deployment; d != nil {
		add("Target", DeploymentTarget(*d))
		add("Environment", d.Environment)
		if d.Revision > 0 {
			add("Revision", fmt.Sprint(d.Revision))
		}
		add("Chart version", d.ChartVersion)
		add("App version", d.AppVersion)
		add("Status", string(d.Status))
		health := string(d.Health)
		if d.HealthReason != "" {
			health += ": " + d.HealthReason
		}
		add("Health", health)
		add("Description", d.Description)
	}
	if !n.Time.IsZero() {
		add("Time", n.Time.UTC().Format(TimeLayout))
	}
	return f
}

func requester(p *Promotion) string {
	switch {
	case p.RequestedBy == "" && p.Requester == "":
		return ""
	case p.Requester == "":
		return string(p.RequestedBy)
	case p.RequestedBy == "":
		return p.Requester
	}
	return fmt.Sprintf("%s (%s)", p.Requester, p.RequestedBy)
}

// Approvals summarizes a promotion's votes: "1 of 2: Approve by alice
// (Kubernetes); Reject by U123 bob (Slack)". Empty when no approval is
// required and none was given.
func Approvals(p Promotion) string {
	if p.ApprovalsRequired == 0 && len(p.Votes) == 0 {
		return ""
	}
	approvals := 0
	votes := make([]string, 0, len(p.Votes))
	for _, v := range p.Votes {
		if v.Decision == tugboatv1alpha1.DecisionApprove {
			approvals++
		}
		votes = append(votes, Vote(v))
	}
	s := fmt.Sprintf("%d of %d", approvals, p.ApprovalsRequired)
	if p.ApprovalsRequired == 0 {
		s = fmt.Sprint(approvals)
	}
	if len(votes) > 0 {
		s += ": " + strings.Join(votes, "; ")
	}
	return s
}

// Vote renders one vote: "Approve by alice (Kubernetes)".
func Vote(v tugboatv1alpha1.ApprovalVote) string {
	who := v.User
	if v.DisplayName != "" && v.DisplayName != v.User {
		who += " " + v.DisplayName
	}
	s := fmt.Sprintf("%s by %s (%s)", v.Decision, who, v.Source)
	if v.Message != "" {
		s += ": " + v.Message
	}
	return OneLine(s)
}

// TargetLine renders one target: "production staging-1/apps/web: 1.4.0
// revision 7, Current, done".
func TargetLine(t Target) string {
	var b strings.Builder
	if t.Environment != "" {
		b.WriteString(t.Environment + " ")
	}
	b.WriteString(TargetName(t) + ":")
	if t.Version != "" {
		b.WriteString(" " + t.Version)
	} else {
		b.WriteString(" no version reported")
	}
	if t.Revision > 0 {
		fmt.Fprintf(&b, " revision %d", t.Revision)
	}
	if t.Health != "" {
		b.WriteString(", " + string(t.Health))
	}
	if t.Done {
		b.WriteString(", done")
	}
	if t.Message != "" {
		b.WriteString(": " + t.Message)
	}
	return OneLine(b.String())
}

// StepLine renders one timeline step: "2026-11-02 09:30:05 UTC
// staging-1/apps/web: Pod web-7d9f-x created".
func StepLine(s Step) string {
	var b strings.Builder
	if !s.Time.IsZero() {
		b.WriteString(s.Time.UTC().Format(TimeLayout) + " ")
	}
	if s.Source != "" {
		b.WriteString(s.Source + ": ")
	}
	b.WriteString(s.Text)
	return OneLine(b.String())
}

// Text is the whole notice as plain text: the title, the facts, the targets
// and the timeline, one item a line.
func Text(n Notice) string {
	var b strings.Builder
	b.WriteString(Title(n) + "\n")
	if f := Facts(n); len(f) > 0 {
		b.WriteString("\n")
		for _, x := range f {
			b.WriteString(x.Label + ": " + x.Value + "\n")
		}
	}
	if len(n.Targets) > 0 {
		b.WriteString("\nTargets:\n")
		for _, t := range n.Targets {
			b.WriteString("  " + TargetLine(t) + "\n")
		}
	}
	if len(n.Timeline) > 0 {
		b.WriteString("\nTimeline:\n")
		for _, s := range n.Timeline {
			b.WriteString("  " + StepLine(s) + "\n")
		}
	}
	return b.String()
}

// OneLine returns s on one line: control characters (newlines included)
// become spaces, runs of spaces collapse, and invalid UTF-8 is replaced.
func OneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// Truncate shortens s to at most max runes, ending it with "…" when cut.
func Truncate(s string, max int) string {
	if max <= 0 {
		return ""
	}
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max-1]) + "…"
}

// JoinLimited joins lines with sep into at most max runes. When they do not
// all fit, it keeps as many leading lines as fit, followed by "… N more" (a
// first line too long on its own is truncated).
func JoinLimited(lines []string, sep string, max int) string {
	if all := strings.Join(lines, sep); runes(all) <= max {
		return all
	}
	if len(lines) == 1 {
		return Truncate(lines[0], max)
	}
	var b strings.Builder
	n := 0 // runes written
	for i, l := range lines {
		piece := l
		if i > 0 {
			piece = sep + l
		}
		tail := sep + fmt.Sprintf("… %d more", len(lines)-i-1)
		if n+runes(piece)+runes(tail) <= max {
			b.WriteString(piece)
			n += runes(piece)
			continue
		}
		if i == 0 {
			if room := max - runes(tail); room > 1 {
				return Truncate(l, room) + tail
			}
			return Truncate(l, max) // no room to say how many more
		}
		// The previous round checked that this tail fits.
		return b.String() + sep + fmt.Sprintf("… %d more", len(lines)-i)
	}
	return b.String()
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// Printable keeps the printable characters of s on one line (spaces
// collapsed), at most max of them: safe to quote a remote answer in an
// error.
func Printable(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == unicode.ReplacementChar:
			return -1
		case unicode.IsSpace(r):
			return ' '
		case !unicode.IsPrint(r):
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	return Truncate(strings.Join(strings.Fields(s), " "), max)
}
