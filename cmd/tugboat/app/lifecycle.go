//go:build !agentonly

package app

import (
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/lifecycle"
)

// lifecycleEventView is what `tugboat lifecycle` prints of a
// LifecycleEvent with -o json|yaml.
type lifecycleEventView struct {
	Namespace   string                              `json:"namespace"`
	Name        string                              `json:"name"`
	Lifecycle   string                              `json:"lifecycle"`
	EventKey    string                              `json:"eventKey"`
	Promotion   string                              `json:"promotion"`
	Environment string                              `json:"environment"`
	Version     string                              `json:"version"`
	Step        string                              `json:"step"`
	Stage       tugboatv1alpha1.StepStage           `json:"stage"`
	Attempt     int32                               `json:"attempt"`
	Deadline    string                              `json:"deadline"`
	Phase       tugboatv1alpha1.LifecycleEventPhase `json:"phase"`
	Message     string                              `json:"message,omitempty"`
	FinishedBy  string                              `json:"finishedBy,omitempty"`
}

type lifecycleEventListView struct {
	Events []lifecycleEventView `json:"events"`
}

func lifecycleEventViewOf(ev *tugboatv1alpha1.LifecycleEvent) lifecycleEventView {
	return lifecycleEventView{
		Namespace: ev.Namespace, Name: ev.Name, Lifecycle: ev.Spec.Lifecycle, EventKey: ev.Spec.EventKey, Promotion: ev.Spec.Promotion,
		Environment: ev.Spec.Environment, Version: ev.Spec.Version, Step: ev.Spec.Step, Stage: ev.Spec.Stage, Attempt: ev.Spec.Attempt,
		Deadline: timestamp(&ev.Spec.Deadline), Phase: ev.Phase(), Message: ev.Status.Message, FinishedBy: ev.Status.FinishedBy,
	}
}

func newLifecycleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lifecycle",
		Short: "List and finish the events of external lifecycle steps",
		Long: `lifecycle lists the LifecycleEvents the hub published for external lifecycle
steps, and finishes one by hand (done or error), as a step controller would:
for a person, or a CI job, that ran the step's work. The event records the
user name the hub's API server authenticated (a SelfSubjectReview), never a
name given on the command line; the ValidatingAdmissionPolicy
tugboat-lifecycles refuses any other. RBAC must allow you to patch
lifecycleevents/status (the ClusterRole tugboat-step-controller). See
docs/lifecycle.md.`,
	}
	cmd.AddCommand(newLifecycleListCommand(), newLifecycleFinishCommand(tugboatv1alpha1.EventDone), newLifecycleFinishCommand(tugboatv1alpha1.EventError),
		newLifecycleClaimCommand())
	return cmd
}

func newLifecycleListCommand() *cobra.Command {
	var (
		hf      hubFlags
		out     outputFlag
		pending bool
	)
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the LifecycleEvents of the namespace, unfinished first",
		Example: `  tugboat lifecycle list -n fleet --pending`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			s, err := hf.connect()
			if err != nil {
				return err
			}
			var list tugboatv1alpha1.LifecycleEventList
			if err := s.client.List(cmd.Context(), &list, client.InNamespace(s.namespace)); err != nil {
				return fmt.Errorf("listing lifecycleevents in %s: %w", s.namespace, err)
			}
			items := list.Items
			sort.SliceStable(items, func(i, j int) bool {
				a, b := items[i].Phase().Finished(), items[j].Phase().Finished()
				if a != b {
					return !a
				}
				return items[i].CreationTimestamp.Before(&items[j].CreationTimestamp)
			})
			view := lifecycleEventListView{Events: []lifecycleEventView{}}
			for i := range items {
				if pending && items[i].Phase().Finished() {
					continue
				}
				view.Events = append(view.Events, lifecycleEventViewOf(&items[i]))
			}
			w := cmd.OutOrStdout()
			if done, err := out.structured(w, view); done {
				return err
			}
			if len(view.Events) == 0 {
				fmt.Fprintf(w, "No lifecycle events in namespace %s.\n", s.namespace)
				return nil
			}
			tw := newTable(w)
			row(tw, "EVENT", "LIFECYCLE", "PROMOTION", "STEP", "ATTEMPT", "PHASE", "DEADLINE", "FINISHED BY", "MESSAGE")
			for _, v := range view.Events {
				row(tw, v.Name, v.Lifecycle, v.Promotion, string(v.Stage)+"/"+v.Step, strconv.Itoa(int(v.Attempt)), string(v.Phase), v.Deadline, v.FinishedBy, v.Message)
			}
			return tw.Flush()
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	cmd.Flags().BoolVar(&pending, "pending", false, "list only the events no one finished yet")
	return cmd
}

func newLifecycleFinishCommand(phase tugboatv1alpha1.LifecycleEventPhase) *cobra.Command {
	var (
		hf      hubFlags
		out     outputFlag
		message string
	)
	verb, short := "done", "Mark a LifecycleEvent Done: its step passes"
	if phase == tugboatv1alpha1.EventError {
		verb, short = "error", "Mark a LifecycleEvent Error: its step fails (or retries)"
	}
	cmd := &cobra.Command{
		Use:   verb + " <event>",
		Short: short,
		Long: short + `, in the name the hub's API server
authenticates you as. An event already finished (Done, Error, or TimedOut at
its deadline) cannot be changed (exit code 5).`,
		Example: `  tugboat lifecycle ` + verb + ` web-production-1.4.0-migrate-1 -n fleet --message "schema v42"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if len(message) > tugboatv1alpha1.MaxStepMessageLength {
				return usageErrorf("--message holds %d bytes; at most %d are allowed", len(message), tugboatv1alpha1.MaxStepMessageLength)
			}
			s, err := hf.connect()
			if err != nil {
				return err
			}
			ev, err := lifecycle.Finish(cmd.Context(), s.client, s.namespace, args[0], phase, message)
			if errors.Is(err, lifecycle.ErrFinished) {
				return &exitError{code: ExitConflict, err: err}
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if done, err := out.structured(w, lifecycleEventViewOf(ev)); done {
				return err
			}
			fmt.Fprintf(w, "Marked lifecycle event %s %s (step %s of promotion %s), as %s.\n", ev.Name, phase, ev.Spec.Step, ev.Spec.Promotion, ev.Status.FinishedBy)
			return nil
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	cmd.Flags().StringVarP(&message, "message", "m", "", "what happened, recorded in the event and the step's status")
	return cmd
}

func newLifecycleClaimCommand() *cobra.Command {
	var hf hubFlags
	cmd := &cobra.Command{
		Use:   "claim <lifecycle>",
		Short: "Record that you handle a Lifecycle now (a step controller does it every few minutes)",
		Long: `claim writes the Lifecycle's status.claimedBy (the user name the hub's API
server authenticates you as) and status.lastClaimedAt (now). A step
controller claims its Lifecycle when it starts and then at least every 5
minutes; tugboat doctor warns about a Lifecycle not claimed in the last 15.`,
		Example: `  tugboat lifecycle claim db-migrate -n fleet`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := hf.connect()
			if err != nil {
				return err
			}
			lc, err := lifecycle.Claim(cmd.Context(), s.client, s.namespace, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Claimed lifecycle %s (event key %s), as %s.\n", lc.Name, lc.Spec.EventKey, lc.Status.ClaimedBy)
			return nil
		},
	}
	hf.bind(cmd)
	return cmd
}
