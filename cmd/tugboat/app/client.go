//go:build !agentonly

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
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
