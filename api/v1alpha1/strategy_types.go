package v1alpha1

// StrategyType names a promotion strategy: how a version is moved into an
// environment.
// +kubebuilder:validation:Enum=pullRequest;kubernetes;helm;webhook;notification
type StrategyType string

const (
	// StrategyPullRequest opens (or updates) a pull request that sets the chart
	// version at marked fields of the destination environment's manifests.
	StrategyPullRequest StrategyType = "pullRequest"
	// StrategyKubernetes server-side applies the chart version to the targets'
	// Flux HelmReleases through the Spoke's kubeconfig.
	StrategyKubernetes StrategyType = "kubernetes"
	// StrategyHelm has the destination spokes' agents upgrade the release with
	// the Helm SDK (or update a local Flux HelmRelease).
	StrategyHelm StrategyType = "helm"
	// StrategyWebhook sends a signed JSON POST to a CI endpoint.
	StrategyWebhook StrategyType = "webhook"
	// StrategyNotification emits a Flux event (reason Promote) and notifies,
	// for an external actor to promote.
	StrategyNotification StrategyType = "notification"
)

// PromotionStrategy says how a version is promoted into an environment: a type
// and, for that type only, its configuration.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'pullRequest' ? has(self.pullRequest) : !has(self.pullRequest)",message="pullRequest is required when type is pullRequest, and forbidden otherwise",fieldPath=".pullRequest"
// +kubebuilder:validation:XValidation:rule="self.type == 'webhook' ? has(self.webhook) : !has(self.webhook)",message="webhook is required when type is webhook, and forbidden otherwise",fieldPath=".webhook"
// +kubebuilder:validation:XValidation:rule="self.type == 'kubernetes' || !has(self.kubernetes)",message="kubernetes may only be set when type is kubernetes",fieldPath=".kubernetes"
// +kubebuilder:validation:XValidation:rule="self.type == 'helm' || !has(self.helm)",message="helm may only be set when type is helm",fieldPath=".helm"
// +kubebuilder:validation:XValidation:rule="self.type == 'notification' || !has(self.notification)",message="notification may only be set when type is notification",fieldPath=".notification"
type PromotionStrategy struct {
	// type is the strategy: pullRequest, kubernetes, helm, webhook or
	// notification.
	// +required
	Type StrategyType `json:"type"`

	// pullRequest configures the pullRequest strategy; required for it.
	// +optional
	PullRequest *PullRequestStrategy `json:"pullRequest,omitempty"`

	// kubernetes configures the kubernetes strategy.
	// +optional
	Kubernetes *KubernetesStrategy `json:"kubernetes,omitempty"`

	// helm configures the helm strategy.
	// +optional
	Helm *HelmStrategy `json:"helm,omitempty"`

	// webhook configures the webhook strategy; required for it.
	// +optional
	Webhook *WebhookStrategy `json:"webhook,omitempty"`

	// notification configures the notification strategy.
	// +optional
	Notification *NotificationStrategy `json:"notification,omitempty"`
}

// GitProvider is the hosting service whose API opens pull requests.
// +kubebuilder:validation:Enum=github;gitlab;gitea
type GitProvider string

const (
	// GitProviderGitHub is GitHub or GitHub Enterprise.
	GitProviderGitHub GitProvider = "github"
	// GitProviderGitLab is GitLab.
	GitProviderGitLab GitProvider = "gitlab"
	// GitProviderGitea is Gitea (or Forgejo).
	GitProviderGitea GitProvider = "gitea"
)

// PullRequestStrategy configures the pullRequest strategy.
type PullRequestStrategy struct {
	// url is the git repository's clone URL (https:// or ssh://).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^(https?|ssh)://`
	URL string `json:"url"`

	// branch is the base branch the pull request targets. Defaults to main.
	// +optional
	// +kubebuilder:default=main
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Branch string `json:"branch,omitempty"`

	// path is the directory, relative to the repository root, searched for
	// fields marked `# tugboat: {"pipeline": ..., "environment": ...}`. Defaults
	// to the whole repository.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="path must be relative and must not contain '..'"
	Path string `json:"path,omitempty"`

	// provider is the hosting service: github, gitlab or gitea.
	// +required
	Provider GitProvider `json:"provider"`

	// secretRef names a Secret in the Pipeline's namespace with the credentials
	// to push and to call the provider's API: key "token" (an access token),
	// or "username" and "password".
	// +required
	SecretRef LocalSecretReference `json:"secretRef"`
}

