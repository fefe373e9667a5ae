package pullrequest

import (
	"context"
	"fmt"
	"html"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// MaxBodyLength is the longest pull request body the strategy writes, in
// bytes: GitHub's limit of 65,536 characters (Gitea's and GitLab's are
// larger), which a byte count never exceeds.
const MaxBodyLength = 65536

// preview is what the pull request body shows of the Promotion's preview
// (issue 26): status.preview, and the PromotionPreview with the diffs when
// it could be read.
type preview struct {
	summary *tugboatv1alpha1.PreviewSummary
	name    string
	pp      *tugboatv1alpha1.PromotionPreview
	// unread says why the PromotionPreview is missing.
	unread string
}

// readPreview returns pr's preview, or nil when pr has none (previews are
// computed for agent-applied targets; a pullRequest Promotion usually has
// none). A PromotionPreview that cannot be read leaves the summary only: a
// preview never stops a promotion.
func readPreview(ctx context.Context, hub client.Reader, pr *tugboatv1alpha1.Promotion) *preview {
	if pr == nil || pr.Status.Preview == nil {
		return nil
	}
	p := &preview{summary: pr.Status.Preview, name: pr.Name}
	if p.summary.Name == "" || hub == nil {
		return p
	}
	pp := &tugboatv1alpha1.PromotionPreview{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: pr.Namespace, Name: p.summary.Name}, pp); err != nil {
		log.FromContext(ctx).V(1).Info("reading the promotion's preview for the pull request body", "preview", p.summary.Name, "error", err.Error())
		p.unread = "the diffs could not be read: " + clip.String(err.Error(), 200)
		return p
	}
	if !pp.Of(pr) {
		p.unread = "the PromotionPreview " + p.summary.Name + " is not this promotion's (someone else created it), so its diffs are not shown"
		return p
	}
	p.pp = pp
	return p
}

// withPreview is body followed by the preview's section, all within
// MaxBodyLength: the summary and the object lists first, then as many
// diffs (each collapsed in a <details>) as fit, and a note saying what was
// left out.
func withPreview(body string, p *preview) string {
	if p == nil {
		return clipBody(body)
	}
	var head strings.Builder
	head.WriteString("\n### Preview\n\n")
	fmt.Fprintf(&head, "%s (`tugboat diff %s` shows it all)\n", mdText(p.summary.Line()), p.name)
	if p.summary.Phase == tugboatv1alpha1.PreviewStale {
		head.WriteString("\n> **Stale:** a previewed target's live release changed since its agent answered; the change may differ from this preview.\n")
	}
	if p.unread != "" {
		fmt.Fprintf(&head, "\n_%s_\n", mdText(p.unread))
	}
	var diffs []string
	if p.pp != nil {
		for i := range p.pp.Status.Groups {
			g := &p.pp.Status.Groups[i]
			writeGroup(&head, g)
			for _, o := range g.Objects {
				if o.Diff != "" && !o.Secret {
					diffs = append(diffs, details(fmt.Sprintf("%s %s %s", o.Change, o.Kind, objectName(o)), o.Diff))
				}
			}
			if g.ValuesDiff != "" {
				diffs = append(diffs, details("Values diff (sensitive values redacted)", g.ValuesDiff))
			}
		}
		if n := p.pp.Status.OtherChanges; n > 0 {
			fmt.Fprintf(&head, "\nand %d more distinct changes, not stored.\n", n)
		}
	}
	out := body + head.String()
	if len(out) > MaxBodyLength {
		return clipBody(out)
	}
	// Room for the note that diffs were left out.
	const noteRoom = 256
	left := 0
	var b strings.Builder
	b.WriteString(out)
	for i, d := range diffs {
		if b.Len()+len(d)+noteRoom > MaxBodyLength {
			left = len(diffs) - i
			break
		}
		b.WriteString(d)
	}
	if left > 0 {
		fmt.Fprintf(&b, "\n_%d diffs left out to keep this description within %d characters: `tugboat diff %s` shows them._\n", left, MaxBodyLength, p.name)
	}
	return b.String()
}

// writeGroup lists one distinct change: the targets it stands for, its
// counts, its objects (a Secret only as changed), and its truncation note.
func writeGroup(b *strings.Builder, g *tugboatv1alpha1.PreviewGroup) {
	fmt.Fprintf(b, "\n**%d target(s)**", g.Targets)
	if len(g.Spokes) > 0 {
		fmt.Fprintf(b, " (%s", mdText(strings.Join(g.Spokes, ", ")))
		if more := int(g.Targets) - len(g.Spokes); more > 0 {
			fmt.Fprintf(b, " and %d more", more)
		}
		b.WriteString(")")
	}
	if g.FromVersion != "" {
		fmt.Fprintf(b, ", from %s", mdText(g.FromVersion))
	}
	fmt.Fprintf(b, ": %d objects and %d lines change", g.ObjectsChanged, g.LinesChanged)
	if g.DryRun != "" {
		fmt.Fprintf(b, " (%s dry run)", g.DryRun)
	}
	b.WriteString("\n\n")
	for _, o := range g.Objects {
		fmt.Fprintf(b, "- %s %s `%s`", o.Change, mdText(o.Kind), objectName(o))
		switch {
		case o.Secret:
			b.WriteString(": a Secret, its data never shown")
		case o.Truncated:
			b.WriteString(" (diff cut)")
		}
		b.WriteString("\n")
	}
	if more := int(g.ObjectsChanged) - len(g.Objects); more > 0 {
		fmt.Fprintf(b, "- and %d more objects\n", more)
	}
	if g.Note != "" {
		fmt.Fprintf(b, "\n_%s_\n", mdText(g.Note))
	}
}

func objectName(o tugboatv1alpha1.PreviewObject) string {
	if o.Namespace != "" {
		return o.Namespace + "/" + o.Name
	}
	return o.Name
}

// details is a diff collapsed under summary, in a fenced diff block whose
// fence is longer than any run of backticks in the diff, so nothing in it
// ends the block.
func details(summary, diff string) string {
	fence := strings.Repeat("`", max(3, longestBackticks(diff)+1))
	return "\n<details><summary>" + html.EscapeString(summary) + "</summary>\n\n" + fence + "diff\n" +
		strings.TrimSuffix(diff, "\n") + "\n" + fence + "\n\n</details>\n"
}

func longestBackticks(s string) int {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// mdText escapes what Markdown or its HTML would read in a line of
// text: a name or a message cannot link, mention or format.
func mdText(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;", "&", "&amp;", "`", "'", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "@", "@\u200b").Replace(s)
}

// clipBody cuts body to MaxBodyLength, saying so.
func clipBody(body string) string {
	if len(body) <= MaxBodyLength {
		return body
	}
	const note = "\n\n_… cut to stay within 65,536 characters._\n"
	return clip.String(body, MaxBodyLength-len(note)) + note
}
