package agent

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"

	"tugboat.dev/tugboat/agent/actions"
	"tugboat.dev/tugboat/agent/reporter"
)

// Options configure the agent.
type Options struct {
	// Reporter configures delivery to the hub (spoke name, hub URL, key).
	Reporter reporter.Options
	// WatchNamespaces limits the agent to these namespaces; empty watches
	// all.
	WatchNamespaces []string
	// MetricsBindAddress serves /metrics ("0" disables).
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz ("0" disables).
	HealthProbeBindAddress string
	// Webhook configures the admission webhooks.
	Webhook WebhookOptions
	// Backfill labels objects that existed before the agent started, and
	// (every BackfillInterval) objects the webhooks missed since.
	Backfill bool
	// BackfillRate bounds the backfill's patches per second.
	BackfillRate float32
	// BackfillInterval is the time between backfill passes after the
	// first, which runs at start. The webhooks fail open (a write goes
	// through unlabeled when the agent is slow or down), so later passes
	// catch up with what they missed. Zero runs the backfill at start only.
	BackfillInterval time.Duration
	// Settle is how long a newly deployed revision stays InProgress before
	// its workloads can declare it healthy.
	Settle time.Duration
	// HelmReleaseDiscoveryInterval is how often an agent on a cluster that
	// does not serve Flux HelmReleases checks again whether it does (Flux
	// installed later); zero checks at start only.
	HelmReleaseDiscoveryInterval time.Duration
	// Actions configures the promotion actions the agent pulls from the hub
	// (helm strategy) and the limits the spoke enforces on them. Enabled by
	// default, refusing every action until limits are set.
	Actions actions.Options
}

// WebhookOptions configure the ownership admission webhooks.
type WebhookOptions struct {
	// Disabled turns the webhooks off (labels then come from the backfill
	// only).
	Disabled bool
	// Register applies the webhook configurations at start (and, with
	// URLHost, deletes them at a clean stop). Off when they are deployed
	// as manifests (the agent's chart does: its files/webhook, generated
	// from the same code); the agent then only serves them.
	Register bool
	// BindAddress is where the webhook server listens.
	BindAddress string
	// CertDir holds tls.crt, tls.key and ca.crt; empty generates a
	// self-signed certificate at start. With CertRotation, it is where the
	// certificate Secret is mounted.
	CertDir string
	// CertRotation keeps a self-signed CA and serving certificate in the
	// Secret CertSecretName (in AgentNamespace) and injects the CA into the
	// webhook configurations, renewing both before they expire
	// (open-policy-agent/cert-controller). The Secret must exist (empty is
	// fine) and be mounted at CertDir; the webhooks are registered once the
	// mounted files match it.
	CertRotation bool
	// CertSecretName is the Secret CertRotation keeps the certificates in.
	CertSecretName string
	// URLHost, when set, registers the webhooks by URL
	// (https://<URLHost>:<port>/...): for agents running outside the cluster
	// (tugboat dev up).
	URLHost string
	// ServiceName and ServiceNamespace register the webhooks through a
	// Service (in-cluster).
	ServiceName, ServiceNamespace string
	// Name of the webhook configurations.
	Name string
	// AgentNamespace is excluded from admission (with kube-system).
	AgentNamespace string
	// ClientCAFile, when set, makes the webhook server require a client
	// certificate signed by this CA: the one the API server presents to
	// webhooks where its admission configuration (kubeConfigFile of a
	// WebhookAdmissionConfiguration) gives it one. Empty: any TLS client is
	// served (docs/security.md, Agent, explains the trade-off).
	ClientCAFile string
	// ClientNames, with ClientCAFile, restricts the client certificate's
	// common name (or a DNS name) to these.
	ClientNames []string
}

// NewOptions returns the defaults.
func NewOptions() Options {
	return Options{
		Reporter:               agentReporterOptions(),
		MetricsBindAddress:     ":8080",
		HealthProbeBindAddress: ":8081",
		Webhook: WebhookOptions{
			BindAddress:      ":9443",
			Name:             "tugboat-agent",
			ServiceName:      "tugboat-agent",
			ServiceNamespace: "tugboat-system",
			AgentNamespace:   "tugboat-system",
			CertSecretName:   "tugboat-agent-webhook-tls",
			Register:         true,
		},
		Backfill:         true,
		BackfillRate:     20,
		BackfillInterval: 5 * time.Minute,
		Settle:           0,
		Actions:          actions.NewOptions(),

		HelmReleaseDiscoveryInterval: time.Minute,
	}
}