// KubernetesStrategy configures the kubernetes strategy. It has no settings
// yet: the targets' HelmReleases and the Spokes' kubeconfigs say everything.
type KubernetesStrategy struct{}

// ValuesPolicy says which values a helm upgrade uses.
// +kubebuilder:validation:Enum=reuse;reset-then-reuse
type ValuesPolicy string

const (
	// ValuesPolicyReuse reuses the release's last values (helm --reuse-values).
	ValuesPolicyReuse ValuesPolicy = "reuse"
	// ValuesPolicyResetThenReuse starts from the new chart's defaults and
	// applies the release's last user-supplied values on top (helm
	// --reset-then-reuse-values).
	ValuesPolicyResetThenReuse ValuesPolicy = "reset-then-reuse"
)

// HelmStrategy configures the helm strategy.
// +kubebuilder:validation:XValidation:rule="!has(self.repository) || self.repository.startsWith('oci://') || has(self.chart)",message="chart is required with an HTTP(S) repository",fieldPath=".chart"
type HelmStrategy struct {
	// repository is where the agent pulls the chart from: an HTTP(S) chart
	// repository URL (with chart set) or an OCI reference such as
	// oci://registry.example.com/charts/web. Defaults to where the release's
	// Flux HelmRelease points; required for plain Helm releases.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^(https?|oci)://`
	Repository string `json:"repository,omitempty"`

	// chart is the chart's name in an HTTP(S) repository.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Chart string `json:"chart,omitempty"`

	// valuesPolicy is reuse (the default) or reset-then-reuse.
	// +optional
	// +kubebuilder:default=reuse
	ValuesPolicy ValuesPolicy `json:"valuesPolicy,omitempty"`
}

// WebhookStrategy configures the webhook strategy.
type WebhookStrategy struct {
	// url receives the signed JSON POST.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`

	// secretRef names a Secret in the Pipeline's namespace whose key "key" is
	// the HMAC key the request is signed with (same scheme as the agent's).
	// Unsigned when unset.
	// +optional
	SecretRef *LocalSecretReference `json:"secretRef,omitempty"`
}

// NotificationStrategy configures the notification strategy.
type NotificationStrategy struct {
	// address is the URL of Flux notification-controller's event endpoint.
	// Defaults to the hub's --notification-controller-address.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	Address string `json:"address,omitempty"`
}

// NotifierType names a way to tell people about promotions.
// +kubebuilder:validation:Enum=slack;email;webhook;flux
type NotifierType string

const (
	// NotifierSlack posts to a Slack incoming webhook.
	NotifierSlack NotifierType = "slack"
	// NotifierEmail sends one summary email per promotion, at completion.
	NotifierEmail NotifierType = "email"
	// NotifierWebhook sends HMAC-signed JSON.
	NotifierWebhook NotifierType = "webhook"
	// NotifierFlux sends events to Flux notification-controller.
	NotifierFlux NotifierType = "flux"
)

