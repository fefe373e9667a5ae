//go:build !agentonly

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// cliFieldManager is the field manager of the objects the spoke verbs write.
const cliFieldManager = "tugboat-cli"

func newSpokeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "spoke",
		Short: "Register, list, re-key and remove spokes (leaf clusters) on the hub",
		Long: `spoke manages the Spokes of a namespace on the hub: "add" registers one and
prints the command that installs its agent (or, with --flux, sets up Flux
notification-controller to report instead), "list" shows them, "rotate-key"
replaces an agent's key without refusing a request, "remove" deletes one.`,
		// Runnable, so that an unknown verb is an error (exit 1), not help.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newSpokeAddCommand(), newSpokeListCommand(), newSpokeRotateKeyCommand(), newSpokeRemoveCommand())
	return cmd
}

// validateSpokeName checks a spoke name given on the command line: an RFC
// 1123 label, as the Spoke CRD and the wire protocol require.
func validateSpokeName(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("%q is not a valid spoke name (an RFC 1123 label: lower-case letters, digits and '-', at most 63 characters): %s", name, strings.Join(msgs, "; "))
	}
	return nil
}

// getSpoke reads Spoke ns/name from the hub, with a clear error when it is
// missing.
func getSpoke(ctx context.Context, s *hubSession, name string) (*tugboatv1alpha1.Spoke, error) {
	sp := &tugboatv1alpha1.Spoke{}
	err := s.client.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: name}, sp)
	switch {
	case apierrors.IsNotFound(err):
		return nil, notFoundErrorf("spoke %s/%s not found (tugboat spoke list -n %s shows the spokes there)", s.namespace, name, s.namespace)
	case apimeta.IsNoMatchError(err):
		return nil, errors.New("the hub cluster has no Spoke CRD (tugboat.dev/v1alpha1): install the hub first (tugboat install hub)")
	case err != nil:
		return nil, fmt.Errorf("reading spoke %s/%s: %w", s.namespace, name, err)
	}
	return sp, nil
}

// completeSpokeNames completes the NAME argument of a spoke verb with the
// Spokes of the namespace the flags choose on the hub.
func completeSpokeNames(hf *hubFlags) cobra.CompletionFunc {
	return completeNames(hf, func(cmd *cobra.Command, s *hubSession) ([]string, error) {
		var list tugboatv1alpha1.SpokeList
		if err := s.client.List(cmd.Context(), &list, client.InNamespace(s.namespace)); err != nil {
			return nil, err
		}
		names := make([]string, 0, len(list.Items))
		for _, sp := range list.Items {
			names = append(names, sp.Name)
		}
		return names, nil
	})
}

// spokeView is what `tugboat spoke list` shows of a Spoke (and prints with
// -o json|yaml).
type spokeView struct {
	Namespace         string                 `json:"namespace"`
	Name              string                 `json:"name"`
	Ready             metav1.ConditionStatus `json:"ready"`
	Reason            string                 `json:"reason,omitempty"`
	Message           string                 `json:"message,omitempty"`
	LastSeen          *metav1.Time           `json:"lastSeen,omitempty"`
	LastFluxEvent     *metav1.Time           `json:"lastFluxEvent,omitempty"`
	AgentVersion      string                 `json:"agentVersion,omitempty"`
	KubernetesVersion string                 `json:"kubernetesVersion,omitempty"`
	Releases          int32                  `json:"releases"`
	Suspended         bool                   `json:"suspended,omitempty"`
	KeySecret         string                 `json:"keySecret"`
}

type spokeListView struct {
	Spokes []spokeView `json:"spokes"`
}

func spokeViewOf(sp *tugboatv1alpha1.Spoke) spokeView {
	v := spokeView{
		Namespace: sp.Namespace, Name: sp.Name, Ready: metav1.ConditionUnknown,
		LastSeen:     sp.Status.LastSeen,
		AgentVersion: sp.Status.AgentVersion, KubernetesVersion: sp.Status.KubernetesVersion,
		Releases: sp.Status.ReleaseCount, Suspended: sp.Spec.Suspend, KeySecret: sp.Spec.KeySecretRef.Name,
	}
	if ev := sp.Status.LastFluxEvent; ev != nil {
		v.LastFluxEvent = &ev.ReceivedAt
	}
	if c := apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil {
		v.Ready, v.Reason, v.Message = c.Status, c.Reason, c.Message
	}
	return v
}

