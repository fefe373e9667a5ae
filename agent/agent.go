package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"tugboat.dev/tugboat/agent/actions"
	"tugboat.dev/tugboat/agent/admission"
	"tugboat.dev/tugboat/agent/ownership"
	"tugboat.dev/tugboat/agent/release"
	"tugboat.dev/tugboat/agent/reporter"
	"tugboat.dev/tugboat/agent/tracker"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// RBAC of the agent's default ClusterRole: read-only, plus updating its own
// webhook configurations (docs/security.md, "Agent", gives the reason of
// every rule). Helm stores releases in Secrets (and ConfigMaps) labeled
// owner=helm; the informers select that label, but RBAC cannot restrict a
// list or watch by label, so list and watch on Secrets are cluster-wide (no
// get: the agent reads them only through its label-selected cache). Writes
// live in separate roles of the agent's chart (config/charts/tugboat-agent):
// tugboat-agent-backfill (patch of the labels on pre-existing objects, bound
// cluster-wide or per namespace of backfill.namespaces) and
// tugboat-agent-helm-strategy (the helm strategy's upgrades, opt-in, per
// allowed namespace).
// +kubebuilder:rbac:groups="",resources=secrets;configmaps;pods,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=list
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets;replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list
// Flux HelmReleases, read to match each to its Helm release and fold its conditions into the release's health (helmreleases.go); the helm strategy's patch of their version is in the chart's opt-in helm strategy role.
// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases,verbs=get;list;watch
// The webhook configurations are deployed as manifests (the agent chart's files/webhook); the certificate rotator watches them and injects its CA into the agent's own (named tugboat-agent, --webhook-configuration-name) only.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,resourceNames=tugboat-agent,verbs=update

// workloads are the kinds the agent follows for health, with the label
// selector that limits the informers to tracked objects.
var workloads = []struct {
	kind string
	obj  client.Object
	list client.ObjectList
	gvk  schema.GroupVersionKind
}{
	{"Deployment", &appsv1.Deployment{}, &appsv1.DeploymentList{}, appsv1.SchemeGroupVersion.WithKind("Deployment")},
	{"StatefulSet", &appsv1.StatefulSet{}, &appsv1.StatefulSetList{}, appsv1.SchemeGroupVersion.WithKind("StatefulSet")},
	{"DaemonSet", &appsv1.DaemonSet{}, &appsv1.DaemonSetList{}, appsv1.SchemeGroupVersion.WithKind("DaemonSet")},
	{"ReplicaSet", &appsv1.ReplicaSet{}, &appsv1.ReplicaSetList{}, appsv1.SchemeGroupVersion.WithKind("ReplicaSet")},
	{"Job", &batchv1.Job{}, &batchv1.JobList{}, batchv1.SchemeGroupVersion.WithKind("Job")},
	{"Pod", &corev1.Pod{}, &corev1.PodList{}, corev1.SchemeGroupVersion.WithKind("Pod")},
}

// Agent is an assembled spoke agent.
type Agent struct {
	Manager  ctrl.Manager
	Tracker  *tracker.Tracker
	Reporter *reporter.Reporter
	Index    *ownership.Index
	Webhooks *admission.Server
	// Actions polls the hub for promotion actions; nil when disabled.
	Actions *actions.Poller

	opts    Options
	log     logr.Logger
	cfg     *rest.Config
	regs    []toolscache.ResourceEventHandlerRegistration
	version string
	// discovery finds whether the cluster serves Flux HelmReleases.
	discovery discovery.DiscoveryInterface
}

