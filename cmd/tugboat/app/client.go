//go:build !agentonly

package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/controllers/hub"
)

// hubFlags choose the hub cluster and namespace the user verbs talk to.
type hubFlags struct {
	kube      kubeFlags
	namespace string
}

func (h *hubFlags) bind(cmd *cobra.Command) {
	h.kube.bind(cmd)
	cmd.Flags().StringVarP(&h.namespace, "namespace", "n", "", "namespace on the hub (default: the kubeconfig context's namespace, else default)")
}

// hubSession is a client to the hub and the namespace to act in.
type hubSession struct {
	client    client.Client
	config    *rest.Config
	namespace string
}

// connect opens a session with the hub.
func (h *hubFlags) connect() (*hubSession, error) {
	cfg, err := h.kube.restConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the hub's kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: hub.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("connecting to the hub: %w", err)
	}
	ns := h.fromKubeconfig()
	if h.namespace != "" {
		ns = h.namespace
	}
	return &hubSession{client: c, config: cfg, namespace: ns}, nil
}

// whoAmI asks the hub's API server who the user is (an
// authentication.k8s.io/v1 SelfSubjectReview): the name it authenticated,
// which the policy tugboat-approvals holds votes and manual promotions to.
// Never the kubeconfig's user name or $USER, which anyone can set.
func (s *hubSession) whoAmI(ctx context.Context) (string, error) {
	r := &authenticationv1.SelfSubjectReview{}
	if err := s.client.Create(ctx, r); err != nil {
		return "", fmt.Errorf("cannot tell who you are: the hub's API server did not answer a SelfSubjectReview (authentication.k8s.io/v1, Kubernetes 1.28 or later): %w", err)
	}
	if r.Status.UserInfo.Username == "" {
		return "", errors.New("cannot tell who you are: the hub's API server authenticated no user name")
	}
	return r.Status.UserInfo.Username, nil
}

// fromKubeconfig reads the context's namespace (default "default").
func (h *hubFlags) fromKubeconfig() string {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if h.kube.kubeconfig != "" {
		rules.ExplicitPath = h.kube.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: h.kube.context})
	if ns, _, err := cc.Namespace(); err == nil && ns != "" {
		return ns
	}
	return "default"
}

// outputFlag is -o: table (default), wide (a table with more columns),
// json or yaml.
type outputFlag string

func (o *outputFlag) bind(cmd *cobra.Command) {
	cmd.Flags().StringVarP((*string)(o), "output", "o", "table", "output format: table, wide, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "wide", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
}

// validate refuses an unknown format with a usage error.
func (o outputFlag) validate() error {
	switch o {
	case "", "table", "wide", "json", "yaml":
		return nil
	}
	return usageErrorf("unknown output format %q: use table, wide, json or yaml", string(o))
}

// wide reports whether o asks for the wide table.
func (o outputFlag) wide() bool { return o == "wide" }

// structured reports whether o asks for JSON or YAML, and writes v so.
func (o outputFlag) structured(w io.Writer, v any) (bool, error) {
	switch o {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return true, err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return true, err
	case "yaml":
		b, err := toYAML(v)
		if err != nil {
			return true, err
		}
		_, err = w.Write(b)
		return true, err
	}
	return false, nil
}

// toYAML renders v as YAML with its JSON field names and order.
func toYAML(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	var plain func(*yaml.Node)
	plain = func(n *yaml.Node) {
		n.Style = 0
		for _, c := range n.Content {
			plain(c)
		}
	}
	plain(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newTable returns a tabwriter for aligned columns.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// row writes cells separated by tabs; empty cells print as "-".
func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// timestamp renders a time in UTC, RFC 3339; "" when unset.
func timestamp(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
