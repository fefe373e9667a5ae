package config

import (
	"context"
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Target is the cluster and namespace a chart is installed into.
type Target struct {
	// RESTConfig, when set, reaches the cluster (the hub installing an agent
	// through a Cluster API kubeconfig); Kubeconfig and Context are then
	// unused.
	RESTConfig *rest.Config
	// Kubeconfig is the kubeconfig file (empty: $KUBECONFIG, in-cluster,
	// ~/.kube/config, as kubectl loads it).
	Kubeconfig string
	// Context is the kubeconfig context (empty: the current one).
	Context string
	// Namespace is the release's namespace; it is created when missing.
	Namespace string
	// Log receives Helm's progress lines (nil: dropped).
	Log func(format string, v ...any)
	// Discovery, when set with RESTConfig, is the cached discovery client
	// Helm uses (and its REST mapper reads): a caller that runs many Helm
	// actions against one cluster shares one, instead of discovering the
	// cluster's APIs and downloading its OpenAPI document for each. The
	// caller invalidates it.
	Discovery discovery.CachedDiscoveryInterface
}

// Getter is the Helm REST client getter of the target.
func (t Target) Getter() genericclioptions.RESTClientGetter {
	if t.RESTConfig != nil {
		return &restGetter{cfg: t.RESTConfig, namespace: t.Namespace, discovery: t.Discovery}
	}
	f := genericclioptions.NewConfigFlags(true)
	kubeconfig, kubecontext, namespace := t.Kubeconfig, t.Context, t.Namespace
	if kubeconfig != "" {
		f.KubeConfig = &kubeconfig
	}
	if kubecontext != "" {
		f.Context = &kubecontext
	}
	f.Namespace = &namespace
	return f
}

func (t Target) configuration() (*action.Configuration, error) {
	log := t.Log
	if log == nil {
		log = func(string, ...any) {}
	}
	cfg := new(action.Configuration)
	if err := cfg.Init(t.Getter(), t.Namespace, "secret", log); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	return cfg, nil
}

// Apply installs the chart (HubChart or AgentChart) into the target as the
// release of the chart's name, or upgrades that release in place when it
// exists (`helm upgrade --install`), with values over the chart's defaults.
// It waits for nothing but the API server's answers (timeout bounds those):
// the caller decides what "ready" means.
func Apply(ctx context.Context, t Target, chartName string, values map[string]any, timeout time.Duration) (*release.Release, error) {
	c, err := Chart(chartName)
	if err != nil {
		return nil, err
	}
	cfg, err := t.configuration()
	if err != nil {
		return nil, err
	}
	if _, err := cfg.Releases.Last(chartName); errors.Is(err, driver.ErrReleaseNotFound) {
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace = chartName, t.Namespace
		install.CreateNamespace = true
		install.Timeout = timeout
		rel, err := install.RunWithContext(ctx, c, values)
		if err != nil {
			return nil, fmt.Errorf("installing the chart %s into namespace %s: %w", chartName, t.Namespace, err)
		}
		return rel, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading the release %s in namespace %s: %w", chartName, t.Namespace, err)
	}
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = t.Namespace
	upgrade.Timeout = timeout
	// A release whose last upgrade was interrupted is upgraded again.
	upgrade.CleanupOnFail = true
	rel, err := upgrade.RunWithContext(ctx, chartName, c, values)
	if err != nil {
		return nil, fmt.Errorf("upgrading the release %s in namespace %s: %w", chartName, t.Namespace, err)
	}
	return rel, nil
}

// Uninstall removes the release of the chart from the target. What the
// chart marks helm.sh/resource-policy: keep (the hub's CRDs, and with them
// every Spoke, ReleaseHistory, Pipeline and Promotion) stays. It reports
// whether there was a release to remove.
func Uninstall(t Target, chartName string, timeout time.Duration) (bool, error) {
	cfg, err := t.configuration()
	if err != nil {
		return false, err
	}
	u := action.NewUninstall(cfg)
	u.Timeout = timeout
	if _, err := u.Run(chartName); err != nil {
		if errors.Is(err, driver.ErrReleaseNotFound) {
			return false, nil
		}
		return false, fmt.Errorf("uninstalling the release %s from namespace %s: %w", chartName, t.Namespace, err)
	}
	return true, nil
}

// restGetter gives Helm a REST config instead of a kubeconfig file.
type restGetter struct {
	cfg       *rest.Config
	namespace string
	discovery discovery.CachedDiscoveryInterface // nil: a new one per call
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	if g.discovery != nil {
		return g.discovery, nil
	}
	dc, err := discovery.NewDiscoveryClientForConfig(g.cfg)
	if err != nil {
		return nil, err
	}
	return memory.NewMemCacheClient(dc), nil
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	dc, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	return restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(dc), dc, nil), nil
}

// ToRawKubeConfigLoader only supplies the namespace; everything else comes
// from ToRESTConfig.
func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), &clientcmd.ConfigOverrides{
		Context: clientcmdapi.Context{Namespace: g.namespace},
	})
}
