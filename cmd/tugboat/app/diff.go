//go:build !agentonly

package app

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// diffView is what `tugboat diff` prints with -o json|yaml: the
// Promotion's preview summary and the distinct changes its agents found.
type diffView struct {
	Namespace string `json:"namespace"`
	Promotion string `json:"promotion,omitempty"`
	// Pipeline, From and PreviewName are set for an on-demand preview
	// (tugboat diff PIPELINE --from ENV --to ENV).
	Pipeline     string                          `json:"pipeline,omitempty"`
	From         string                          `json:"from,omitempty"`
	PreviewName  string                          `json:"previewName,omitempty"`
	To           string                          `json:"to"`
	Version      string                          `json:"version"`
	Preview      *tugboatv1alpha1.PreviewSummary `json:"preview,omitempty"`
	TotalTargets int32                           `json:"totalTargets,omitempty"`
	Groups       []tugboatv1alpha1.PreviewGroup  `json:"groups,omitempty"`
	OtherChanges int32                           `json:"otherChanges,omitempty"`
}

func newDiffCommand() *cobra.Command {
	var (
		hf  hubFlags
		out outputFlag
		od  onDemandFlags
	)
	cmd := &cobra.Command{
		Use:   "diff <promotion> | diff <pipeline> --from ENV --to ENV",
		Short: "Show what a Promotion would change on its destination's clusters",
		Long: `diff shows the preview of a Promotion: what the promoted version would
change on the destination's clusters, as their agents rendered it with each
release's live values (exactly as the upgrade would apply them) and compared
with the live release. A helm Promotion into an environment that requires
approval computes its preview before it waits for approval.

For each distinct change (at most four; targets whose change is identical
share one, and it says how many targets and which spokes it stands for):
the objects added, removed and changed, a unified diff of each changed
manifest, and a diff of the values. A Secret shows only as changed, never
its data, and sensitive values are redacted (docs/previews.md).

With --from and --to, diff previews on demand, without a Promotion: what
promoting the version that runs in --from into --to would change. It asks
the hub (it creates a PromotionPreview naming the pipeline and both
environments; the hub resolves the version and the targets, asks the agents,
and deletes the preview after --promotion-preview-ttl), waits for the
answers (at most --timeout) and prints them the same way.

The diffs are colored on a terminal, plain when piped or with NO_COLOR.`,
		Example: `  tugboat diff web-production-1.4.0 -n fleet
  tugboat diff web-production-1.4.0 -n fleet -o json
  tugboat diff web --from staging --to production -n fleet`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePromotionNames(&hf, unfinished),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if err := od.validate(); err != nil {
				return err
			}
			s, err := hf.connect()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if od.on() {
				v, err := od.run(ctx, s, args[0], cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if done, err := out.structured(w, v); done {
					return err
				}
				printDiff(w, newPainter(w), v)
				return nil
			}
			pr := &tugboatv1alpha1.Promotion{}
			if err := s.client.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: args[0]}, pr); err != nil {
				if apierrors.IsNotFound(err) {
					return notFoundErrorf("promotion %s not found in namespace %s", args[0], s.namespace)
				}
				return fmt.Errorf("reading promotion %s/%s: %w", s.namespace, args[0], err)
			}
			v := diffView{Namespace: pr.Namespace, Promotion: pr.Name, To: pr.Spec.To, Version: pr.Spec.Version, Preview: pr.Status.Preview}
			if sum := pr.Status.Preview; sum != nil && sum.Name != "" {
				pp := &tugboatv1alpha1.PromotionPreview{}
				err := s.client.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: sum.Name}, pp)
				switch {
				case err == nil && !pp.Of(pr):
					// Anyone who may ask an on-demand preview may pick its
					// name: one the Promotion does not own is never shown
					// as its preview (as the hub, the dashboard and the
					// pull request body do).
					return fmt.Errorf("the PromotionPreview %s/%s is not the preview of promotion %s (it does not name the promotion, or the promotion does not own it: someone else created it under that name); refusing to show it", s.namespace, sum.Name, pr.Name)
				case err == nil:
					v.TotalTargets, v.Groups, v.OtherChanges = pp.Spec.TotalTargets, pp.Status.Groups, pp.Status.OtherChanges
				case !apierrors.IsNotFound(err):
					return fmt.Errorf("reading the preview %s/%s: %w", s.namespace, sum.Name, err)
				}
			}
			w := cmd.OutOrStdout()
			if done, err := out.structured(w, v); done {
				return err
			}
			printDiff(w, newPainter(w), v)
			return nil
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	od.bind(cmd)
	return cmd
}

