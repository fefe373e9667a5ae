package actions

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of NewOptions.
const (
	// DefaultUpgradeTimeout bounds a Helm upgrade's hooks (upgrades do not
	// wait for readiness).
	DefaultUpgradeTimeout = 5 * time.Minute
	// DefaultPendingWait is how long an operation someone else started
	// (helm upgrade by hand, another controller) may keep a release pending
	// before the action is reported Failed.
	DefaultPendingWait = 30 * time.Second
	// DefaultPollTimeout bounds one long-poll. The hub holds a poll for up
	// to about 30 s, so this leaves room for the answer.
	DefaultPollTimeout = 40 * time.Second
	// DefaultRequestTimeout bounds one outcome report.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultBackoffInitial is the ceiling of the first retry delay.
	DefaultBackoffInitial = 500 * time.Millisecond
	// DefaultBackoffMax caps the retry delay.
	DefaultBackoffMax = 30 * time.Second
	// DefaultMinPollInterval spaces polls that the hub answers at once with
	// nothing new (see Poller.pace); a new action never waits for it.
	DefaultMinPollInterval = time.Second
	// DefaultMaxConcurrent is how many actions (on different releases) run
	// at once.
	DefaultMaxConcurrent = 4

	// pendingGraceMargin is added to the upgrade timeout when PendingGrace
	// is not set.
	pendingGraceMargin = 30 * time.Second
)

// Options configure the actions poller and executor.
type Options struct {
	// Enabled runs the poller. With the default (empty) Limits an enabled
	// agent refuses every action, so the hub learns why instead of waiting
	// for a timeout.
	Enabled bool
	// Limits are the spoke's limits when LimitsFile is empty.
	Limits Limits
	// LimitsFile, when set, is a YAML file (typically a mounted ConfigMap
	// key) holding the limits (allowedNamespaces, allowedChartSources,
	// allowDowngrades). It replaces Limits entirely and is re-read when it
	// changes; while it cannot be read or parsed every action is refused.
	LimitsFile string
	// CredentialsSecret is "namespace/name" of a Secret on the spoke with the
	// keys username, password and host: the credentials are sent to that
	// host (host[:port]) only. Empty means anonymous.
	CredentialsSecret string
	// UpgradeTimeout bounds a Helm upgrade's hooks.
	UpgradeTimeout time.Duration
	// InstallMissing installs the release when it is not on the spoke (a
	// promotion into an environment that never ran it), within the same
	// limits, into an existing namespace; false (the default) reports such
	// an action Failed, so the hub can only move releases a person put on
	// the spoke.
	InstallMissing bool
	// PendingGrace is how old a pending revision this agent made for the
	// same action must be before it is taken for abandoned (the agent was
	// killed mid-upgrade), removed and the upgrade run again. 0 means
	// UpgradeTimeout plus 30 s: no upgrade of ours can still be running by
	// then.
	PendingGrace time.Duration
	// PendingWait is how long a release kept pending by someone else may
	// delay an action before it is reported Failed.
	PendingWait time.Duration
	// PollTimeout bounds one long-poll request.
	PollTimeout time.Duration
	// RequestTimeout bounds one outcome report.
	RequestTimeout time.Duration
	// BackoffInitial and BackoffMax shape the capped, fully jittered
	// exponential backoff of polls and reports after failures.
	BackoffInitial, BackoffMax time.Duration
	// MinPollInterval is the least time between the starts of two polls
	// whose first brought no new action; after a new action the next poll
	// starts at once, and after repeats of actions under way it starts as
	// soon as one of them is reported.
	MinPollInterval time.Duration
	// MaxConcurrent is how many actions run at once; actions on the same
	// release always run one at a time.
	MaxConcurrent int
	// ChartCacheSize bounds, in bytes, the packaged charts kept between
	// actions (0: none are kept).
	ChartCacheSize int64
	// IndexCacheSize bounds, in bytes of their index.yaml files, the HTTP
	// repository indexes kept between actions and read again through a
	// conditional GET (0: none are kept).
	IndexCacheSize int64
	// HistoryMax is how many revisions of a release an upgrade or rollback
	// keeps, as helm's --history-max (0: all of them). Helm prunes the
	// oldest superseded revisions beyond it; the revision a rollback
	// returns to is the one before the promotion's, so at least 2.
	HistoryMax int
}

// DefaultHistoryMax is the helm CLI's own default for --history-max.
const DefaultHistoryMax = 10

// NewOptions returns the defaults: enabled, and refusing everything until
// limits are set.
func NewOptions() Options {
	return Options{
		Enabled:         true,
		UpgradeTimeout:  DefaultUpgradeTimeout,
		PendingWait:     DefaultPendingWait,
		PollTimeout:     DefaultPollTimeout,
		RequestTimeout:  DefaultRequestTimeout,
		BackoffInitial:  DefaultBackoffInitial,
		BackoffMax:      DefaultBackoffMax,
		MinPollInterval: DefaultMinPollInterval,
		MaxConcurrent:   DefaultMaxConcurrent,
		ChartCacheSize:  DefaultChartCacheSize,
		IndexCacheSize:  DefaultIndexCacheSize,
		HistoryMax:      DefaultHistoryMax,
	}
}

