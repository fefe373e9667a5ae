//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// pipelineView is what `tugboat status` shows of a Pipeline (and prints
// with -o json|yaml).
type pipelineView struct {
	Namespace    string             `json:"namespace"`
	Name         string             `json:"name"`
	Release      string             `json:"release"`
	Suspended    bool               `json:"suspended,omitempty"`
	Environments []environmentView  `json:"environments"`
	Conditions   []metav1.Condition `json:"conditions,omitempty"`
}

type environmentView struct {
	Name            string                           `json:"name"`
	Versions        []string                         `json:"versions,omitempty"`
	HealthySince    *metav1.Time                     `json:"healthySince,omitempty"`
	ActivePromotion string                           `json:"activePromotion,omitempty"`
	RequireApproval bool                             `json:"requireApproval,omitempty"`
	Hold            *tugboatv1alpha1.HeldEnvironment `json:"hold,omitempty"`
	Targets         []tugboatv1alpha1.TargetStatus   `json:"targets,omitempty"`
	// TargetCount and HealthyTargets count every target (Targets lists at
	// most 100).
	TargetCount    int32 `json:"targetCount,omitempty"`
	HealthyTargets int32 `json:"healthyTargets,omitempty"`
	// Rollout is the active Promotion's progress in waves (status_rollout.go).
	Rollout *rolloutView `json:"rollout,omitempty"`
	// Steps are the lifecycle steps of the active promotion (one pipeline
	// only: status_steps.go).
	Steps []tugboatv1alpha1.StepStatus `json:"steps,omitempty"`
}

type pipelineListView struct {
	Pipelines []pipelineView `json:"pipelines"`
}

// viewOf merges a Pipeline's spec (the environments, in order) with its
// status (which may lag or be empty).
func viewOf(p *tugboatv1alpha1.Pipeline) pipelineView {
	v := pipelineView{Namespace: p.Namespace, Name: p.Name, Release: p.Spec.Release, Suspended: p.Spec.Suspend, Conditions: p.Status.Conditions}
	status := map[string]tugboatv1alpha1.EnvironmentStatus{}
	for _, es := range p.Status.Environments {
		status[es.Name] = es
	}
	holds := map[string]tugboatv1alpha1.HeldEnvironment{}
	for _, h := range p.Status.HeldEnvironments {
		holds[h.Name] = h
	}
	for _, env := range p.Spec.Environments {
		es := status[env.Name]
		ev := environmentView{
			Name: env.Name, Versions: es.Versions, HealthySince: es.HealthySince, ActivePromotion: es.ActivePromotion,
			RequireApproval: env.Gates.RequireApproval, Targets: es.Targets, TargetCount: es.TargetCount, HealthyTargets: es.HealthyTargets,
		}
		if h, ok := holds[env.Name]; ok {
			ev.Hold = &h
		}
		v.Environments = append(v.Environments, ev)
	}
	return v
}