func newSpokeListCommand() *cobra.Command {
	var (
		hf            hubFlags
		out           outputFlag
		allNamespaces bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the spokes: Ready, last seen, agent version, releases",
		Long: `list shows the Spokes of a namespace on the hub (-A: of every namespace): whether
each is Ready (its agent's heartbeats arrive), when the hub last heard from it,
the agent's version and how many Helm releases it reported (for an agentless
spoke, LAST SEEN is its last Flux event, marked "(flux)"). -o wide adds the
Kubernetes version, the key Secret, and the reason and message of Ready.`,
		Example: `  tugboat spoke list -n fleet
  tugboat spoke list -A -o wide
  tugboat spoke list -n fleet -o json`,
		Aliases: []string{"ls"},
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wide := out.wide()
			if err := out.validate(); err != nil {
				return err
			}
			s, err := hf.connect()
			if err != nil {
				return err
			}
			var list tugboatv1alpha1.SpokeList
			var opts []client.ListOption
			where := "namespace " + s.namespace
			if allNamespaces {
				where = "any namespace"
			} else {
				opts = append(opts, client.InNamespace(s.namespace))
			}
			if err := s.client.List(cmd.Context(), &list, opts...); err != nil {
				if apimeta.IsNoMatchError(err) {
					return errors.New("the hub cluster has no Spoke CRD (tugboat.dev/v1alpha1): install the hub first (tugboat install hub)")
				}
				return fmt.Errorf("listing spokes in %s: %w", where, err)
			}
			sort.Slice(list.Items, func(i, j int) bool {
				a, b := list.Items[i], list.Items[j]
				if a.Namespace != b.Namespace {
					return a.Namespace < b.Namespace
				}
				return a.Name < b.Name
			})
			views := make([]spokeView, 0, len(list.Items))
			for i := range list.Items {
				views = append(views, spokeViewOf(&list.Items[i]))
			}
			w := cmd.OutOrStdout()
			if done, err := out.structured(w, spokeListView{Spokes: views}); done {
				return err
			}
			if len(views) == 0 {
				fmt.Fprintf(w, "No spokes in %s.\n", where)
				return nil
			}
			printSpokes(w, views, allNamespaces, wide, newPainter(w))
			return nil
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list the spokes of every namespace")
	return cmd
}

// printSpokes writes one row per Spoke.
func printSpokes(w io.Writer, views []spokeView, withNamespace, wide bool, pt painter) {
	tw := newTable(w)
	header := []string{"NAME", pt.header("READY"), "LAST SEEN", "AGENT", "RELEASES"}
	if withNamespace {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if wide {
		header = append(header, "KUBERNETES", "KEY SECRET", "REASON", "MESSAGE")
	}
	row(tw, header...)
	for _, v := range views {
		name := v.Name
		if v.Suspended {
			name += " (suspended)"
		}
		seen := timestamp(v.LastSeen)
		if seen == "" && v.LastFluxEvent != nil {
			seen = timestamp(v.LastFluxEvent) + " (flux)"
		}
		// Before the first heartbeat (and for agentless spokes, which send
		// none) the count is unknown, not 0.
		releases := "-"
		if v.LastSeen != nil {
			releases = strconv.Itoa(int(v.Releases))
		}
		cells := []string{name, pt.cell(string(v.Ready)), seen, v.AgentVersion, releases}
		if withNamespace {
			cells = append([]string{v.Namespace}, cells...)
		}
		if wide {
			cells = append(cells, v.KubernetesVersion, v.KeySecret, v.Reason, v.Message)
		}
		row(tw, cells...)
	}
	_ = tw.Flush()
}
