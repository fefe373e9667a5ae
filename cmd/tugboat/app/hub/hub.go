// Package hub assembles the hub process (`tugboat hub`): one
// controller-runtime manager on the management cluster running the webhook
// receiver (on every replica), the ReleaseHistory recorder (every replica)
// and the reconcilers (leader only).
//
// It sits where the binary is put together, above webhook and controllers:
// it is the one place that wires the HTTP adapters (webhook/...) to the
// domain (controllers/...), which never import it or webhook (see
// docs/architecture.md). It is a library, so tests run a hub in process
// (package hubtest).
package hub

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/dora/gauges"
	"tugboat.dev/tugboat/controllers/egress"
	"tugboat.dev/tugboat/controllers/heartbeat"
	"tugboat.dev/tugboat/controllers/lifecycle"
	"tugboat.dev/tugboat/controllers/notify/deliver"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion"
	"tugboat.dev/tugboat/controllers/promotion/actions"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/controllers/releasehistory"
	"tugboat.dev/tugboat/controllers/spoke"
	"tugboat.dev/tugboat/controllers/spokeclass"
	"tugboat.dev/tugboat/webhook/dashboard"
	"tugboat.dev/tugboat/webhook/interactions"
	"tugboat.dev/tugboat/webhook/pipelineapi"
	"tugboat.dev/tugboat/webhook/receiver"
	"tugboat.dev/tugboat/webhook/receiver/spokedir"
)

// Options configure the hub process.
type Options struct {
	// MetricsBindAddress serves /metrics ("0" disables).
	MetricsBindAddress string
	// MetricsSecure serves /metrics over HTTPS to authenticated and
	// authorized clients only (a bearer token the API server reviews, and
	// RBAC get on the non-resource URL /metrics): the DORA gauges name
	// every tenant's Pipelines. The chart turns it on.
	MetricsSecure bool
	// HealthProbeBindAddress serves /healthz and /readyz for the kubelet.
	HealthProbeBindAddress string
	// LeaderElection elects one replica to run the reconcilers.
	LeaderElection bool
	// LeaderElectionNamespace holds the Lease (defaults to the pod's
	// namespace in a cluster).
	LeaderElectionNamespace string
	// LeaseDuration is how long a follower waits after the leader's last
	// renewal before it takes the Lease: the longest pause of the
	// controllers when a leader dies without handing over.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying a renewal before
	// it gives up leadership (and exits).
	RenewDeadline time.Duration
	// RetryPeriod is the interval of the candidates' attempts on the Lease.
	RetryPeriod time.Duration

	Receiver receiver.Options
	History  releasehistory.Options
	Spoke    spoke.Options
	// Heartbeats configures the heartbeat digests (one per replica, in the
	// hub's namespace, read by the Spoke controller for readiness).
	Heartbeats heartbeat.Options
	// SpokeKeys configures how the receiver's spoke directory re-reads
	// keys (its TTL is History.KeyCacheTTL).
	SpokeKeys spokedir.Options

	// Promotion configures the Promotion reconciler.
	Promotion promotion.Options
	// NotificationControllerAddress is Flux notification-controller's event
	// address for the notification strategy (empty: the in-cluster default).
	NotificationControllerAddress string
	// Strategies overrides the promotion strategies (tests). Not a flag;
	// nil uses DefaultStrategies.
	Strategies strategy.Registry

	// Notify configures the delivery of notices.
	Notify deliver.Options
	// DORA configures the DORA gauges (tugboat_dora_*).
	DORA gauges.Options
	// SlackAPIURL is the base URL of Slack's Web API (tests and the dev
	// environment point it at a stand-in).
	SlackAPIURL string
	// Egress is the destination policy of every request the hub makes to
	// an address a user wrote: notifiers, the webhook, notification and
	// pullRequest strategies (git and the providers' APIs), the email
	// server, and spokes' kubeconfigs (kubernetes strategy, agent bootstrap).
	Egress egress.Policy
	// PipelineAPI configures the CI pipeline API's per-client rate limit:
	// RateLimit, RateBurst and TrustedProxies (the ingress in front of the
	// hub, whose X-Forwarded-For names the client). The rest is set by the
	// hub.
	PipelineAPI pipelineapi.Options
	// PullRequestAllowHTTP lets the pullRequest strategy use plain http://
	// repositories, which send the git credentials in clear (local
	// development). Off by default.
	PullRequestAllowHTTP bool
	// ResponseURLAllowed overrides which Slack response_url the hub posts
	// decisions to (tests). Not a flag; nil allows https on slack.com.
	ResponseURLAllowed func(*url.URL) bool
	// NotifyBuilder overrides how notifiers are built (tests). Not a flag;
	// nil uses the notifiers of controllers/notify with Egress.
	NotifyBuilder deliver.Builder

	// DashboardNamespace, when set, serves the dashboard of that namespace
	// read-only under /ui/ on the receiver's listener, with the hub's
	// identity (a team screen; see docs/dashboard.md).
	DashboardNamespace string

	// Version is the hub's version (not a flag: main sets it): the agent
	// version it installs into spokes with spec.agentBootstrap.
	Version string
	// BootstrapTimeout bounds each agent install into a spoke.
	BootstrapTimeout time.Duration
	// BootstrapAllowedValues are the agent chart values (dotted paths) a
	// Spoke's spec.agentBootstrap.values, or a SpokeClass's
	// spec.agent.values, may set (spoke.DefaultAllowedValues by default).
	BootstrapAllowedValues []string

	// SkipControllerNameValidation allows more than one hub in one process
	// (tests restart the hub in-process). Not a flag.
	SkipControllerNameValidation bool
}

