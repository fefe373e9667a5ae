//go:build !agentonly

package app

import (
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// newCompletionCommand returns `tugboat completion bash|zsh|fish|powershell`.
func newCompletionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print the shell completion script",
		Long: `completion prints a script that completes tugboat's verbs and flags in your
shell and, read from the hub with your kubeconfig, the names of Pipelines
(status, promote, resume), Promotions (approve, reject, abort) and Spokes
(spoke rotate-key, spoke remove, history, releases --spoke).`,
		Example: `  source <(tugboat completion bash)
  tugboat completion zsh > "${fpath[1]}/_tugboat"
  tugboat completion fish > ~/.config/fish/completions/tugboat.fish
  tugboat completion powershell | Out-String | Invoke-Expression`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []cobra.Completion{"bash", "zsh", "fish", "powershell"},
		RunE: func(cmd *cobra.Command, args []string) error {
			root, w := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(w, true)
			case "zsh":
				return root.GenZshCompletion(w)
			case "fish":
				return root.GenFishCompletion(w, true)
			case "powershell":
				return root.GenPowerShellCompletionWithDesc(w)
			}
			return usageErrorf("unknown shell %q: use bash, zsh, fish or powershell", args[0])
		},
	}
	return cmd
}

// completeNames completes the first argument with the names list returns
// (read from the hub), those that start with what was typed, sorted.
func completeNames(hf *hubFlags, list func(cmd *cobra.Command, s *hubSession) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		s, err := hf.connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		all, err := list(cmd, s)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for _, n := range all {
			if strings.HasPrefix(n, toComplete) {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// completePipelineNames completes with the namespace's Pipelines.
func completePipelineNames(hf *hubFlags) cobra.CompletionFunc {
	return completeNames(hf, func(cmd *cobra.Command, s *hubSession) ([]string, error) {
		var list tugboatv1alpha1.PipelineList
		if err := s.client.List(cmd.Context(), &list, client.InNamespace(s.namespace)); err != nil {
			return nil, err
		}
		names := make([]string, 0, len(list.Items))
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		return names, nil
	})
}

// completePromotionNames completes with the namespace's Promotions that
// keep returns true for.
func completePromotionNames(hf *hubFlags, keep func(*tugboatv1alpha1.Promotion) bool) cobra.CompletionFunc {
	return completeNames(hf, func(cmd *cobra.Command, s *hubSession) ([]string, error) {
		var list tugboatv1alpha1.PromotionList
		if err := s.client.List(cmd.Context(), &list, client.InNamespace(s.namespace)); err != nil {
			return nil, err
		}
		var names []string
		for i := range list.Items {
			if keep(&list.Items[i]) {
				names = append(names, list.Items[i].Name)
			}
		}
		return names, nil
	})
}

// unfinished keeps Promotions that are not terminal (abort).
func unfinished(pr *tugboatv1alpha1.Promotion) bool { return !pr.Status.Phase.Terminal() }

// awaitingDecision keeps Promotions that may still take a vote (approve,
// reject): not started, not finished, their gate not decided.
func awaitingDecision(pr *tugboatv1alpha1.Promotion) bool {
	switch pr.Status.Phase {
	case "", tugboatv1alpha1.PromotionPending, tugboatv1alpha1.PromotionWaitingApproval:
		return pr.Status.Approval == nil
	}
	return false
}

// completeEnvironments completes a flag with the environments of the
// Pipeline named by the first argument.
func completeEnvironments(hf *hubFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		s, err := hf.connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		p := &tugboatv1alpha1.Pipeline{}
		if err := s.client.Get(cmd.Context(), client.ObjectKey{Namespace: s.namespace, Name: args[0]}, p); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for _, env := range p.Spec.Environments {
			if strings.HasPrefix(env.Name, toComplete) {
				names = append(names, env.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
