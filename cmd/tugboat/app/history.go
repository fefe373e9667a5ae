//go:build !agentonly

package app

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// historyView is what `tugboat history` prints with -o json|yaml.
type historyView struct {
	Namespace string                           `json:"namespace"`
	Name      string                           `json:"name"`
	Spoke     string                           `json:"spoke"`
	Release   string                           `json:"release"`
	ReleaseNS string                           `json:"releaseNamespace"`
	Current   *tugboatv1alpha1.RevisionSummary `json:"current,omitempty"`
	Revisions []tugboatv1alpha1.Revision       `json:"revisions"`
	LastEvent string                           `json:"lastEventTime,omitempty"`
}

func newHistoryCommand() *cobra.Command {
	var (
		hf                    hubFlags
		out                   outputFlag
		spoke, relNS, relName string
		events                bool
	)
	cmd := &cobra.Command{
		Use:   "history <spoke>/<namespace>/<release>",
		Short: "Show a release's recent revisions on a spoke, as the hub recorded them",
		Long: `history shows the ReleaseHistory the hub keeps for one Helm release on one
spoke: its recent revisions (revision, chart version, Helm status, health,
deployed time) and, with --events, what happened during each one.

The release is named <spoke>/<namespace>/<release>, or with --spoke,
--release-namespace and --release. -n/--namespace is the namespace on the hub
where the Spoke (and so the ReleaseHistory) lives.`,
		Example: `  tugboat history staging-1/apps/web -n fleet
  tugboat history --spoke staging-1 --release-namespace apps --release web -n fleet --events`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if len(args) == 1 {
				if spoke != "" || relNS != "" || relName != "" {
					return usageErrorf("name the release either as <spoke>/<namespace>/<release> or with --spoke, --release-namespace and --release, not both")
				}
				parts := strings.Split(args[0], "/")
				if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
					return usageErrorf("%q is not <spoke>/<namespace>/<release>", args[0])
				}
				spoke, relNS, relName = parts[0], parts[1], parts[2]
			}
			if spoke == "" || relNS == "" || relName == "" {
				return usageErrorf("name the release: <spoke>/<namespace>/<release>, or --spoke, --release-namespace and --release")
			}
			s, err := hf.connect()
			if err != nil {
				return err
			}
			name := tugboatv1alpha1.ReleaseHistoryName(spoke, relNS, relName)
			rh := &tugboatv1alpha1.ReleaseHistory{}
			if err := s.client.Get(cmd.Context(), types.NamespacedName{Namespace: s.namespace, Name: name}, rh); err != nil {
				if apierrors.IsNotFound(err) {
					return notFoundErrorf("no history of release %s/%s on spoke %s in namespace %s (ReleaseHistory %s not found)", relNS, relName, spoke, s.namespace, name)
				}
				return fmt.Errorf("reading ReleaseHistory %s/%s: %w", s.namespace, name, err)
			}
			v := historyView{
				Namespace: rh.Namespace, Name: rh.Name, Spoke: rh.Spec.Spoke, Release: rh.Spec.Release, ReleaseNS: rh.Spec.Namespace,
				Current: rh.Status.Current, Revisions: rh.Status.Revisions, LastEvent: timestamp(rh.Status.LastEventTime),
			}
			if !events {
				v.Revisions = make([]tugboatv1alpha1.Revision, len(rh.Status.Revisions))
				for i, r := range rh.Status.Revisions {
					v.Revisions[i] = tugboatv1alpha1.Revision{RevisionSummary: r.RevisionSummary}
				}
			}
			if done, err := out.structured(cmd.OutOrStdout(), v); done {
				return err
			}
			printHistory(cmd.OutOrStdout(), v, events, out.wide(), newPainter(cmd.OutOrStdout()))
			return nil
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	cmd.Flags().StringVar(&spoke, "spoke", "", "the release's spoke")
	cmd.Flags().StringVar(&relNS, "release-namespace", "", "the release's namespace on the spoke")
	cmd.Flags().StringVar(&relName, "release", "", "the release's name")
	cmd.Flags().BoolVar(&events, "events", false, "also show the events recorded for each revision")
	return cmd
}

// printHistory writes the revisions (wide: also the reason for the health,
// the first deployed time and the values digest) and, with events, what
// happened during each.
func printHistory(w io.Writer, v historyView, events, wide bool, pt painter) {
	fmt.Fprintf(w, "Release %s/%s on spoke %s (ReleaseHistory %s/%s)\n\n", v.ReleaseNS, v.Release, v.Spoke, v.Namespace, v.Name)
	if len(v.Revisions) == 0 {
		fmt.Fprintln(w, "No revisions reported yet.")
		return
	}
	tw := newTable(w)
	header := []string{"REVISION", "CHART", "VERSION", "APP VERSION", "STATUS", pt.header("HEALTH"), "DEPLOYED"}
	if wide {
		header = append(header, "FIRST DEPLOYED", "VALUES DIGEST", "HEALTH REASON")
	}
	row(tw, header...)
	for _, r := range v.Revisions {
		cells := []string{strconv.Itoa(int(r.Revision)), r.Chart, r.ChartVersion, r.AppVersion, string(r.Status), pt.cell(string(r.Health)), timestamp(r.LastDeployed)}
		if wide {
			cells = append(cells, timestamp(r.FirstDeployed), r.ValuesDigest, r.HealthReason)
		}
		row(tw, cells...)
	}
	_ = tw.Flush()
	if !events {
		return
	}
	for _, r := range v.Revisions {
		fmt.Fprintf(w, "\nRevision %d (%s %s):\n", r.Revision, r.Chart, r.ChartVersion)
		if len(r.Events) == 0 {
			fmt.Fprintln(w, "  no events recorded")
			continue
		}
		tw := newTable(w)
		row(tw, "  TIME", "TYPE", "REASON", "OBJECT", "COUNT", "MESSAGE")
		for _, e := range r.Events {
			obj := ""
			if e.Object != nil {
				obj = e.Object.Kind + "/" + e.Object.Name
			}
			count := ""
			if e.Count > 1 {
				count = strconv.Itoa(int(e.Count))
			}
			row(tw, "  "+timestamp(&e.Time), string(e.Type), e.Reason, obj, count, e.Message)
		}
		_ = tw.Flush()
	}
}