// NewOptions returns the defaults.
func NewOptions() Options {
	return Options{
		MetricsBindAddress:     ":8080",
		HealthProbeBindAddress: ":8081",
		LeaderElection:         true,
		LeaseDuration:          15 * time.Second,
		RenewDeadline:          10 * time.Second,
		RetryPeriod:            2 * time.Second,
		Receiver:               receiver.NewOptions(),
		History:                releasehistory.NewOptions(),
		Spoke:                  spoke.NewOptions(),
		Heartbeats:             heartbeat.NewOptions(),
		SpokeKeys:              spokedir.NewOptions(),
		Promotion:              promotion.NewOptions(),
		PipelineAPI:            pipelineapi.Options{RateLimit: pipelineapi.DefaultRateLimit, RateBurst: pipelineapi.DefaultRateBurst},
		Notify:                 deliver.NewOptions(),
		DORA:                   gauges.NewOptions(),
		SlackAPIURL:            "https://slack.com/api/",
		Version:                "dev",
		BootstrapTimeout:       2 * time.Minute,
		BootstrapAllowedValues: spoke.DefaultAllowedValues(),
	}
}

// BindFlags binds every option of the hub to fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, `address of the Prometheus /metrics endpoint ("0" disables it)`)
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "serve /metrics over HTTPS to clients whose bearer token the API server authenticates and whose RBAC allows get on /metrics (the chart's default; off: plain HTTP to anyone who reaches it)")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "address of the /healthz and /readyz probes")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "elect one replica to run the reconcilers (the receiver serves on every replica)")
	fs.DurationVar(&o.Promotion.DefaultTimeout, "promotion-timeout", o.Promotion.DefaultTimeout, "timeout of a Promotion whose Pipeline sets none")
	fs.DurationVar(&o.Promotion.PreviewTTL, "promotion-preview-ttl", o.Promotion.PreviewTTL, "how long an on-demand preview (tugboat diff PIPELINE --from --to) is kept after it was asked; then the hub deletes it")
	fs.DurationVar(&o.Promotion.PreviewTimeout, "promotion-preview-timeout", o.Promotion.PreviewTimeout, "how long a helm Promotion into an environment that requires approval waits for its preview (what the agents say it would change) before asking for approval; a later answer still shows. It bounds too the preview computed again after the approval when it went stale, and an on-demand preview's wait")
	fs.StringVar(&o.NotificationControllerAddress, "notification-controller-address", o.NotificationControllerAddress, "Flux notification-controller's event address for the notification strategy (default: the in-cluster service)")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "namespace of the leader election Lease")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration, "how long followers wait after the leader's last renewal before taking the Lease (the controllers' pause when a leader dies)")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline, "how long the leader retries renewing the Lease before giving up leadership")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod, "interval between the candidates' attempts on the Lease")
	fs.StringVar(&o.SlackAPIURL, "slack-api-url", o.SlackAPIURL, "base URL of Slack's Web API, for Slack notifiers with a bot token")
	fs.BoolVar(&o.Egress.AllowLoopback, "egress-allow-loopback", o.Egress.AllowLoopback, "let notifiers and the webhook and notification strategies reach loopback addresses (refused by default; for local development)")
	fs.Float64Var(&o.PipelineAPI.RateLimit, "pipeline-api-rate-limit", o.PipelineAPI.RateLimit, "requests per second each client of the CI pipeline API may send, sustained")
	fs.IntVar(&o.PipelineAPI.RateBurst, "pipeline-api-rate-burst", o.PipelineAPI.RateBurst, "requests each client of the CI pipeline API may send at once")
	fs.Var(&cidrs{&o.PipelineAPI.TrustedProxies}, "pipeline-api-trusted-proxies", "addresses of the proxies (ingress) in front of the hub, whose X-Forwarded-For names the client of the CI pipeline API for its rate limit (repeatable, comma-separated; empty: the connection's peer is the client)")
	fs.BoolVar(&o.PullRequestAllowHTTP, "pull-request-allow-http", o.PullRequestAllowHTTP, "let the pullRequest strategy reach plain http:// repositories, sending git credentials in clear (refused by default; for local development)")
	fs.Var(&cidrs{&o.Egress.Allow}, "egress-allow-cidr", "address range notifiers and strategies may reach despite the default refusal of loopback, link-local and metadata addresses (repeatable)")
	fs.Int32Var(&o.Notify.MaxAttempts, "notify-max-attempts", o.Notify.MaxAttempts, "attempts before a notice is given up (recorded Failed)")
	fs.DurationVar(&o.Notify.RetryMax, "notify-retry-max", o.Notify.RetryMax, "longest wait between two attempts of a notice")
	fs.StringSliceVar(&o.BootstrapAllowedValues, "bootstrap-allowed-values", o.BootstrapAllowedValues,
		"agent chart values (dotted paths, comma-separated) a Spoke's spec.agentBootstrap.values or a SpokeClass's spec.agent.values may set; "+
			"a Spoke setting another is Stalled and gets no install (empty: none; spoke and hub are the hub's own)")
	fs.StringVar(&o.DashboardNamespace, "dashboard-namespace", o.DashboardNamespace, "serve the dashboard of this namespace read-only under /ui/ on the receiver's address (off when empty)")
	fs.StringVar(&o.Notify.DashboardURL, "dashboard-url", o.Notify.DashboardURL, "public address of the dashboard --dashboard-namespace serves (e.g. https://tugboat.example.com/ui/): notices about its Promotions link to their pages (Slack: a button to the preview)")
	o.Receiver.BindFlags(fs)
	o.History.BindFlags(fs)
	o.Spoke.BindFlags(fs)
	o.Heartbeats.BindFlags(fs)
	o.SpokeKeys.BindFlags(fs)
	o.DORA.BindFlags(fs)
}

