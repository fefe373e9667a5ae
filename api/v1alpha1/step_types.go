package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The types of this file describe lifecycle steps (issue 25): checks that
// run before a Promotion's strategy acts (pre) and after its targets
// verified (post), each ending done, errored or timed out. A step of type
// external is a LifecycleEvent that another controller (or a person)
// finishes; a Lifecycle registers the kind of event such a controller
// handles. docs/design/promotion-lifecycle.md is the design, docs/lifecycle.md
// the user's guide.

// Limits of lifecycle steps. The CRD schema repeats them as markers.
const (
	// MaxStepsPerStage is the most steps one stage (pre or post) lists.
	MaxStepsPerStage = 10

	// MaxStepStatuses is the most entries a Promotion's status.steps holds:
	// every step of both stages.
	MaxStepStatuses = 2 * MaxStepsPerStage

	// MaxStepMessageLength bounds a step's and an event's message.
	MaxStepMessageLength = 1024

	// MaxEventTargets is the most targets a LifecycleEvent lists;
	// spec.targetCount counts them all.
	MaxEventTargets = 100

	// MaxStepRetries is the most retries a step may ask for.
	MaxStepRetries = 10

	// DefaultStepTimeout bounds one attempt of a step when neither the step
	// nor, for an external step, its Lifecycle sets a timeout.
	DefaultStepTimeout = "10m"
)

// Labels the hub puts on every LifecycleEvent, so that a lifecycle's
// controller selects its events (kubectl get lifecycleevents -l
// tugboat.dev/event-key=db-migrate) and a person finds a Promotion's.
const (
	// LabelEventKey is the event's spec.eventKey.
	LabelEventKey = "tugboat.dev/event-key"
	// LabelLifecycle is the event's spec.lifecycle.
	LabelLifecycle = "tugboat.dev/lifecycle"
	// LabelPromotion is the name of the Promotion the event belongs to
	// (absent when the name is longer than a label value may be).
	LabelPromotion = "tugboat.dev/promotion"
)

// StepType is the kind of a lifecycle step.
// +kubebuilder:validation:Enum=helmTest;metrics;webhook;external
type StepType string

const (
	// StepHelmTest has the destination's agents run the release's Helm
	// test hooks (a post step of a helm-strategy environment only).
	StepHelmTest StepType = "helmTest"
	// StepMetrics evaluates a PromQL query against a Prometheus, a set
	// number of times, each value judged by a success condition.
	StepMetrics StepType = "metrics"
	// StepWebhook is a signed HTTP POST that must answer 2xx, or answer 202
	// Accepted and report the result later through the CI API.
	StepWebhook StepType = "webhook"
	// StepExternal is a LifecycleEvent finished by another controller.
	StepExternal StepType = "external"
)

// StepStage is when a step runs.
// +kubebuilder:validation:Enum=Pre;Post
type StepStage string

const (
	// StepStagePre runs before the strategy acts on any target.
	StepStagePre StepStage = "Pre"
	// StepStagePost runs after every target verified (with a rollout, after
	// the last wave qualified), before the Promotion succeeds.
	StepStagePost StepStage = "Post"
)

// Steps are the lifecycle steps of an environment: checks run for every
// Promotion into it. Names are unique across both stages.
// +kubebuilder:validation:XValidation:rule="!has(self.pre) || !has(self.post) || self.pre.all(a, !self.post.exists(b, b.name == a.name))",message="step names must be unique across pre and post"
// +kubebuilder:validation:XValidation:rule="!has(self.pre) || self.pre.all(s, s.type != 'helmTest')",message="a helmTest step runs as a post step only: before the strategy acts, the promoted version is not installed, so there is nothing of it to test",fieldPath=".pre"
type Steps struct {
	// pre steps run, in order, before the strategy acts on any target. A
	// failed pre step fails the Promotion before anything changed.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	Pre []Step `json:"pre,omitempty"`

	// post steps run, in order, after every target verified (with a
	// rollout, after the last wave qualified) and before the Promotion
	// succeeds. A failed post step fails the Promotion.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	Post []Step `json:"post,omitempty"`
}

