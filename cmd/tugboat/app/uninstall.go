//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tugboat.dev/tugboat/config"
)

func newUninstallCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Uninstall the hub, or a spoke's agent (keeps tugboat's data unless --purge)",
		Long: `uninstall removes the Helm release tugboat-hub or tugboat-agent from namespace
tugboat-system, as helm uninstall does. The hub's CRDs, and with them every Spoke,
ReleaseHistory, Pipeline and Promotion, stay (the chart marks them keep), so
installing again picks up where it stopped; --purge deletes them too. On a spoke,
the agent's webhook certificate Secret stays for a reinstall, and so does its hub
key Secret, unless --purge.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newUninstallHubCommand(), newUninstallAgentCommand())
	return cmd
}

// uninstallFlags are the flags both uninstall verbs share.
type uninstallFlags struct {
	kube    kubeFlags
	out     outputFlag
	purge   bool
	timeout time.Duration
}

// uninstallResult is what the uninstall verbs print with -o json|yaml.
type uninstallResult struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	// Removed reports whether there was a release to remove.
	Removed bool `json:"removed"`
	// Deleted lists what --purge deleted ("<Kind> <name>").
	Deleted []string `json:"deleted,omitempty"`
}

func (f *uninstallFlags) bind(cmd *cobra.Command, purge string) {
	f.kube.bind(cmd)
	f.out.bind(cmd)
	cmd.Flags().BoolVar(&f.purge, "purge", false, purge)
	cmd.Flags().DurationVar(&f.timeout, "timeout", 2*time.Minute, "how long to wait for the API server")
}

// run uninstalls the chart's release, then (with --purge) calls purge to
// delete what the chart keeps; purge tells each deletion to deleted.
func (f *uninstallFlags) run(cmd *cobra.Command, role, chart string, purge func(ctx context.Context, c *cluster, deleted func(kind, name string)) error) error {
	if err := f.out.validate(); err != nil {
		return err
	}
	if f.timeout <= 0 {
		return usageErrorf("--timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout+time.Minute)
	defer cancel()
	c, err := connectCluster(ctx, role, f.kube)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	structured := f.out == "json" || f.out == "yaml"
	if structured {
		out = cmd.ErrOrStderr() // progress; the result goes to stdout
	}
	removed, err := config.Uninstall(config.Target{Kubeconfig: f.kube.kubeconfig, Context: f.kube.context, Namespace: agentNamespace}, chart, f.timeout)
	if err != nil {
		return c.explain("uninstalling "+chart+" from", err)
	}
	result := uninstallResult{Release: chart, Namespace: agentNamespace, Removed: removed}
	if removed {
		fmt.Fprintf(out, "Release %s/%s uninstalled from the %s.\n", agentNamespace, chart, c.where)
	} else {
		fmt.Fprintf(out, "No release %s/%s on the %s: nothing to uninstall.\n", agentNamespace, chart, c.where)
	}
	if f.purge {
		err = purge(ctx, c, func(kind, name string) {
			result.Deleted = append(result.Deleted, kind+" "+name)
			if kind == "CustomResourceDefinition" {
				fmt.Fprintf(out, "CustomResourceDefinition %s deleted, with every object of its kind.\n", name)
			} else {
				fmt.Fprintf(out, "%s %s deleted.\n", kind, name)
			}
		})
		if err != nil {
			return err
		}
	}
	_, err = f.out.structured(cmd.OutOrStdout(), result)
	return err
}

func newUninstallHubCommand() *cobra.Command {
	var f uninstallFlags
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Uninstall the hub (the release tugboat-hub); --purge also deletes the CRDs and all of tugboat's data",
		Example: `  tugboat uninstall hub --context hub
  tugboat uninstall hub --context hub --purge   # every Spoke, ReleaseHistory, Pipeline and Promotion goes too`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, "hub cluster", config.HubChart, func(ctx context.Context, c *cluster, deleted func(kind, name string)) error {
				for _, name := range hubCRDs() {
					crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
					switch err := c.client.Delete(ctx, crd); {
					case err == nil:
						deleted("CustomResourceDefinition", name)
					case !apierrors.IsNotFound(err):
						return c.explain("deleting CustomResourceDefinition "+name+" from", err)
					}
				}
				return nil
			})
		},
	}
	f.bind(cmd, "also delete the tugboat.dev CRDs, and with them every Spoke, ReleaseHistory, Pipeline and Promotion")
	return cmd
}

func newUninstallAgentCommand() *cobra.Command {
	var f uninstallFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Uninstall a spoke's agent (the release tugboat-agent); --purge also deletes its key and certificate Secrets",
		Long: `uninstall agent removes the agent from the spoke cluster of --kubeconfig/--context.
The Spoke on the hub stays (Ready turns Unknown once its heartbeats stop); delete
it on the hub when the cluster is gone for good.`,
		Example: `  tugboat uninstall agent --context staging-1`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, "spoke cluster", config.AgentChart, func(ctx context.Context, c *cluster, deleted func(kind, name string)) error {
				for _, name := range []string{agentKeySecret, "tugboat-agent-webhook-tls"} {
					s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: name}}
					switch err := c.client.Delete(ctx, s); {
					case err == nil:
						deleted("Secret", agentNamespace+"/"+name)
					case !apierrors.IsNotFound(err):
						return c.explain("deleting Secret "+agentNamespace+"/"+name+" from", err)
					}
				}
				return nil
			})
		},
	}
	f.bind(cmd, "also delete the agent's hub key and webhook certificate Secrets")
	return cmd
}