func newStatusCommand() *cobra.Command {
	var (
		hf    hubFlags
		out   outputFlag
		watch bool
		df    doraFlags // --dora: status_dora.go
	)
	cmd := &cobra.Command{
		Use:   "status [pipeline]",
		Short: "Show where each Pipeline stands: versions per environment, health, promotions, holds",
		Long: `status lists the Pipelines of a namespace on the hub and, per environment, the
versions its targets run, since when they are healthy, the promotion under way
and any rollback hold; a promotion rolling out in waves shows its progress
("wave 2/3 (wave-1), 4/10 succeeded, 1 failed of 2 allowed"). With a
Pipeline's name it also shows every target (spoke, namespace, release,
revision, version, health), each rollout's waves (-o wide: the targets
that failed) and the Pipeline's conditions.`,
		Example: `  tugboat status -n fleet
  tugboat status web -n fleet
  tugboat status web -n fleet -o yaml
  tugboat status -n fleet --watch`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completePipelineNames(&hf),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if err := df.validate(cmd); err != nil {
				return err
			}
			s, err := hf.connect()
			if err != nil {
				return err
			}
			if df.enabled {
				if watch {
					return usageErrorf("--dora cannot be combined with --watch")
				}
				return df.run(cmd, s, out, args)
			}
			pt := newPainter(cmd.OutOrStdout()) // decided for stdout, also when watching renders into a buffer
			render := func(ctx context.Context, w io.Writer) error {
				return renderStatus(ctx, w, s, args, out, pt)
			}
			if watch {
				return watchStatus(cmd.Context(), s, cmd.OutOrStdout(), out, render)
			}
			return render(cmd.Context(), cmd.OutOrStdout())
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after printing, print again on every change of the Pipelines and Promotions (redrawn on a terminal, appended otherwise) until Ctrl-C")
	df.bind(cmd)
	return cmd
}

// renderStatus writes the status of the Pipeline args names, or of every
// Pipeline of the namespace.
func renderStatus(ctx context.Context, w io.Writer, s *hubSession, args []string, out outputFlag, pt painter) error {
	if len(args) == 1 {
		p, err := request.GetPipeline(ctx, s.client, s.namespace, args[0])
		if err != nil {
			return err
		}
		views := []pipelineView{viewOf(p)}
		if err := addRollouts(ctx, s.client, s.namespace, views); err != nil {
			return err
		}
		v := views[0]
		if err := addSteps(ctx, s, &v); err != nil {
			return err
		}
		if done, err := out.structured(w, v); done {
			return err
		}
		printPipeline(w, v, out.wide(), pt)
		return nil
	}
	views, err := listPipelines(ctx, s)
	if err != nil {
		return err
	}
	if err := addRollouts(ctx, s.client, s.namespace, views); err != nil {
		return err
	}
	if done, err := out.structured(w, pipelineListView{Pipelines: views}); done {
		return err
	}
	if len(views) == 0 {
		fmt.Fprintf(w, "No pipelines in namespace %s.\n", s.namespace)
		return nil
	}
	printPipelines(w, views, out.wide())
	return nil
}

func listPipelines(ctx context.Context, s *hubSession) ([]pipelineView, error) {
	var list tugboatv1alpha1.PipelineList
	if err := s.client.List(ctx, &list, client.InNamespace(s.namespace)); err != nil {
		return nil, fmt.Errorf("listing pipelines in %s: %w", s.namespace, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	views := make([]pipelineView, 0, len(list.Items))
	for i := range list.Items {
		views = append(views, viewOf(&list.Items[i]))
	}
	return views, nil
}

// printPipelines writes one row per environment of every Pipeline; wide
// adds whether the environment requires approval and how many of its
// targets are healthy (Current).
func printPipelines(w io.Writer, views []pipelineView, wide bool) {
	tw := newTable(w)
	header := []string{"PIPELINE", "ENVIRONMENT", "VERSIONS", "HEALTHY SINCE", "ACTIVE PROMOTION", "HOLD"}
	if wide {
		header = []string{"PIPELINE", "ENVIRONMENT", "VERSIONS", "HEALTHY SINCE", "APPROVAL", "HEALTHY TARGETS", "ACTIVE PROMOTION", "HOLD"}
	}
	row(tw, header...)
	for _, v := range views {
		name := v.Name
		if v.Suspended {
			name += " (suspended)"
		}
		for _, ev := range v.Environments {
			if wide {
				row(tw, name, ev.Name, strings.Join(ev.Versions, ","), timestamp(ev.HealthySince), approvalText(ev), healthyTargets(ev), activeText(ev), holdText(ev.Hold))
			} else {
				row(tw, name, ev.Name, strings.Join(ev.Versions, ","), timestamp(ev.HealthySince), activeText(ev), holdText(ev.Hold))
			}
			name = " " // the Pipeline's name on its first row only
		}
	}
	_ = tw.Flush()
}

func approvalText(ev environmentView) string {
	if ev.RequireApproval {
		return "required"
	}
	return ""
}

// healthyTargets is "<Current>/<all>" of an environment's targets: the
// hub's counts (the status lists at most 100 targets), else the list's.
func healthyTargets(ev environmentView) string {
	if ev.TargetCount > 0 {
		return fmt.Sprintf("%d/%d", ev.HealthyTargets, ev.TargetCount)
	}
	n := 0
	for _, t := range ev.Targets {
		if t.Health == tugboatv1alpha1.HealthCurrent {
			n++
		}
	}
	return fmt.Sprintf("%d/%d", n, len(ev.Targets))
}

// printPipeline writes one Pipeline in detail; wide adds each target's
// spoke selector (for targets selected by label).
func printPipeline(w io.Writer, v pipelineView, wide bool, pt painter) {
	fmt.Fprintf(w, "Pipeline %s/%s (release %s)", v.Namespace, v.Name, v.Release)
	if v.Suspended {
		fmt.Fprint(w, ", suspended")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	tw := newTable(w)
	row(tw, "ENVIRONMENT", "VERSIONS", "HEALTHY SINCE", "APPROVAL", "ACTIVE PROMOTION", "HOLD")
	for _, ev := range v.Environments {
		row(tw, ev.Name, strings.Join(ev.Versions, ","), timestamp(ev.HealthySince), approvalText(ev), activeText(ev), holdText(ev.Hold))
	}
	_ = tw.Flush()

	fmt.Fprintln(w)
	tw = newTable(w)
	header := []string{"ENVIRONMENT", "SPOKE", "NAMESPACE", "RELEASE", "REVISION", "VERSION", pt.header("HEALTH"), "LAST DEPLOYED"}
	if wide {
		header = append(header, "SELECTOR")
	}
	row(tw, header...)
	for _, ev := range v.Environments {
		for _, t := range ev.Targets {
			rev := ""
			if t.Revision > 0 {
				rev = strconv.Itoa(int(t.Revision))
			}
			version := t.Version
			if t.Absent && version == "" {
				version = "(absent)"
			}
			cells := []string{ev.Name, t.Spoke, t.Namespace, t.Release, rev, version, pt.cell(string(t.Health)), timestamp(t.LastDeployed)}
			if wide {
				cells = append(cells, t.Selector)
			}
			row(tw, cells...)
		}
		if len(ev.Targets) == 0 {
			cells := []string{ev.Name, "(not reported yet)", "", "", "", "", pt.cell(""), ""}
			if wide {
				cells = append(cells, "")
			}
			row(tw, cells...)
		}
	}
	_ = tw.Flush()
	printRollouts(w, v, wide, pt)
	printSteps(w, v, pt)

	if len(v.Conditions) > 0 {
		fmt.Fprintln(w)
		tw = newTable(w)
		row(tw, "CONDITION", pt.header("STATUS"), "REASON", "SINCE", "MESSAGE")
		for _, c := range v.Conditions {
			row(tw, c.Type, pt.cell(string(c.Status)), c.Reason, timestamp(&c.LastTransitionTime), c.Message)
		}
		_ = tw.Flush()
	}
}

func holdText(h *tugboatv1alpha1.HeldEnvironment) string {
	if h == nil {
		return ""
	}
	s := "held since " + timestamp(&h.Since)
	if h.Message != "" {
		s += ": " + h.Message
	}
	return s
}