// Validate reports every invalid option.
func (o *Options) Validate() error {
	return errors.Join(o.validateLeaderElection(), o.validatePipelineAPI(), o.validateDashboardURL(), spoke.ValidateAllowedValues(o.BootstrapAllowedValues), o.Receiver.Validate(), o.History.Validate(), o.Spoke.Validate(), o.validateHeartbeats(), o.SpokeKeys.Validate(), o.DORA.Validate())
}

// validateDashboardURL checks --dashboard-url: a public address of the
// dashboard the hub serves.
func (o *Options) validateDashboardURL() error {
	if o.Notify.DashboardURL == "" {
		return nil
	}
	if o.DashboardNamespace == "" {
		return errors.New("--dashboard-url: needs --dashboard-namespace (the dashboard whose address it is)")
	}
	if err := deliver.ValidateDashboardURL(o.Notify.DashboardURL); err != nil {
		return fmt.Errorf("--dashboard-url=%s: %w", clip.String(o.Notify.DashboardURL, 100), err)
	}
	return nil
}

// validateHeartbeats checks the digests' options (New caps the interval at
// a third of the heartbeat timeout).
func (o *Options) validateHeartbeats() error { return o.Heartbeats.Validate() }

// validatePipelineAPI checks the CI pipeline API's rate limit.
func (o *Options) validatePipelineAPI() error {
	switch {
	case o.PipelineAPI.RateLimit <= 0 || math.IsInf(o.PipelineAPI.RateLimit, 0) || math.IsNaN(o.PipelineAPI.RateLimit):
		return fmt.Errorf("--pipeline-api-rate-limit=%g: must be a positive number of requests per second", o.PipelineAPI.RateLimit)
	case o.PipelineAPI.RateBurst < 1:
		return fmt.Errorf("--pipeline-api-rate-burst=%d: must be at least 1", o.PipelineAPI.RateBurst)
	}
	return nil
}

