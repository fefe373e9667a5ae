//go:build !agentonly

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/dora"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// doraFlags are the flags of `tugboat status --dora`.
type doraFlags struct {
	enabled bool
	window  time.Duration
}

// bind binds --dora and --dora-window to the status command.
func (d *doraFlags) bind(cmd *cobra.Command) {
	d.window = dora.DefaultWindow
	cmd.Flags().BoolVar(&d.enabled, "dora", false, "show the DORA figures of each Pipeline instead: deployment frequency, lead time, change-failure rate, time to restore (docs/dora.md)")
	cmd.Flags().DurationVar(&d.window, "dora-window", d.window, "period the DORA figures cover, ending now (with --dora)")
}

// validate refuses a window that is not positive, or given without --dora.
func (d *doraFlags) validate(cmd *cobra.Command) error {
	if !d.enabled {
		if cmd.Flags().Changed("dora-window") {
			return errors.New("--dora-window needs --dora")
		}
		return nil
	}
	if d.window <= 0 {
		return fmt.Errorf("--dora-window must be positive, not %s", d.window)
	}
	return nil
}

// doraListView is what `tugboat status --dora -o json|yaml` prints.
type doraListView struct {
	Pipelines []dora.Figures `json:"pipelines"`
}

// run prints the DORA figures of the Pipeline args names, or of every
// Pipeline of the namespace, computed here from the Pipelines,
// ReleaseHistories and Promotions the hub holds, as the hub's gauges are.
func (d *doraFlags) run(cmd *cobra.Command, s *hubSession, out outputFlag, args []string) error {
	ctx := cmd.Context()
	var pipelines []tugboatv1alpha1.Pipeline
	if len(args) == 1 {
		p, err := request.GetPipeline(ctx, s.client, s.namespace, args[0])
		if err != nil {
			return err
		}
		pipelines = []tugboatv1alpha1.Pipeline{*p}
	} else {
		var list tugboatv1alpha1.PipelineList
		if err := s.client.List(ctx, &list, client.InNamespace(s.namespace)); err != nil {
			return fmt.Errorf("listing pipelines in %s: %w", s.namespace, err)
		}
		pipelines = list.Items
		sort.Slice(pipelines, func(i, j int) bool { return pipelines[i].Name < pipelines[j].Name })
	}
	figures, err := d.compute(ctx, s, pipelines, time.Now())
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if len(args) == 1 {
		if done, err := out.structured(w, figures[0]); done {
			return err
		}
		printDORA(w, &figures[0])
		return nil
	}
	if done, err := out.structured(w, doraListView{Pipelines: figures}); done {
		return err
	}
	if len(figures) == 0 {
		fmt.Fprintf(w, "No pipelines in namespace %s.\n", s.namespace)
		return nil
	}
	printDORATable(w, figures)
	return nil
}

// compute reads the namespace's ReleaseHistories and Promotions once and
// computes each Pipeline's figures at now.
func (d *doraFlags) compute(ctx context.Context, s *hubSession, pipelines []tugboatv1alpha1.Pipeline, now time.Time) ([]dora.Figures, error) {
	figures := make([]dora.Figures, 0, len(pipelines))
	if len(pipelines) == 0 {
		return figures, nil
	}
	var histories tugboatv1alpha1.ReleaseHistoryList
	if err := s.client.List(ctx, &histories, client.InNamespace(s.namespace)); err != nil {
		return nil, fmt.Errorf("listing release histories in %s: %w", s.namespace, err)
	}
	var promotions tugboatv1alpha1.PromotionList
	if err := s.client.List(ctx, &promotions, client.InNamespace(s.namespace)); err != nil {
		return nil, fmt.Errorf("listing promotions in %s: %w", s.namespace, err)
	}
	for i := range pipelines {
		figures = append(figures, dora.Compute(dora.Input{
			Pipeline: &pipelines[i], Histories: histories.Items, Promotions: promotions.Items, Now: now, Window: d.window,
		}))
	}
	return figures, nil
}