// Step is one lifecycle step: a type and, for that type only, its
// configuration.
// +kubebuilder:validation:XValidation:rule="self.type == 'helmTest' || !has(self.helmTest)",message="helmTest is allowed only when type is helmTest",fieldPath=".helmTest"
// +kubebuilder:validation:XValidation:rule="self.type == 'external' ? has(self.external) : !has(self.external)",message="external is required when type is external, and forbidden otherwise",fieldPath=".external"
// +kubebuilder:validation:XValidation:rule="self.type == 'webhook' ? has(self.webhook) : !has(self.webhook)",message="webhook is required when type is webhook, and forbidden otherwise",fieldPath=".webhook"
// +kubebuilder:validation:XValidation:rule="self.type == 'metrics' ? has(self.metrics) : !has(self.metrics)",message="metrics is required when type is metrics, and forbidden otherwise",fieldPath=".metrics"
// +kubebuilder:validation:XValidation:rule="!has(self.metrics) || !has(self.timeout) || !has(self.metrics.interval) || !has(self.metrics.count) || duration(self.timeout).getSeconds() > duration(self.metrics.interval).getSeconds() * (self.metrics.count - 1)",message="timeout must be longer than metrics.interval times (metrics.count - 1), or the step times out before its last measurement",fieldPath=".timeout"
type Step struct {
	// name identifies the step in the Promotion's status.steps, a DNS label,
	// unique across pre and post.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// type is metrics (a PromQL query measured against a Prometheus),
	// webhook (a signed HTTP POST that must answer 2xx, or 202 and report
	// later through the CI API), external (a LifecycleEvent that another
	// controller finishes) or helmTest (the destination's agents run the
	// release's Helm test hooks; post steps of a helm-strategy environment
	// only).
	// +required
	Type StepType `json:"type"`

	// timeout bounds one attempt of the step. Defaults to the Lifecycle's
	// spec.timeout for an external step, to metrics.interval times
	// metrics.count plus 1m for a metrics step, else 10m. A helmTest step's
	// agents also bound the test hooks with it (helm test --timeout).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('24h')",message="timeout must be positive and at most 24h"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// retries is how many more attempts a failed or timed-out step gets.
	// Defaults to 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	Retries int32 `json:"retries,omitempty"`

	// external configures an external step; required for it.
	// +optional
	External *ExternalStep `json:"external,omitempty"`

	// webhook configures a webhook step; required for it.
	// +optional
	Webhook *WebhookStep `json:"webhook,omitempty"`

	// metrics configures a metrics step; required for it.
	// +optional
	Metrics *MetricsStep `json:"metrics,omitempty"`

	// helmTest configures a helmTest step; optional for it, forbidden
	// otherwise.
	// +optional
	HelmTest *HelmTestStep `json:"helmTest,omitempty"`
}

// HelmTestWaves says which targets a helmTest step tests.
// +kubebuilder:validation:Enum=Canary;All;Each
type HelmTestWaves string

const (
	// HelmTestCanary tests the targets of the rollout's first wave (the
	// canary) only; without a rollout, every target.
	HelmTestCanary HelmTestWaves = "Canary"
	// HelmTestAll tests every target, once the last wave qualified.
	HelmTestAll HelmTestWaves = "All"
	// HelmTestEach tests every target, wave by wave: with a rollout, each
	// wave's targets are tested once the wave qualified and before the
	// next wave is acted on (the last wave's, before the Promotion
	// succeeds); without one, every target.
	HelmTestEach HelmTestWaves = "Each"
)

// HelmTestStep configures a helmTest step: the agent of each tested target
// runs the release's Helm test hooks (helm test) on the revision the
// Promotion's upgrade made.
type HelmTestStep struct {
	// waves is Canary (the default: with a rollout, only the targets of its
	// first wave are tested; without one, every target), All (every target,
	// after the last wave) or Each (every target, each wave's before the
	// next wave starts).
	// +optional
	Waves HelmTestWaves `json:"waves,omitempty"`
}

// ExternalStep names the Lifecycle whose controller finishes the step's
// LifecycleEvent.
type ExternalStep struct {
	// lifecycle is the name of a Lifecycle in the Pipeline's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Lifecycle string `json:"lifecycle"`
}

// WebhookStep configures a webhook step: a JSON POST, signed with the
// agent wire protocol's scheme, that must answer 2xx; a 202 Accepted
// answer waits for a report through the CI API.
type WebhookStep struct {
	// url receives the POST. It passes the hub's egress policy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`

	// secretRef names a Secret in the Pipeline's namespace whose key "key"
	// is the HMAC key the request is signed with, and with which the
	// receiver may sign its report after a 202. Unsigned when unset.
	// +optional
	SecretRef *LocalSecretReference `json:"secretRef,omitempty"`
}

// MetricOperator compares a measured value with a threshold.
// +kubebuilder:validation:Enum=LessThan;LessThanOrEqual;GreaterThan;GreaterThanOrEqual;Equal;NotEqual
type MetricOperator string

// The operators of a metrics step's success condition: a measurement
// passes when "value operator threshold" holds.
const (
	MetricLessThan           MetricOperator = "LessThan"
	MetricLessThanOrEqual    MetricOperator = "LessThanOrEqual"
	MetricGreaterThan        MetricOperator = "GreaterThan"
	MetricGreaterThanOrEqual MetricOperator = "GreaterThanOrEqual"
	MetricEqual              MetricOperator = "Equal"
	MetricNotEqual           MetricOperator = "NotEqual"
)

// Limits of metrics steps. The CRD schema repeats them as markers.
const (
	// MaxMetricsCount is the most measurements one attempt takes.
	MaxMetricsCount = 100
	// MaxMeasurements is how many of an attempt's measurements, the
	// latest, a step's status keeps.
	MaxMeasurements = 10
	// DefaultMetricsInterval is the time between two measurements when the
	// step sets none.
	DefaultMetricsInterval = "1m"
)