// New assembles the agent for the cluster cfg points at.
func New(cfg *rest.Config, opts Options, log logr.Logger) (*Agent, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = helmv2.AddToScheme(scheme)

	tracked, err := labels.NewRequirement(tugboatv1alpha1.LabelRelease, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	trackedSel := labels.NewSelector().Add(*tracked)
	helmSel := labels.SelectorFromSet(labels.Set{"owner": "helm"})
	byObject := map[client.Object]cache.ByObject{
		&corev1.Secret{}:    {Label: helmSel},
		&corev1.ConfigMap{}: {Label: helmSel},
	}
	for _, w := range workloads {
		// Trimmed to what the agent reads (transform.go).
		byObject[w.obj] = cache.ByObject{Label: trackedSel, Transform: cacheTransform(w.obj)}
	}
	// HelmReleases are not in byObject: their type may not be served (yet),
	// and byObject's types must be. The default transform trims them.
	stripManagedFields := cache.TransformStripManagedFields()
	cacheOpts := cache.Options{ByObject: byObject, DefaultTransform: func(o any) (any, error) {
		if _, ok := o.(*helmv2.HelmRelease); ok {
			return transformHelmRelease(o)
		}
		return stripManagedFields(o)
	}}
	if len(opts.WatchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range opts.WatchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		Logger:                 log,
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	a := &Agent{Manager: mgr, opts: opts, log: log, cfg: cfg, Index: ownership.NewIndex(200_000)}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a discovery client: %w", err)
	}
	a.discovery = dc
	if v, err := dc.ServerVersion(); err == nil {
		a.version = v.GitVersion
	}
	rep, err := reporter.New(opts.Reporter, a.snapshot, log.WithName("reporter"))
	if err != nil {
		return nil, err
	}
	a.Reporter = rep
	if opts.Actions.Enabled {
		a.Actions, err = actions.New(cfg, opts.Actions, actions.Hub{
			URL: opts.Reporter.HubURL, Spoke: opts.Reporter.Spoke, KeyFile: opts.Reporter.KeyFile,
			CAFile: opts.Reporter.CAFile, AgentVersion: opts.Reporter.AgentVersion,
		}, log.WithName("actions"))
		if err != nil {
			return nil, err
		}
	}
	a.Tracker = tracker.New(tracker.Options{Spoke: opts.Reporter.Spoke, Settle: opts.Settle, Logger: log.WithName("tracker"),
		// A release appeared or went: post the state, so the Spoke's
		// release count on the hub follows now, not at the next interval.
		ReleasesChanged: rep.RequestState,
		Fresh: func(ctx context.Context, rel release.Key) ([]*unstructured.Unstructured, error) {
			return a.listWorkloadsFrom(ctx, a.Manager.GetAPIReader(), rel, client.InNamespace(rel.Namespace))
		}},
		rep, a.listWorkloads)

	if !opts.Webhook.Disabled {
		meta, err := metadata.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		var certsReady <-chan struct{}
		if opts.Webhook.CertRotation {
			if certsReady, err = addCertRotator(mgr, opts); err != nil {
				return nil, err
			}
		}
		sopts := admission.ServerOptions{
			BindAddress: opts.Webhook.BindAddress,
			CertDir:     opts.Webhook.CertDir,
			CertsReady:  certsReady,
			// The API server's client certificate, where configured.
			ClientCAFile: opts.Webhook.ClientCAFile,
			ClientNames:  opts.Webhook.ClientNames,
			Webhooks: &admission.Webhooks{
				Index:    a.Index,
				Fallback: ownership.NewFallback(meta, a.Index, ownership.FallbackOptions{Mapper: mgr.GetRESTMapper()}),
				OnReleaseSecret: func(namespace, name string, op admissionv1.Operation) {
					log.V(1).Info("release record written", "namespace", namespace, "name", name, "operation", op)
				},
				Log: log.WithName("admission"),
			},
		}
		if opts.Webhook.URLHost != "" {
			if ip := net.ParseIP(opts.Webhook.URLHost); ip != nil {
				sopts.IPAddresses = []net.IP{ip}
			} else {
				sopts.DNSNames = []string{opts.Webhook.URLHost}
			}
		} else {
			svc := opts.Webhook.ServiceName + "." + opts.Webhook.ServiceNamespace
			sopts.DNSNames = []string{svc + ".svc", svc + ".svc.cluster.local"}
		}
		srv, err := admission.NewServer(sopts)
		if err != nil {
			return nil, err
		}
		a.Webhooks = srv
		if err := mgr.Add(mustRun{name: "webhook server", runnable: srv}); err != nil {
			return nil, err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("informers", func(*http.Request) error {
		for _, r := range a.regs {
			if !r.HasSynced() {
				return fmt.Errorf("informers not synced")
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if a.Webhooks != nil {
		// Not Ready until the webhook server serves (with rotation, once its
		// certificates are mounted): until then the Service has no endpoint
		// and admission calls fail open at once, instead of waiting for
		// their timeout on a socket that does not answer yet.
		if err := mgr.AddReadyzCheck("webhook", func(*http.Request) error {
			select {
			case <-a.Webhooks.Serving():
				return nil
			default:
				return fmt.Errorf("webhook server not serving yet (waiting for its certificates in %s)", opts.Webhook.CertDir)
			}
		}); err != nil {
			return nil, err
		}
	}
	return a, mgr.Add(&runner{a: a})
}

// Start runs the agent until ctx ends.
func (a *Agent) Start(ctx context.Context) error { return a.Manager.Start(ctx) }

// snapshot is the reporter's level-based truth.
func (a *Agent) snapshot(ctx context.Context) (*wire.StateSnapshot, error) {
	snap, err := a.Tracker.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	snap.KubernetesVersion = a.version
	return snap, nil
}

// listWorkloads lists a release's tracked workloads from the cache.
func (a *Agent) listWorkloads(ctx context.Context, rel release.Key) ([]*unstructured.Unstructured, error) {
	return a.listWorkloadsFrom(ctx, a.Manager.GetCache(), rel)
}

// listWorkloadsFrom lists the release's workloads through r: the cache, or
// the API server itself (the tracker's fresh reads of a newly deployed
// revision, in the release's namespace, which the agent may read even when
// it watches only some namespaces).
func (a *Agent) listWorkloadsFrom(ctx context.Context, r client.Reader, rel release.Key, opts ...client.ListOption) ([]*unstructured.Unstructured, error) {
	sel := client.MatchingLabels{tugboatv1alpha1.LabelRelease: rel.Name, tugboatv1alpha1.LabelReleaseNamespace: rel.Namespace}
	var out []*unstructured.Unstructured
	for _, w := range workloads {
		if w.kind == "ReplicaSet" {
			continue // their Deployment speaks for them
		}
		list := w.list.DeepCopyObject().(client.ObjectList)
		if err := r.List(ctx, list, append([]client.ListOption{sel}, opts...)...); err != nil {
			return nil, err
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(item)
			if err != nil {
				return nil, err
			}
			u := &unstructured.Unstructured{Object: m}
			u.SetGroupVersionKind(w.gvk)
			out = append(out, u)
		}
	}
	return out, nil
}

// runner wires the informers, waits until every handler has seen the
// initial lists, then registers the webhooks, starts the tracker and the
// reporter (whose first state post therefore holds every release), and runs
// the backfill.
type runner struct{ a *Agent }

func (r *runner) NeedLeaderElection() bool { return false }

func (r *runner) Start(ctx context.Context) error {
	a := r.a
	c := a.Manager.GetCache()
	for _, obj := range []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    func(o any, initial bool) { a.Tracker.ObserveStorage(o, initial) },
			UpdateFunc: func(_, o any) { a.Tracker.ObserveStorage(o, false) },
			DeleteFunc: func(o any) { a.Tracker.ForgetStorage(unwrapTombstone(o)) },
		})
		if err != nil {
			return err
		}
		a.regs = append(a.regs, reg)
	}
	for _, w := range workloads {
		inf, err := c.GetInformer(ctx, w.obj)
		if err != nil {
			return err
		}
		if reg, err := inf.AddEventHandler(a.Index.EventHandler(w.gvk.GroupKind())); err == nil {
			a.regs = append(a.regs, reg)
		}
		kind := w.kind
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(o any, initial bool) {
				if m, ok := o.(client.Object); ok {
					a.Tracker.ObserveObject(kind, nil, m, false, initial)
				}
			},
			UpdateFunc: func(old, o any) {
				om, ok1 := old.(client.Object)
				m, ok2 := o.(client.Object)
				if ok1 && ok2 {
					a.Tracker.ObserveObject(kind, om, m, false, false)
				}
			},
			DeleteFunc: func(o any) {
				if m, ok := unwrapTombstone(o).(client.Object); ok {
					a.Tracker.ObserveObject(kind, m, m, true, false)
				}
			},
		})
		if err != nil {
			return err
		}
		a.regs = append(a.regs, reg)
	}
	if reg := r.startHelmReleases(ctx); reg != nil {
		a.regs = append(a.regs, reg)
	}
	// Wait for every handler to have processed its initial list.
	if !toolscache.WaitForCacheSync(ctx.Done(), syncedFuncs(a.regs)...) {
		return ctx.Err()
	}
	a.log.Info("informers synced", "releases", a.Tracker.Releases())

	components := []component{{"tracker", a.Tracker.Start}, {"reporter", a.Reporter.Start}}
	if a.Actions != nil {
		// After the sync, like the reporter: the hub hears the spoke's
		// releases before the agent acts on them.
		components = append(components, component{"action poller", a.Actions.Start})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- runComponents(ctx, a.log, components...) }()
	// The webhooks are registered once their server serves (with
	// certificate rotation, when the rotator's certificates are mounted,
	// which can take a minute): the tracker and reporter do not wait for
	// that. The backfill starts after the registration, so that an object
	// written in between is labeled by one or the other.
	regErr := make(chan error, 1)
	go func() {
		if a.Webhooks != nil && a.opts.Webhook.Register {
			if err := r.register(ctx); err != nil {
				regErr <- err
				return
			}
		}
		if a.opts.Backfill {
			r.backfillLoop(ctx)
		}
	}()
	select {
	case <-ctx.Done():
	case err := <-regErr:
		return err // the manager stops the rest
	case err := <-stopped:
		// A component ended early: the error stops the manager, and the
		// process ends non-zero.
		return err
	}
	if a.Webhooks != nil && a.opts.Webhook.Register && a.opts.Webhook.URLHost != "" {
		// An agent outside the cluster (dev) takes its registration with it,
		// so the API server does not keep calling a dead URL.
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.registration().Delete(dctx, a.Manager.GetClient())
	}
	return <-stopped
}

func (r *runner) registration() admission.Registration {
	a := r.a
	reg := admission.Registration{
		Name:           a.opts.Webhook.Name,
		AgentNamespace: a.opts.Webhook.AgentNamespace,
		Namespaces:     a.opts.WatchNamespaces,
		CABundle:       a.Webhooks.CABundle(),
	}
	if a.opts.Webhook.URLHost != "" {
		port := ""
		if addr := a.Webhooks.Addr(); addr != nil {
			if tcp, ok := addr.(*net.TCPAddr); ok {
				port = strconv.Itoa(tcp.Port)
			}
		}
		reg.URL = "https://" + net.JoinHostPort(a.opts.Webhook.URLHost, port)
	} else {
		reg.Service = &admissionregistrationv1.ServiceReference{
			Namespace: a.opts.Webhook.ServiceNamespace, Name: a.opts.Webhook.ServiceName,
		}
	}
	return reg
}

// register waits for the webhook server to serve (with rotation, once the
// rotator's certificates are mounted), then applies the webhook
// configurations.
func (r *runner) register(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.a.Webhooks.Serving():
	}
	if err := r.registration().Apply(ctx, r.a.Manager.GetClient()); err != nil {
		return fmt.Errorf("registering admission webhooks: %w", err)
	}
	r.a.log.Info("admission webhooks registered", "name", r.a.opts.Webhook.Name)
	return nil
}

// backfillLoop runs a backfill pass now, then every BackfillInterval
// (none when it is zero) until ctx ends.
func (r *runner) backfillLoop(ctx context.Context) {
	a := r.a
	meta, err := metadata.NewForConfig(a.cfg)
	if err != nil {
		a.log.Error(err, "backfill")
		return
	}
	for {
		r.backfill(ctx, meta)
		if a.opts.BackfillInterval <= 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.opts.BackfillInterval):
		}
	}
}

// backfill runs one pass and records it in the log and the metrics.
func (r *runner) backfill(ctx context.Context, meta metadata.Interface) {
	a := r.a
	start := time.Now()
	res, err := ownership.Backfill(ctx, meta, a.Index, ownership.BackfillOptions{
		Namespaces:       a.opts.WatchNamespaces,
		PatchesPerSecond: a.opts.BackfillRate,
	})
	if ctx.Err() != nil {
		return
	}
	backfillMetrics.observe(res, err, time.Since(start))
	if err != nil {
		a.log.Error(err, "backfill pass failed", "listed", res.Listed, "labeled", res.Labeled, "failed", res.Failed)
		return
	}
	a.log.Info("backfill pass done", "listed", res.Listed, "labeled", res.Labeled, "alreadyLabeled", res.AlreadyLabeled,
		"duration", time.Since(start).Round(time.Millisecond))
}

func syncedFuncs(regs []toolscache.ResourceEventHandlerRegistration) []toolscache.InformerSynced {
	fns := make([]toolscache.InformerSynced, 0, len(regs))
	for _, r := range regs {
		fns = append(fns, r.HasSynced)
	}
	return fns
}

func unwrapTombstone(o any) any {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return o
}