// printDORATable writes one row per Pipeline.
func printDORATable(w io.Writer, figures []dora.Figures) {
	tw := newTable(w)
	row(tw, "PIPELINE", "ENVIRONMENT", "WINDOW", "DEPLOYMENTS", "PER DAY", "LEAD TIME P50", "LEAD TIME P90", "CHANGE FAILURE", "RESTORE P50", "RESTORE P90")
	for i := range figures {
		f := &figures[i]
		lead50, lead90 := summaryCells(f.LeadTime)
		ttr50, ttr90 := summaryCells(f.TimeToRestore)
		row(tw, f.Pipeline, f.Environment, humanDuration(f.To.Sub(f.From)), strconv.Itoa(f.Deployments), perDay(f.DeploymentFrequency),
			lead50, lead90, failureCell(f), ttr50, ttr90)
	}
	_ = tw.Flush()
}

// printDORA writes one Pipeline's figures with what each counted.
func printDORA(w io.Writer, f *dora.Figures) {
	fmt.Fprintf(w, "Pipeline %s/%s: DORA figures of %s over %s, to %s\n\n", f.Namespace, f.Pipeline,
		doraOrDash(f.Environment), humanDuration(f.To.Sub(f.From)), f.To.UTC().Format(time.RFC3339))
	tw := newTable(w)
	row(tw, "FIGURE", "VALUE", "FROM")
	row(tw, "deployment frequency", perDay(f.DeploymentFrequency)+"/day", doraCount(f.Deployments, "deployment"))
	lead := summaryText(f.LeadTime)
	leadFrom := ""
	if f.LeadTime != nil {
		leadFrom = doraCount(f.LeadTime.Count, "deployment") + " from " + f.FirstEnvironment
	}
	if f.LeadTimeUnknown > 0 {
		leadFrom = joinNonEmpty(leadFrom, doraCount(f.LeadTimeUnknown, "deployment")+" without a recorded deploy in "+f.FirstEnvironment)
	}
	row(tw, "lead time", lead, leadFrom)
	row(tw, "change-failure rate", failureCell(f), fmt.Sprintf("%d failed of %s", f.ChangeFailures, doraCount(f.Changes, "change")))
	ttrFrom := ""
	if f.TimeToRestore != nil {
		ttrFrom = doraCount(f.TimeToRestore.Count, "restored failure")
	}
	if f.Unrestored > 0 {
		ttrFrom = joinNonEmpty(ttrFrom, fmt.Sprintf("%d not restored yet", f.Unrestored))
	}
	row(tw, "time to restore", summaryText(f.TimeToRestore), ttrFrom)
	_ = tw.Flush()
}

func summaryCells(s *dora.Summary) (string, string) {
	if s == nil {
		return "", ""
	}
	return humanDuration(s.Median), humanDuration(s.P90)
}

func summaryText(s *dora.Summary) string {
	if s == nil {
		return ""
	}
	return "median " + humanDuration(s.Median) + ", p90 " + humanDuration(s.P90)
}

func failureCell(f *dora.Figures) string {
	if f.ChangeFailureRate == nil {
		return ""
	}
	return strconv.FormatFloat(*f.ChangeFailureRate*100, 'f', 1, 64) + "%"
}

func perDay(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// humanDuration renders d to the minute (to the second under a minute),
// with days: 1d1h5m, 55m, 30d.
func humanDuration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	d = d.Round(time.Minute)
	out := ""
	if days := d / (24 * time.Hour); days > 0 {
		out = strconv.Itoa(int(days)) + "d"
		d -= days * 24 * time.Hour
	}
	if h := d / time.Hour; h > 0 {
		out += strconv.Itoa(int(h)) + "h"
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		out += strconv.Itoa(int(m)) + "m"
	}
	return out
}

func doraCount(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func doraOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
