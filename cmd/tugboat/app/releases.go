//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// releaseView is one release of the fleet, as `tugboat releases` shows it.
type releaseView struct {
	Spoke        string `json:"spoke"`
	Namespace    string `json:"namespace"`
	Release      string `json:"release"`
	Revision     int32  `json:"revision,omitempty"`
	Chart        string `json:"chart,omitempty"`
	ChartVersion string `json:"chartVersion,omitempty"`
	AppVersion   string `json:"appVersion,omitempty"`
	Status       string `json:"status,omitempty"`
	Health       string `json:"health,omitempty"`
	HealthReason string `json:"healthReason,omitempty"`
	// LastDeployed is RFC 3339, when known.
	LastDeployed string `json:"lastDeployed,omitempty"`
	// HubNamespace is the namespace of the ReleaseHistory (and Spoke) on the hub.
	HubNamespace string `json:"hubNamespace"`
}

// releaseFilter is what `tugboat releases` keeps.
type releaseFilter struct {
	chart, version, spoke string
	unhealthy             bool
}

func (f releaseFilter) keep(v releaseView) bool {
	switch {
	case f.chart != "" && v.Chart != f.chart,
		f.version != "" && v.ChartVersion != f.version,
		f.spoke != "" && v.Spoke != f.spoke:
		return false
	case f.unhealthy:
		return v.Health != string(tugboatv1alpha1.HealthCurrent)
	}
	return true
}

func newReleasesCommand() *cobra.Command {
	var (
		hf  hubFlags
		out outputFlag
		f   releaseFilter
		all bool
	)
	cmd := &cobra.Command{
		Use:   "releases",
		Short: "List the Helm releases of the fleet: every spoke's, as the hub recorded them",
		Long: `releases lists the releases the hub knows (its ReleaseHistories), like helm list -A
across every cluster: spoke, namespace, release, revision, chart and version,
status and health. --chart, --version and --spoke keep only matching releases;
--unhealthy only those whose health is not Current. -A lists every namespace of
the hub. The exit code is 0 whatever is listed (including nothing).`,
		Example: `  tugboat releases -n fleet
  tugboat releases -A --chart web --version 1.4.0
  tugboat releases -n fleet --unhealthy -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			s, err := hf.connect()
			if err != nil {
				return err
			}
			ns := s.namespace
			if all {
				ns = ""
			}
			views, err := listReleases(cmd.Context(), s.client, ns, f)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if done, err := out.structured(w, struct {
				Releases []releaseView `json:"releases"`
			}{views}); done {
				return err
			}
			printReleases(w, views, all, out.wide(), newPainter(w))
			if len(views) == 0 {
				where := "namespace " + s.namespace
				if all {
					where = "any namespace"
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "No releases in %s of the hub match.\n", where)
			}
			return nil
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list the releases of every namespace of the hub")
	cmd.Flags().StringVar(&f.chart, "chart", "", "only releases of this chart")
	cmd.Flags().StringVar(&f.version, "version", "", "only releases at this chart version")
	cmd.Flags().StringVar(&f.spoke, "spoke", "", "only the releases of this spoke")
	cmd.Flags().BoolVar(&f.unhealthy, "unhealthy", false, "only releases whose health is not Current")
	return cmd
}

// listReleases reads the ReleaseHistories of namespace ("": every one) and
// returns the releases f keeps, sorted by spoke, namespace and release.
func listReleases(ctx context.Context, c client.Client, namespace string, f releaseFilter) ([]releaseView, error) {
	var list tugboatv1alpha1.ReleaseHistoryList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing ReleaseHistories on the hub: %w", err)
	}
	views := []releaseView{}
	for _, rh := range list.Items {
		v := releaseView{Spoke: rh.Spec.Spoke, Namespace: rh.Spec.Namespace, Release: rh.Spec.Release, HubNamespace: rh.Namespace}
		if cur := rh.Status.Current; cur != nil {
			v.Revision, v.Chart, v.ChartVersion, v.AppVersion = cur.Revision, cur.Chart, cur.ChartVersion, cur.AppVersion
			v.Status, v.Health, v.HealthReason = string(cur.Status), string(cur.Health), cur.HealthReason
			if cur.LastDeployed != nil {
				v.LastDeployed = cur.LastDeployed.UTC().Format(time.RFC3339)
			}
		}
		if f.keep(v) {
			views = append(views, v)
		}
	}
	sort.Slice(views, func(i, j int) bool {
		a, b := views[i], views[j]
		if a.Spoke != b.Spoke {
			return a.Spoke < b.Spoke
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Release < b.Release
	})
	return views, nil
}

// printReleases writes one row per release; wide adds the app version
// and the reason for the health.
func printReleases(w io.Writer, views []releaseView, withHubNamespace, wide bool, pt painter) {
	tw := newTable(w)
	header := []string{"SPOKE", "NAMESPACE", "RELEASE", "REVISION", "CHART", "VERSION", "STATUS", pt.header("HEALTH"), "DEPLOYED"}
	if withHubNamespace {
		header = append([]string{"HUB NAMESPACE"}, header...)
	}
	if wide {
		header = append(header, "APP VERSION", "HEALTH REASON")
	}
	row(tw, header...)
	for _, v := range views {
		cells := []string{v.Spoke, v.Namespace, v.Release, dash(v.Revision), v.Chart, v.ChartVersion, v.Status, pt.cell(v.Health), v.LastDeployed}
		if withHubNamespace {
			cells = append([]string{v.HubNamespace}, cells...)
		}
		if wide {
			cells = append(cells, v.AppVersion, v.HealthReason)
		}
		row(tw, cells...)
	}
	_ = tw.Flush()
}

func dash(n int32) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}