// MetricsStep configures a metrics step, the way Flagger's and Argo
// Rollouts' analyses work: the hub runs query against a Prometheus count
// times, interval apart (the first at once), and judges each value by
// successCondition; the step fails as soon as more than failureLimit
// measurements failed, and passes when all count were taken.
// +kubebuilder:validation:XValidation:rule="!has(self.failureLimit) || self.failureLimit < (has(self.count) ? self.count : 1)",message="failureLimit must be less than count, or the step could never fail"
type MetricsStep struct {
	// secretRef names a Secret in the Pipeline's namespace: key "address"
	// is the Prometheus's base URL (http or https, e.g.
	// http://prometheus.monitoring:9090), and optional keys "bearerToken",
	// or "username" and "password", authenticate the hub to it. Requests
	// pass the hub's egress policy.
	// +required
	SecretRef LocalSecretReference `json:"secretRef"`

	// query is the PromQL instant query. It must return a scalar or a
	// vector of exactly one sample (aggregate it, e.g. with sum()): an
	// empty result, several series or NaN is a failed measurement.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query"`

	// interval is the time between two measurements, from 1s to 1h.
	// Defaults to 1m.
	// +optional
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="interval must be from 1s to 1h"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// count is how many measurements an attempt takes, 1 to 100. Defaults
	// to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Count int32 `json:"count,omitempty"`

	// successCondition is what a measured value must satisfy to pass.
	// +required
	SuccessCondition MetricCondition `json:"successCondition"`

	// failureLimit is how many failed measurements an attempt tolerates:
	// one more fails it at once. Defaults to 0, less than count.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=99
	FailureLimit int32 `json:"failureLimit,omitempty"`
}

// MetricCondition is "value operator threshold", e.g. LessThan 0.01 for an
// error rate.
type MetricCondition struct {
	// operator is LessThan, LessThanOrEqual, GreaterThan,
	// GreaterThanOrEqual, Equal or NotEqual.
	// +required
	Operator MetricOperator `json:"operator"`

	// threshold is the number the value is compared with, a decimal or
	// scientific literal (e.g. "0.01", "1e-3", "-5"), as a string so that
	// it keeps its exact spelling.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$`
	Threshold string `json:"threshold"`
}

// StepPhase is where a step of a Promotion stands.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;TimedOut
type StepPhase string

const (
	// StepPending: not started.
	StepPending StepPhase = "Pending"
	// StepRunning: an attempt is under way.
	StepRunning StepPhase = "Running"
	// StepSucceeded: an attempt succeeded. Terminal.
	StepSucceeded StepPhase = "Succeeded"
	// StepFailed: the last attempt failed and no retry is left. Terminal.
	StepFailed StepPhase = "Failed"
	// StepTimedOut: the last attempt timed out and no retry is left.
	// Terminal.
	StepTimedOut StepPhase = "TimedOut"
)

// Terminal reports whether the step has finished.
func (p StepPhase) Terminal() bool {
	return p == StepSucceeded || p == StepFailed || p == StepTimedOut
}

// StepStatus is where one lifecycle step of a Promotion stands. The
// Promotion reconciler writes it.
type StepStatus struct {
	// name of the step in the environment's steps.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// stage is Pre or Post.
	// +required
	Stage StepStage `json:"stage"`

	// type is the step's type.
	// +required
	Type StepType `json:"type"`

	// phase is Pending, Running, Succeeded, Failed or TimedOut.
	// +required
	Phase StepPhase `json:"phase"`

	// attempts is how many attempts started.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=11
	Attempts int32 `json:"attempts,omitempty"`

	// startedAt is when the current (or last) attempt started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// completedAt is when the step finished.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`

	// message says what the step waits for, or how it ended (the finishing
	// controller's message, the webhook's answer).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// lifecycleEvent is the name of the current (or last) attempt's
	// LifecycleEvent, for an external step, or a webhook step whose
	// receiver answered 202 (the event waits for its report).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	LifecycleEvent string `json:"lifecycleEvent,omitempty"`

	// metrics are the current (or last) attempt's measurements, for a
	// metrics step.
	// +optional
	Metrics *MetricsStepStatus `json:"metrics,omitempty"`
}

// MetricsStepStatus counts a metrics step attempt's measurements and keeps
// the latest, so that an approver sees why it passed or failed, and a hub
// that restarts goes on from where it stood.
type MetricsStepStatus struct {
	// taken is how many measurements the attempt took.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Taken int32 `json:"taken,omitempty"`

	// failed is how many of them failed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Failed int32 `json:"failed,omitempty"`

	// measurements are the latest measurements, oldest first, at most 10.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Measurements []Measurement `json:"measurements,omitempty"`
}

// Measurement is one evaluation of a metrics step's query.
type Measurement struct {
	// at is when the query was evaluated, to the microsecond (the next
	// measurement is due an interval after it).
	// +required
	At metav1.MicroTime `json:"at"`

	// value is the query's result, when it returned one.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Value string `json:"value,omitempty"`

	// passed says whether the value satisfied the success condition.
	// +optional
	Passed bool `json:"passed,omitempty"`

	// message says why a measurement failed (an error, no series).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
}