// printDiff writes v for people: the summary, then each change.
func printDiff(w io.Writer, p painter, v diffView) {
	if v.Pipeline != "" {
		fmt.Fprintf(w, "Pipeline %s: %s from %s into %s (on demand: promotionpreview %s)\n", v.Pipeline, v.Version, v.From, v.To, v.PreviewName)
	} else {
		fmt.Fprintf(w, "Promotion %s: %s into %s\n", v.Promotion, v.Version, v.To)
	}
	sum := v.Preview
	if sum == nil {
		fmt.Fprintln(w, "No preview: previews are computed for helm promotions into environments that require approval.")
		return
	}
	fmt.Fprintf(w, "Preview %s\n", sum.Line())
	if sum.Reason != "" && (sum.Phase == tugboatv1alpha1.PreviewReady || sum.Phase == tugboatv1alpha1.PreviewStale) {
		fmt.Fprintf(w, "Note: %s\n", sum.Reason)
	}
	if sum.RecomputedAt != nil {
		fmt.Fprintf(w, "Computed again after the approval (a previewed release moved to another revision); approved: %s, digest %s\n",
			cmp.Or(string(sum.ApprovedPhase), "unknown"), cmp.Or(short(sum.ApprovedDigest), "none"))
		if sum.ChangedSinceApproval {
			line := "The change differs from what was approved; the promotion proceeds (tugboat abort " + v.Promotion + " stops it)."
			if sum.ApprovalsReset > 0 {
				votes := fmt.Sprintf("the %d earlier votes no longer count", sum.ApprovalsReset)
				if sum.ApprovalsReset == 1 {
					votes = "the earlier vote no longer counts"
				}
				line = "The change differs from what was approved; the approval is asked again (reapproveOnChange): " + votes + " (tugboat approve " + v.Promotion + ")."
			}
			if p.on {
				line = red + line + reset
			}
			fmt.Fprintln(w, line)
		}
	}
	for i, g := range v.Groups {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Change %d of %d: %d targets", i+1, len(v.Groups)+int(v.OtherChanges), g.Targets)
		if len(g.Spokes) > 0 {
			fmt.Fprintf(w, " (%s", strings.Join(g.Spokes, ", "))
			if int(g.Targets) > len(g.Spokes) {
				fmt.Fprint(w, ", ...")
			}
			fmt.Fprint(w, ")")
		}
		if g.FromVersion != "" {
			fmt.Fprintf(w, ", from %s", g.FromVersion)
		}
		fmt.Fprintf(w, "; %d objects, %d lines; digest %s", g.ObjectsChanged, g.LinesChanged, short(g.Digest))
		if g.DryRun != "" {
			fmt.Fprintf(w, "; %s dry run", g.DryRun)
		}
		fmt.Fprintln(w)
		for _, o := range g.Objects {
			name := o.Name
			if o.Namespace != "" {
				name = o.Namespace + "/" + o.Name
			}
			line := fmt.Sprintf("  %-8s %s %s", o.Change, o.Kind, name)
			if o.Secret {
				line += " (a Secret: its data is never shown)"
			}
			fmt.Fprintln(w, p.change(o.Change, line))
			if o.Diff != "" {
				printUnified(w, p, o.Diff, "    ")
			}
			if o.Truncated && o.Diff == "" && !o.Secret {
				fmt.Fprintln(w, "    (diff left out: too large)")
			}
		}
		if g.ValuesDiff != "" {
			fmt.Fprintln(w, "  Values:")
			printUnified(w, p, g.ValuesDiff, "    ")
		}
		if g.Note != "" {
			fmt.Fprintf(w, "  Note: %s\n", g.Note)
		}
	}
	if v.OtherChanges > 0 {
		fmt.Fprintf(w, "\n%d more distinct changes are not stored.\n", v.OtherChanges)
	}
}

// printUnified writes a unified diff indented, its lines colored on a
// terminal: added green, removed red, hunks yellow.
func printUnified(w io.Writer, p painter, diff, indent string) {
	for _, line := range strings.Split(strings.TrimSuffix(diff, "\n"), "\n") {
		c := ""
		switch {
		case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"):
		case strings.HasPrefix(line, "+"):
			c = green
		case strings.HasPrefix(line, "-"):
			c = red
		case strings.HasPrefix(line, "@@"):
			c = yellow
		}
		if p.on && c != "" {
			line = c + line + reset
		}
		fmt.Fprintln(w, indent+line)
	}
}

// change colors an object's line by its change.
func (p painter) change(c tugboatv1alpha1.PreviewChange, line string) string {
	if !p.on {
		return line
	}
	switch c {
	case tugboatv1alpha1.PreviewAdded:
		return green + line + reset
	case tugboatv1alpha1.PreviewRemoved:
		return red + line + reset
	}
	return yellow + line + reset
}

// short is the first 12 hex digits of a digest.
func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