// Notifier tells people about a Pipeline's promotions.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'slack' ? has(self.slack) : !has(self.slack)",message="slack is required when type is slack, and forbidden otherwise",fieldPath=".slack"
// +kubebuilder:validation:XValidation:rule="self.type == 'email' ? has(self.email) : !has(self.email)",message="email is required when type is email, and forbidden otherwise",fieldPath=".email"
// +kubebuilder:validation:XValidation:rule="self.type == 'webhook' ? has(self.webhook) : !has(self.webhook)",message="webhook is required when type is webhook, and forbidden otherwise",fieldPath=".webhook"
// +kubebuilder:validation:XValidation:rule="self.type == 'flux' || !has(self.flux)",message="flux may only be set when type is flux",fieldPath=".flux"
type Notifier struct {
	// name identifies the notifier in the Promotion's delivery records.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// type is slack, email, webhook or flux.
	// +required
	Type NotifierType `json:"type"`

	// slack configures a slack notifier; required for it.
	// +optional
	Slack *SlackNotifier `json:"slack,omitempty"`

	// email configures an email notifier; required for it.
	// +optional
	Email *EmailNotifier `json:"email,omitempty"`

	// webhook configures a webhook notifier; required for it.
	// +optional
	Webhook *WebhookNotifier `json:"webhook,omitempty"`

	// flux configures a flux notifier.
	// +optional
	Flux *FluxNotifier `json:"flux,omitempty"`

	// events selects what the notifier is told about. Defaults to every
	// promotion and hold event (Promotion* and Hold*); deployment events
	// (Deployment*) are sent only when listed.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	Events []NotifyEvent `json:"events,omitempty"`

	// mode is instant (one notice per event) or summary (one notice when a
	// promotion or a deployment completes, with its whole timeline).
	// Defaults to summary for email and to instant for the others.
	// +optional
	Mode NotifyMode `json:"mode,omitempty"`
}

// NotifyEvent names something a notifier can be told about.
// +kubebuilder:validation:Enum=PromotionCreated;PromotionWaitingApproval;PromotionPreviewChanged;PromotionRunning;PromotionWaveCompleted;PromotionPaused;PromotionResumed;PromotionRollingBack;PromotionSucceeded;PromotionFailed;PromotionAborted;HoldStarted;HoldReleased;DeploymentStarted;DeploymentHealthy;DeploymentFailed;DeploymentDegraded
type NotifyEvent string

// Notify events.
const (
	// EventPromotionCreated: a Promotion was created.
	EventPromotionCreated NotifyEvent = "PromotionCreated"
	// EventPromotionWaitingApproval: a Promotion waits for approval.
	EventPromotionWaitingApproval NotifyEvent = "PromotionWaitingApproval"
	// EventPromotionPreviewChanged: the preview computed again after the
	// approval, before the strategy acted (a previewed release moved to
	// another revision meanwhile), differs from the one the approvers saw,
	// or could not be computed again. The promotion proceeds; the notice
	// carries the new summary.
	EventPromotionPreviewChanged NotifyEvent = "PromotionPreviewChanged"
	// EventPromotionRunning: the strategy started (with its result, e.g. the
	// pull request, once known).
	EventPromotionRunning NotifyEvent = "PromotionRunning"
	// EventPromotionWaveCompleted: a wave of a rollout qualified; told once
	// per wave, in order (NotificationDelivery.occurrence is the wave's
	// number, from 1).
	EventPromotionWaveCompleted NotifyEvent = "PromotionWaveCompleted"
	// EventPromotionPaused: a rollout was paused, by a person (tugboat
	// rollout pause) or by its failure budget (onFailure Pause); told once
	// per pause.
	EventPromotionPaused NotifyEvent = "PromotionPaused"
	// EventPromotionResumed: a person resumed a paused rollout (tugboat
	// rollout resume); told once per resume.
	EventPromotionResumed NotifyEvent = "PromotionResumed"
	// EventPromotionRollingBack: a rollout spent its failure budget
	// (onFailure Rollback) and the targets it changed are being rolled
	// back; the outcome follows as PromotionFailed (reason RolloutFailed).
	EventPromotionRollingBack NotifyEvent = "PromotionRollingBack"
	// EventPromotionSucceeded: every target runs the version, healthy.
	EventPromotionSucceeded NotifyEvent = "PromotionSucceeded"
	// EventPromotionFailed: the promotion failed, with the reason.
	EventPromotionFailed NotifyEvent = "PromotionFailed"
	// EventPromotionAborted: the promotion was rejected or aborted.
	EventPromotionAborted NotifyEvent = "PromotionAborted"
	// EventHoldStarted: a rollback holds automatic promotion into an
	// environment.
	EventHoldStarted NotifyEvent = "HoldStarted"
	// EventHoldReleased: a rollback hold was released.
	EventHoldReleased NotifyEvent = "HoldReleased"
	// EventDeploymentStarted: a release started on a target (a new revision).
	EventDeploymentStarted NotifyEvent = "DeploymentStarted"
	// EventDeploymentHealthy: a target's revision completed, healthy.
	EventDeploymentHealthy NotifyEvent = "DeploymentHealthy"
	// EventDeploymentFailed: a target's revision failed.
	EventDeploymentFailed NotifyEvent = "DeploymentFailed"
	// EventDeploymentDegraded: a target's deployed revision stopped being
	// healthy.
	EventDeploymentDegraded NotifyEvent = "DeploymentDegraded"
)