// validateLeaderElection checks the Lease timings as client-go's leader
// elector does (it would refuse them only once the manager starts):
// 1.2 × RetryPeriod (its jitter) < RenewDeadline < LeaseDuration.
func (o *Options) validateLeaderElection() error {
	if !o.LeaderElection {
		return nil
	}
	switch {
	case o.RetryPeriod <= 0:
		return fmt.Errorf("--leader-election-retry-period=%s: must be positive", o.RetryPeriod)
	case o.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(o.RetryPeriod)):
		return fmt.Errorf("--leader-election-renew-deadline=%s: must be longer than %g × --leader-election-retry-period (%s)", o.RenewDeadline, leaderelection.JitterFactor, o.RetryPeriod)
	case o.LeaseDuration <= o.RenewDeadline:
		return fmt.Errorf("--leader-election-lease-duration=%s: must be longer than --leader-election-renew-deadline (%s)", o.LeaseDuration, o.RenewDeadline)
	}
	return nil
}

// Scheme returns the hub's scheme: client-go's kinds and tugboat.dev/v1alpha1.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = tugboatv1alpha1.AddToScheme(s)
	_ = clusterv1.AddToScheme(s)
	return s
}

// Hub is an assembled, not yet started, hub process.
type Hub struct {
	Manager  ctrl.Manager
	Receiver *receiver.Server
	Recorder *releasehistory.Recorder
	// Heartbeats writes this replica's heartbeat digest (nil without
	// digests).
	Heartbeats *heartbeat.Writer
}

