package dashboard

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// previewView is a Promotion's preview (issue 26) as its page shows it:
// the summary of status.preview and, when the user may read it, the
// PromotionPreview's groups with their objects and diffs.
type previewView struct {
	// Summary is status.preview.
	Summary *tugboatv1alpha1.PreviewSummary
	// Line is Summary's one-line summary.
	Line string
	// Version is the chart version previewed.
	Version string
	// Groups are the distinct changes, most targets first.
	Groups []previewGroup
	// OtherChanges counts the distinct changes beyond those stored.
	OtherChanges int32
	// Failed are the targets whose preview failed or was refused.
	Failed []previewFailure
	// Unread says why the PromotionPreview could not be read (RBAC, not
	// found yet): the summary still shows.
	Unread string
}

// previewGroup is one distinct change.
type previewGroup struct {
	tugboatv1alpha1.PreviewGroup
	// N is the group's position, from 1, for ids.
	N int
	// MoreSpokes counts the targets the group stands for beyond the spokes
	// it names.
	MoreSpokes int32
	// Added, Removed and Changed count the listed objects by change.
	Added, Removed, Changed int
	// MoreObjects counts the changed objects beyond those listed.
	MoreObjects int32
}

// previewFailure is one target whose preview failed.
type previewFailure struct {
	Target, Phase, Message string
}

// previewOf reads pr's preview as the dashboard's user: nil when pr has
// none.
func (s *Server) previewOf(ctx context.Context, pr *tugboatv1alpha1.Promotion) *previewView {
	sum := pr.Status.Preview
	if sum == nil {
		return nil
	}
	v := &previewView{Summary: sum, Line: sum.Line(), Version: pr.Spec.Version}
	if sum.Name == "" {
		return v
	}
	pp := &tugboatv1alpha1.PromotionPreview{}
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: pr.Namespace, Name: sum.Name}, pp); err != nil {
		switch {
		case isForbidden(err):
			v.Unread = fmt.Sprintf("You may not read the PromotionPreview %s (the objects and diffs): RBAC must allow get on promotionpreviews.tugboat.dev in namespace %s (see the ClusterRole tugboat-approver).", sum.Name, pr.Namespace)
		case isNotFound(err):
			v.Unread = "The PromotionPreview " + sum.Name + " (the objects and diffs) does not exist (yet)."
		default:
			v.Unread = "Reading the PromotionPreview " + sum.Name + " failed: " + err.Error()
		}
		return v
	}
	if !pp.Of(pr) {
		v.Unread = "The PromotionPreview " + sum.Name + " is not this Promotion's (someone else created it under that name): its objects and diffs are not shown."
		return v
	}
	v.Version = pp.Spec.Version
	v.OtherChanges = pp.Status.OtherChanges
	for i := range pp.Status.Groups {
		g := previewGroup{PreviewGroup: pp.Status.Groups[i], N: i + 1}
		g.MoreSpokes = max(0, g.Targets-int32(len(g.Spokes)))          //nolint:gosec // at most 20 spokes
		g.MoreObjects = max(0, g.ObjectsChanged-int32(len(g.Objects))) //nolint:gosec // at most 50 objects
		for _, o := range g.Objects {
			switch o.Change {
			case tugboatv1alpha1.PreviewAdded:
				g.Added++
			case tugboatv1alpha1.PreviewRemoved:
				g.Removed++
			default:
				g.Changed++
			}
		}
		v.Groups = append(v.Groups, g)
	}
	targets := map[string]tugboatv1alpha1.PreviewTarget{}
	for _, t := range pp.Spec.Targets {
		targets[t.ActionID] = t
	}
	for _, st := range pp.Status.Targets {
		if st.Phase != tugboatv1alpha1.ActionFailed && st.Phase != tugboatv1alpha1.ActionRefused {
			continue
		}
		name := st.ActionID
		if t, ok := targets[st.ActionID]; ok {
			name = t.Spoke + "/" + t.Namespace + "/" + t.Release
		}
		v.Failed = append(v.Failed, previewFailure{Target: name, Phase: string(st.Phase), Message: st.Message})
	}
	return v
}

// diffLine is one line of a unified diff and its class: add, del, hunk,
// file or ctx.
type diffLine struct {
	Class, Text string
}

// diffLines splits a unified diff into lines, each with the class that
// colors it. The template escapes the text.
func diffLines(diff string) []diffLine {
	diff = strings.TrimSuffix(diff, "\n")
	if diff == "" {
		return nil
	}
	lines := strings.Split(diff, "\n")
	out := make([]diffLine, 0, len(lines))
	for _, l := range lines {
		c := "ctx"
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			c = "file"
		case strings.HasPrefix(l, "@@"):
			c = "hunk"
		case strings.HasPrefix(l, "+"):
			c = "add"
		case strings.HasPrefix(l, "-"):
			c = "del"
		}
		out = append(out, diffLine{Class: c, Text: l})
	}
	return out
}

// changeClass is the badge class of an object's change.
func changeClass(c tugboatv1alpha1.PreviewChange) string {
	switch c {
	case tugboatv1alpha1.PreviewAdded:
		return "ok"
	case tugboatv1alpha1.PreviewRemoved:
		return "bad"
	}
	return "busy"
}

// previewPhaseClass is the badge class of a preview's phase.
func previewPhaseClass(p tugboatv1alpha1.PreviewPhase) string {
	switch p {
	case tugboatv1alpha1.PreviewReady:
		return "ok"
	case tugboatv1alpha1.PreviewFailed:
		return "bad"
	case tugboatv1alpha1.PreviewStale:
		return "wait"
	}
	return "busy"
}