// NotifyMode is when a notifier sends.
// +kubebuilder:validation:Enum=instant;summary
type NotifyMode string

// Notify modes.
const (
	// NotifyInstant sends one notice per event.
	NotifyInstant NotifyMode = "instant"
	// NotifySummary sends one notice when a promotion or a deployment
	// completes, listing its timeline.
	NotifySummary NotifyMode = "summary"
)

// SlackNotifier configures a slack notifier.
type SlackNotifier struct {
	// secretRef names a Secret in the Pipeline's namespace. Key "address" is
	// an incoming webhook URL; or key "token" is a bot token (xoxb-...), which
	// needs channel and lets later notices about a promotion go into the
	// first message's thread while that message is updated in place. The
	// optional key "signingSecret" (the Slack app's signing secret) adds
	// Approve/Reject buttons where the environment requires approval.
	// +required
	SecretRef LocalSecretReference `json:"secretRef"`

	// channel is the channel ID or name to post to: required with a bot
	// token; with an incoming webhook, the webhook's own channel is used.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	Channel string `json:"channel,omitempty"`
}

// EmailNotifier configures an email notifier.
type EmailNotifier struct {
	// server is the SMTP server as host:port.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=261
	// +kubebuilder:validation:Pattern=`^[^\s:/]+:[0-9]{1,5}$`
	Server string `json:"server"`

	// from is the sender address.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=254
	From string `json:"from"`

	// to are the recipient addresses.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MinLength=3
	// +kubebuilder:validation:items:MaxLength=254
	To []string `json:"to"`

	// secretRef names a Secret in the Pipeline's namespace with keys
	// "username" and "password" for SMTP authentication (PLAIN, or LOGIN when
	// the server offers only that), and optional key "ca.crt": the PEM
	// certificate authority of a server with a private certificate.
	// +optional
	SecretRef *LocalSecretReference `json:"secretRef,omitempty"`

	// insecureSkipTLS sends without STARTTLS: the mail, and the password if
	// any, cross the network in clear text. STARTTLS is required unless this
	// is true.
	// +optional
	InsecureSkipTLS bool `json:"insecureSkipTLS,omitempty"`
}

// WebhookNotifier configures a webhook notifier.
// +kubebuilder:validation:XValidation:rule="has(self.url) || has(self.secretRef)",message="url or secretRef (with the key address) is required"
type WebhookNotifier struct {
	// url receives the signed JSON POST. A URL that holds a secret (a token
	// in its path or query) belongs in the Secret's key "address" instead,
	// which wins over url.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url,omitempty"`

	// secretRef names a Secret in the Pipeline's namespace: key "key" is the
	// HMAC key the request is signed with (the wire protocol's scheme:
	// X-Tugboat-Timestamp and X-Tugboat-Signature over method, path,
	// timestamp and body; unsigned without it), and optional key "address"
	// the URL.
	// +optional
	SecretRef *LocalSecretReference `json:"secretRef,omitempty"`
}

// FluxNotifier configures a flux notifier.
type FluxNotifier struct {
	// address is the URL of Flux notification-controller's event endpoint.
	// Defaults to the hub's --notification-controller-address.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	Address string `json:"address,omitempty"`
}