// Flag names, quoted in refusal messages.
const (
	flagNamespaces      = "--actions-allowed-namespaces"
	flagChartSources    = "--actions-allowed-chart-sources"
	flagAllowDowngrades = "--actions-allow-downgrades"
)

// BindFlags registers the options' flags on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "actions-enabled", o.Enabled,
		"Poll the hub for promotion actions (helm strategy). Every action is refused until "+flagNamespaces+" and "+flagChartSources+" (or --actions-limits-file) allow it.")
	fs.StringSliceVar(&o.Limits.Namespaces, flagNamespaces[2:], o.Limits.Namespaces,
		`Namespaces that may receive promotions ("*": all). Default: none.`)
	fs.StringSliceVar(&o.Limits.ChartSources, flagChartSources[2:], o.Limits.ChartSources,
		`URL prefixes charts may come from, e.g. https://charts.example.com/stable or oci://ghcr.io/org ("*": any). Default: none.`)
	fs.BoolVar(&o.Limits.AllowDowngrades, flagAllowDowngrades[2:], o.Limits.AllowDowngrades,
		"Allow promotions to a lower chart version than the release's.")
	fs.StringVar(&o.LimitsFile, "actions-limits-file", o.LimitsFile,
		"YAML file (e.g. a mounted ConfigMap) with allowedNamespaces, allowedChartSources and allowDowngrades; replaces the three flags and is re-read when it changes.")
	fs.StringVar(&o.CredentialsSecret, "actions-credentials-secret", o.CredentialsSecret,
		"namespace/name of a Secret on this cluster with username, password and host (host[:port]) for chart sources; the credentials are sent to that host only.")
	fs.BoolVar(&o.InstallMissing, "actions-install-missing", o.InstallMissing,
		"Install a release that is not on this spoke yet (within the same limits, into an existing namespace) instead of failing the action. Off by default: the hub can then only move releases already installed here.")
	fs.DurationVar(&o.UpgradeTimeout, "actions-upgrade-timeout", o.UpgradeTimeout,
		"Timeout of a Helm upgrade's hooks (upgrades do not wait for readiness).")
	fs.DurationVar(&o.PendingGrace, "actions-pending-grace", o.PendingGrace,
		"Age after which a pending revision this agent made for the same action is taken for abandoned and replaced (0: the upgrade timeout plus 30s).")
	fs.DurationVar(&o.PendingWait, "actions-pending-wait", o.PendingWait,
		"How long a release kept pending by another operation may delay an action before it fails.")
	fs.Int64Var(&o.ChartCacheSize, "actions-chart-cache-size", o.ChartCacheSize,
		"Bytes of packaged charts kept between actions, by repository, chart, version and the digest the repository gives (0: none). A chart is downloaded again when its digest changes, and an entry is checked against its SHA-256 before each use.")
	fs.IntVar(&o.HistoryMax, "actions-history-max", o.HistoryMax,
		"Revisions of a release kept by the agent's upgrades and rollbacks, as helm's --history-max (0: unlimited). Helm deletes the oldest superseded revisions beyond it.")
	fs.Int64Var(&o.IndexCacheSize, "actions-index-cache-size", o.IndexCacheSize,
		"Bytes of HTTP chart repository indexes (index.yaml) kept between actions (0: none). A kept index is used only after the repository answers a conditional GET (ETag or Last-Modified) with 304 Not Modified; one whose server sends neither is read in full every time.")
}

// Validate reports every invalid option, joined.
func (o *Options) Validate() error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.LimitsFile == "" {
		if err := o.Limits.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if o.CredentialsSecret != "" {
		ns, name, ok := strings.Cut(o.CredentialsSecret, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			add("--actions-credentials-secret must be namespace/name, got %q", o.CredentialsSecret)
		}
	}
	if o.UpgradeTimeout <= 0 {
		add("--actions-upgrade-timeout must be positive, got %s", o.UpgradeTimeout)
	}
	if o.PendingGrace < 0 {
		add("--actions-pending-grace must not be negative, got %s", o.PendingGrace)
	}
	if o.PendingWait < 0 {
		add("--actions-pending-wait must not be negative, got %s", o.PendingWait)
	}
	if o.PollTimeout <= 0 || o.RequestTimeout <= 0 {
		add("actions poll and request timeouts must be positive")
	}
	if o.BackoffInitial <= 0 || o.BackoffMax < o.BackoffInitial {
		add("actions backoff: initial must be positive and at most the maximum")
	}
	if o.MinPollInterval < 0 {
		add("actions minimum poll interval must not be negative")
	}
	if o.ChartCacheSize < 0 {
		add("--actions-chart-cache-size must not be negative, got %d", o.ChartCacheSize)
	}
	if o.IndexCacheSize < 0 {
		add("--actions-index-cache-size must not be negative, got %d", o.IndexCacheSize)
	}
	if o.HistoryMax < 0 || o.HistoryMax == 1 {
		add("--actions-history-max must be 0 (unlimited) or at least 2, so that a rollback finds the revision it returns to, got %d", o.HistoryMax)
	}
	if o.MaxConcurrent < 1 {
		add("actions concurrency must be at least 1")
	}
	return errors.Join(errs...)
}

// pendingGrace is PendingGrace, or its default.
func (o Options) pendingGrace() time.Duration {
	if o.PendingGrace > 0 {
		return o.PendingGrace
	}
	return o.UpgradeTimeout + pendingGraceMargin
}
