//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// targetView is what `tugboat target` shows.
type targetView struct {
	// Kubeconfig is the file the CLI read ("" : the default chain).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
	Server     string `json:"server"`
	Namespace  string `json:"namespace"`
	// NamespaceFrom says where the namespace came from: flag, context or default.
	NamespaceFrom string `json:"namespaceFrom"`
	// User is the user the hub's API server authenticated (when it answered).
	User string `json:"user,omitempty"`
	// Reachable reports whether the API server answered, and Version its version.
	Reachable bool   `json:"reachable"`
	Version   string `json:"version,omitempty"`
	// TugboatCRDs reports whether the hub serves tugboat.dev/v1alpha1.
	TugboatCRDs bool `json:"tugboatCRDs"`
	// Error is why the hub could not be asked, if it could not.
	Error string `json:"error,omitempty"`
}

func newTargetCommand() *cobra.Command {
	var (
		hf  hubFlags
		out outputFlag
	)
	cmd := &cobra.Command{
		Use:   "target",
		Short: "Show which hub, kubeconfig context and namespace the CLI talks to, and as whom",
		Long: `target shows where the other verbs go: the kubeconfig and context, the hub's API
server, the namespace (from -n, else the context's, else default), the user the
API server authenticates, and whether the hub serves tugboat's API. It exits
non-zero when the hub cannot be reached.`,
		Example: `  tugboat target
  tugboat target --context hub -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			v, err := describeTarget(cmd.Context(), hf)
			w := cmd.OutOrStdout()
			if done, oerr := out.structured(w, v); done {
				if oerr != nil {
					return oerr
				}
				return err
			}
			tw := newTable(w)
			fmt.Fprintf(tw, "Kubeconfig:\t%s\n", orDash(v.Kubeconfig))
			fmt.Fprintf(tw, "Context:\t%s\n", orDash(v.Context))
			fmt.Fprintf(tw, "Hub:\t%s\n", orDash(v.Server))
			fmt.Fprintf(tw, "Namespace:\t%s (from %s)\n", v.Namespace, v.NamespaceFrom)
			if v.Reachable {
				fmt.Fprintf(tw, "User:\t%s\n", orDash(v.User))
				fmt.Fprintf(tw, "Kubernetes:\t%s\n", v.Version)
				api := "served"
				if !v.TugboatCRDs {
					api = "not served: install the hub (tugboat install hub)"
				}
				fmt.Fprintf(tw, "tugboat.dev/v1alpha1:\t%s\n", api)
			}
			_ = tw.Flush()
			return err
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	return cmd
}

// describeTarget resolves the flags as every verb does, then asks the API
// server; the error says why the hub cannot be reached, with v filled as
// far as it goes.
func describeTarget(ctx context.Context, hf hubFlags) (targetView, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if hf.kube.kubeconfig != "" {
		rules.ExplicitPath = hf.kube.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: hf.kube.context})
	v := targetView{Kubeconfig: hf.kube.kubeconfig, Context: hf.kube.context, Namespace: hf.fromKubeconfig(), NamespaceFrom: "default"}
	if raw, err := cc.RawConfig(); err == nil && v.Context == "" {
		v.Context = raw.CurrentContext
	}
	if contextSetsNamespace(cc, v.Context) {
		v.NamespaceFrom = "context"
	}
	if hf.namespace != "" {
		v.Namespace, v.NamespaceFrom = hf.namespace, "flag"
	}
	cfg, err := hf.kube.restConfig()
	if err != nil {
		v.Error = err.Error()
		return v, fmt.Errorf("loading the hub's kubeconfig: %w", err)
	}
	v.Server = cfg.Host
	check := rest.CopyConfig(cfg)
	check.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(check)
	if err == nil {
		var info fmt.Stringer
		if info, err = dc.ServerVersion(); err == nil {
			v.Reachable, v.Version = true, info.String()
		}
	}
	if err != nil {
		v.Error = err.Error()
		return v, fmt.Errorf("cannot reach the hub at %s: %w", cfg.Host, err)
	}
	if res, err := dc.ServerResourcesForGroupVersion(tugboatv1alpha1.GroupVersion.String()); err == nil && len(res.APIResources) > 0 {
		v.TugboatCRDs = true
	}
	s, err := hf.connect()
	if err == nil {
		v.User, _ = s.whoAmI(ctx)
	}
	return v, nil
}

// contextSetsNamespace reports whether the kubeconfig context names a
// namespace itself.
func contextSetsNamespace(cc clientcmd.ClientConfig, name string) bool {
	raw, err := cc.RawConfig()
	if err != nil {
		return false
	}
	c, ok := raw.Contexts[name]
	return ok && c.Namespace != ""
}
