package app

import (
	"flag"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// kubeFlags choose the cluster a command talks to.
type kubeFlags struct {
	kubeconfig string
	context    string
}

func (k *kubeFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&k.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, the in-cluster config, then ~/.kube/config)")
	cmd.Flags().StringVar(&k.context, "context", "", "kubeconfig context to use")
}

// restConfig loads the REST config: an explicit file first, then the usual
// chain ($KUBECONFIG, in-cluster, ~/.kube/config).
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if k.kubeconfig == "" && k.context == "" {
		cfg, err = ctrl.GetConfig()
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if k.kubeconfig != "" {
			rules.ExplicitPath = k.kubeconfig
		}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.context}).ClientConfig()
	}
	if err != nil {
		return nil, err
	}
	// client-go's default (5 requests/s) would cap the hub at a handful of
	// ReleaseHistory writes per second; the API server's own priority and
	// fairness protects it.
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 200, 400
	}
	return cfg, nil
}

// logFlags configure the structured logger (zap, JSON in production mode).
type logFlags struct {
	opts zap.Options
}

func (l *logFlags) bind(cmd *cobra.Command) {
	fs := flag.NewFlagSet("zap", flag.ContinueOnError)
	l.opts.Development = false
	l.opts.BindFlags(fs)
	cmd.Flags().AddGoFlagSet(fs)
}

func (l *logFlags) setup() {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&l.opts)))
}