// New assembles the hub against the cluster cfg points at.
func New(ctx context.Context, cfg *rest.Config, opts Options) (*Hub, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	// The heartbeat digests live in the hub's namespace; a hub that has
	// none (outside a cluster, no --leader-election-namespace) writes no
	// digest and records every Spoke's lastSeen as before them.
	beats := opts.Heartbeats
	beats.Namespace = beats.ResolveNamespace(opts.LeaderElectionNamespace)
	digests := beats.Interval > 0 && beats.Namespace != ""
	var cacheOpts cache.Options
	if digests {
		if beats.Replica == "" {
			beats.Replica = heartbeat.DefaultReplica()
		}
		// A digest keeps (and another replica's sweep spares) a spoke long
		// enough for the Spoke controller to see it lost, and is written
		// at least three times within a heartbeat timeout, so that a live
		// spoke never looks lost.
		beats.Expiry = max(beats.Expiry, 2*opts.Spoke.HeartbeatTimeout)
		beats.Interval = min(beats.Interval, opts.Spoke.HeartbeatTimeout/3)
		cacheOpts.ByObject = heartbeat.CacheByObject(beats.Namespace)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Cache:                   cacheOpts,
		Scheme:                  Scheme(),
		Metrics:                 metricsOptions(opts),
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        "tugboat-hub.tugboat.dev",
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		LeaseDuration:           ptr.To(opts.LeaseDuration),
		RenewDeadline:           ptr.To(opts.RenewDeadline),
		RetryPeriod:             ptr.To(opts.RetryPeriod),
		// A hub that stops (SIGTERM, a rollout) hands the Lease over at
		// once instead of leaving the controllers idle for LeaseDuration:
		// `tugboat hub` exits as soon as the manager returns.
		LeaderElectionReleaseOnCancel: true,
		Controller:                    config.Controller{SkipNameValidation: ptr.To(opts.SkipControllerNameValidation)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	// The receiver hands the recorder and the action store the Spoke it
	// authenticated (namespace, name and key id) explicitly, so a same-named
	// Spoke elsewhere cannot block it. Every call of the recorder is bounded
	// (recorderClients).
	recClient, recAPI, err := recorderClients(cfg, mgr, opts.History.APITimeout)
	if err != nil {
		return nil, err
	}
	// An unchanged snapshot rewrites lastSeen only once it is older than
	// the refresh. With digests, the Spoke controller reads them for
	// readiness; without, the refresh is at most half the heartbeat
	// timeout, so that a live spoke (snapshots more often than that) never
	// looks stale.
	histOpts := opts.History
	var index *heartbeat.Index
	var writer *heartbeat.Writer
	histOpts.HeartbeatRefreshWithoutDigest = min(histOpts.HeartbeatRefresh, opts.Spoke.HeartbeatTimeout/2)
	if !digests {
		histOpts.HeartbeatRefresh = histOpts.HeartbeatRefreshWithoutDigest
	}
	rec := releasehistory.NewRecorder(recClient, recAPI, histOpts)
	rec.Events = mgr.GetEventRecorder("tugboat-hub")
	if digests {
		writer = heartbeat.NewWriter(recClient, beats)
		writer.Log = ctrl.Log.WithName("heartbeats").WithValues("replica", beats.Replica)
		if err := mgr.Add(writer); err != nil {
			return nil, err
		}
		rec.Heartbeats = writer
		index = heartbeat.NewIndex(mgr.GetClient(), beats.Namespace)
		index.Log = ctrl.Log.WithName("heartbeats")
	}
	if err := rec.SetupWithManager(ctx, mgr); err != nil {
		return nil, err
	}
	// The Spoke controller trusts a key Secret it found fine for as long as
	// the receiver trusts the keys it read (--spoke-key-cache-ttl).
	spokeOpts := opts.Spoke
	spokeOpts.KeySecretRecheck = opts.History.KeyCacheTTL
	var spokeBeats spoke.Heartbeats
	if index != nil {
		spokeBeats = index
	}
	if err := (&spoke.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Options: spokeOpts, Recorder: mgr.GetEventRecorder("tugboat-hub"),
		Heartbeats: spokeBeats,
		Bootstrap: spoke.BootstrapOptions{Version: opts.Version, Timeout: opts.BootstrapTimeout, Egress: opts.Egress,
			AllowedValues: opts.BootstrapAllowedValues}}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	// SpokeClasses need Cluster API's Clusters on the hub: without them the
	// controller would wait forever for its informer.
	if ok, err := spokeclass.Available(cfg); err != nil {
		return nil, err
	} else if ok {
		if err := (&spokeclass.Reconciler{Client: mgr.GetClient(), AllowedValues: opts.BootstrapAllowedValues}).SetupWithManager(mgr); err != nil {
			return nil, err
		}
	} else {
		ctrl.Log.WithName("hub").Info("Cluster API is not installed on the hub: SpokeClasses are not reconciled (restart the hub once it is)")
	}
	if err := pipeline.IndexFields(ctx, mgr); err != nil {
		return nil, err
	}
	if err := (&pipeline.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("tugboat-hub")}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := (&gauges.Reconciler{Client: mgr.GetClient(), Options: opts.DORA}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	registry := opts.Strategies
	if registry == nil {
		registry = DefaultStrategies(mgr, opts)
	}
	if err := (&promotion.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Registry: registry, Options: opts.Promotion,
		Recorder: mgr.GetEventRecorder("tugboat-hub"), Egress: opts.Egress}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := (&promotion.OnDemandReconciler{Client: mgr.GetClient(), Timeout: opts.Promotion.PreviewTimeout, TTL: opts.Promotion.PreviewTTL}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := (&lifecycle.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	builder := opts.NotifyBuilder
	if builder == nil {
		builder = deliver.NewSecretBuilder(mgr.GetAPIReader(), deliver.SecretBuilderOptions{
			SlackAPIURL: opts.SlackAPIURL, HTTPClient: opts.Egress.Client(opts.Notify.Timeout), Dial: opts.Egress.Dialer(0).DialContext,
			NotificationControllerAddress: opts.NotificationControllerAddress,
		})
	}
	notifyOpts := opts.Notify
	notifyOpts.DashboardNamespace = opts.DashboardNamespace
	if err := (&deliver.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Builder: builder, Options: notifyOpts}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	ropts := opts.Receiver
	ropts.ReadyCheck = func(*http.Request) error { return rec.Ready() }
	ropts.Mounts = map[string]http.Handler{
		pipelineapi.PathPrefix: pipelineapi.New(mgr.GetClient(), mgr.GetAPIReader(), pipelineapi.Options{Clock: ropts.Clock, Window: ropts.ReplayWindow,
			RateLimit: opts.PipelineAPI.RateLimit, RateBurst: opts.PipelineAPI.RateBurst, TrustedProxies: opts.PipelineAPI.TrustedProxies}),
		interactions.PathPrefix: interactions.New(mgr.GetClient(), mgr.GetAPIReader(), request.Decide, request.MayApprove, interactions.Options{
			HTTPClient: opts.Egress.Client(10 * time.Second), ResponseURLAllowed: opts.ResponseURLAllowed,
		}),
	}
	if opts.DashboardNamespace != "" {
		d, err := dashboard.New(mgr.GetConfig(), Scheme(), dashboard.Options{Namespace: opts.DashboardNamespace, ReadOnly: true, BasePath: dashboard.HubPath,
			Reader: mgr.GetClient(), Log: ctrl.Log.WithName("dashboard")})
		if err != nil {
			return nil, err
		}
		ropts.Mounts[dashboard.HubPath] = d.Handler()
		if err := mgr.Add(d); err != nil {
			return nil, err
		}
	}
	acts := actions.New(mgr.GetClient(), mgr.GetAPIReader())
	if err := acts.SetupWithManager(ctx, mgr); err != nil {
		return nil, err
	}
	ropts.Actions = acts
	// The receiver finds Spokes by namespace and name, with their agent
	// and Flux keys, suspension and last snapshot time.
	ropts.Spokes = spokedir.New(mgr.GetClient(), mgr.GetAPIReader(), opts.History.KeyCacheTTL, opts.SpokeKeys)
	srv, err := receiver.New(rec, ropts)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(srv); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("recorder", func(*http.Request) error { return rec.Ready() }); err != nil {
		return nil, err
	}
	return &Hub{Manager: mgr, Receiver: srv, Recorder: rec, Heartbeats: writer}, nil
}

// recorderClients returns the recorder's clients: reads from the manager's
// cache (the first) or uncached (the second), writes direct, every request
// bounded by rest.Config.Timeout = timeout, so a hung API server cannot
// freeze ingestion. The manager's own config keeps no timeout: its watches
// are long-lived.
func recorderClients(cfg *rest.Config, mgr ctrl.Manager, timeout time.Duration) (client.Client, client.Reader, error) {
	wcfg := rest.CopyConfig(cfg)
	if wcfg.Timeout == 0 || wcfg.Timeout > timeout {
		wcfg.Timeout = timeout
	}
	api, err := client.New(wcfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the recorder's client: %w", err)
	}
	cached, err := client.New(wcfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), Cache: &client.CacheOptions{Reader: mgr.GetCache()}})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the recorder's client: %w", err)
	}
	return cached, api, nil
}

// Start runs the hub until ctx ends.
func (h *Hub) Start(ctx context.Context) error { return h.Manager.Start(ctx) }

// cidrs is a repeatable flag of address ranges.
type cidrs struct{ dst *[]netip.Prefix }

func (c *cidrs) String() string {
	if c.dst == nil {
		return ""
	}
	parts := make([]string, 0, len(*c.dst))
	for _, p := range *c.dst {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ",")
}

func (c *cidrs) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			ip := net.ParseIP(s)
			if ip == nil {
				return err
			}
			addr, _ := netip.AddrFromSlice(ip)
			p = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
		}
		*c.dst = append(*c.dst, p)
	}
	return nil
}

func (c *cidrs) Type() string { return "cidr" }

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions serves /metrics on opts.MetricsBindAddress; with
// MetricsSecure over HTTPS (a self-signed certificate) behind
// controller-runtime's authentication and authorization filter: a
// TokenReview of the caller's bearer token, then a SubjectAccessReview of
// get on /metrics (the chart's ClusterRole tugboat-hub-metrics-reader).
func metricsOptions(opts Options) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.MetricsBindAddress}
	if opts.MetricsSecure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}