// BindFlags binds every option to fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	o.Reporter.BindFlags(fs)
	fs.StringSliceVar(&o.WatchNamespaces, "watch-namespaces", o.WatchNamespaces, "namespaces to watch (default: all)")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, `address of the Prometheus /metrics endpoint ("0" disables it)`)
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, `address of /healthz and /readyz ("0" disables them)`)
	fs.BoolVar(&o.Webhook.Disabled, "webhook-disabled", o.Webhook.Disabled, "do not serve or register the ownership admission webhooks")
	fs.StringVar(&o.Webhook.BindAddress, "webhook-bind-address", o.Webhook.BindAddress, "address of the admission webhook server")
	fs.StringVar(&o.Webhook.CertDir, "webhook-cert-dir", o.Webhook.CertDir, "directory with tls.crt, tls.key and ca.crt (empty: self-signed)")
	fs.BoolVar(&o.Webhook.Register, "webhook-register", o.Webhook.Register, "apply the webhook configurations at start (false: they are deployed as manifests, as the agent's chart does)")
	fs.BoolVar(&o.Webhook.CertRotation, "webhook-cert-rotation", o.Webhook.CertRotation, "keep a self-signed webhook certificate in --webhook-cert-secret, mounted at --webhook-cert-dir, and inject its CA into the webhook configurations")
	fs.StringVar(&o.Webhook.CertSecretName, "webhook-cert-secret", o.Webhook.CertSecretName, "Secret in --agent-namespace that --webhook-cert-rotation keeps the certificates in")
	fs.StringVar(&o.Webhook.URLHost, "webhook-url-host", o.Webhook.URLHost, "register the webhooks by URL on this host (agents outside the cluster)")
	fs.StringVar(&o.Webhook.ServiceName, "webhook-service-name", o.Webhook.ServiceName, "Service the API server reaches the webhooks through")
	fs.StringVar(&o.Webhook.ServiceNamespace, "webhook-service-namespace", o.Webhook.ServiceNamespace, "namespace of --webhook-service-name")
	fs.StringVar(&o.Webhook.Name, "webhook-configuration-name", o.Webhook.Name, "name of the webhook configurations")
	fs.StringVar(&o.Webhook.ClientCAFile, "webhook-client-ca-file", o.Webhook.ClientCAFile, "PEM CA bundle: serve only webhook clients (the API server) presenting a certificate it signed (empty: any TLS client)")
	fs.StringSliceVar(&o.Webhook.ClientNames, "webhook-client-names", o.Webhook.ClientNames, "with --webhook-client-ca-file: the client certificate's common name (or DNS name) must be one of these")
	fs.StringVar(&o.Webhook.AgentNamespace, "agent-namespace", o.Webhook.AgentNamespace, "the agent's own namespace, excluded from admission")
	fs.BoolVar(&o.Backfill, "backfill", o.Backfill, "label objects that existed before the agent started")
	fs.Float32Var(&o.BackfillRate, "backfill-rate", o.BackfillRate, "backfill patches per second")
	fs.DurationVar(&o.BackfillInterval, "backfill-interval", o.BackfillInterval, "time between backfill passes, which label what the webhooks missed (0: at start only)")
	fs.DurationVar(&o.Settle, "settle-time", o.Settle, "extra time a newly deployed revision stays InProgress before its workloads can declare it healthy (0: none; a fresh read of its workloads from the API server already keeps stale cached ones from declaring it early)")
	fs.DurationVar(&o.HelmReleaseDiscoveryInterval, "helmrelease-discovery-interval", o.HelmReleaseDiscoveryInterval,
		"how often to check again whether the cluster serves Flux HelmReleases, while it does not (0: at start only)")
	o.Actions.BindFlags(fs)
}

// Validate reports every invalid option.
func (o *Options) Validate() error {
	var errs []error
	errs = append(errs, o.Reporter.Validate(), o.Actions.Validate())
	if o.BackfillRate <= 0 {
		errs = append(errs, fmt.Errorf("--backfill-rate must be positive"))
	}
	if o.BackfillInterval < 0 {
		errs = append(errs, fmt.Errorf("--backfill-interval must not be negative"))
	}
	if o.HelmReleaseDiscoveryInterval < 0 {
		errs = append(errs, fmt.Errorf("--helmrelease-discovery-interval must not be negative"))
	}
	if o.Settle < 0 {
		errs = append(errs, fmt.Errorf("--settle-time must not be negative"))
	}
	if !o.Webhook.Disabled && o.Webhook.URLHost == "" && (o.Webhook.ServiceName == "" || o.Webhook.ServiceNamespace == "") {
		errs = append(errs, errors.New("webhooks need --webhook-url-host or --webhook-service-name and --webhook-service-namespace"))
	}
	if w := o.Webhook; len(w.ClientNames) > 0 && w.ClientCAFile == "" {
		errs = append(errs, errors.New("--webhook-client-names needs --webhook-client-ca-file"))
	}
	if w := o.Webhook; !w.Disabled && w.CertRotation {
		if w.CertDir == "" {
			errs = append(errs, errors.New("--webhook-cert-rotation needs --webhook-cert-dir, where the certificate Secret is mounted"))
		}
		if w.CertSecretName == "" || w.AgentNamespace == "" {
			errs = append(errs, errors.New("--webhook-cert-rotation needs --webhook-cert-secret and --agent-namespace"))
		}
		if w.URLHost != "" && net.ParseIP(w.URLHost) != nil {
			errs = append(errs, fmt.Errorf("--webhook-cert-rotation issues certificates for DNS names only: --webhook-url-host %s is an IP address (use a name such as localhost)", w.URLHost))
		}
	}
	return errors.Join(errs...)
}

// agentReporterOptions are the reporter's defaults with a short batch wait:
// promotion decisions are meant to take well under a second end to end.
func agentReporterOptions() reporter.Options {
	o := reporter.NewOptions()
	o.BatchMaxWait = 50 * time.Millisecond
	return o
}
