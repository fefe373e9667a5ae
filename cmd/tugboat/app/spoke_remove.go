//go:build !agentonly

package app

import (
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

func newSpokeRemoveCommand() *cobra.Command {
	var (
		hf          hubFlags
		keepHistory bool
		output      outputFlag
	)
	cmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Delete a spoke from the hub (its ReleaseHistories and key go with it)",
		Long: `remove deletes the Spoke NAME from the hub. Its ReleaseHistories and its key
Secret (when the hub generated it) are owned by the Spoke, so the hub cluster's
garbage collector deletes them too; with --keep-history they are kept (orphaned:
they lose their owner and stay until deleted by hand). From then on the hub
refuses the spoke's agent (401) and Flux events; Pipelines that target the spoke
show it as not reported. Uninstall the agent on the spoke cluster yourself.`,
		Example: `  tugboat spoke remove staging-1 -n fleet
  tugboat spoke remove staging-1 -n fleet --keep-history`,
		Aliases:           []string{"rm"},
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeSpokeNames(&hf),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := output.validate(); err != nil {
				return err
			}
			name := args[0]
			if err := validateSpokeName(name); err != nil {
				return usageErrorf("%w", err)
			}
			s, err := hf.connect()
			if err != nil {
				return err
			}
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			sp, err := getSpoke(ctx, s, name)
			if err != nil {
				return err
			}
			var histories tugboatv1alpha1.ReleaseHistoryList
			if err := s.client.List(ctx, &histories, client.InNamespace(sp.Namespace), client.MatchingLabels{tugboatv1alpha1.LabelSpoke: name}); err != nil {
				return fmt.Errorf("listing the release histories of spoke %s/%s: %w", sp.Namespace, name, err)
			}
			policy := metav1.DeletePropagationBackground
			if keepHistory {
				policy = metav1.DeletePropagationOrphan
			}
			if err := s.client.Delete(ctx, sp, client.PropagationPolicy(policy), client.Preconditions{UID: &sp.UID}); err != nil {
				return fmt.Errorf("deleting spoke %s/%s: %w", sp.Namespace, name, err)
			}
			n := len(histories.Items)
			if done, err := output.structured(out, spokeRemoval{Namespace: sp.Namespace, Name: name, ReleaseHistories: n, KeySecret: sp.Spec.KeySecretRef.Name, Kept: keepHistory}); done {
				return err
			}
			if keepHistory {
				fmt.Fprintf(out, "Spoke %s/%s deleted. Its %s and key Secret %s are kept, without an owner.\n", sp.Namespace, name, plural(n, "ReleaseHistory"), sp.Spec.KeySecretRef.Name)
			} else {
				fmt.Fprintf(out, "Spoke %s/%s deleted. Its %s and key Secret %s (if the hub generated it) are deleted with it (garbage collection).\n", sp.Namespace, name, plural(n, "ReleaseHistory"), sp.Spec.KeySecretRef.Name)
			}
			fmt.Fprintf(out, "The hub refuses its agent from now on: uninstall the agent on the spoke cluster.\n")
			return nil
		},
	}
	hf.bind(cmd)
	output.bind(cmd)
	cmd.Flags().BoolVar(&keepHistory, "keep-history", false, "keep the spoke's ReleaseHistories and key Secret (orphan them) instead of deleting them with it")
	return cmd
}

// spokeRemoval is what `tugboat spoke remove` prints with -o json|yaml.
type spokeRemoval struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ReleaseHistories is how many ReleaseHistories the spoke had.
	ReleaseHistories int    `json:"releaseHistories"`
	KeySecret        string `json:"keySecret"`
	// Kept reports whether they were kept (--keep-history) rather than
	// deleted with the Spoke.
	Kept bool `json:"kept"`
}
