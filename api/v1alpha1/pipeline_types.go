package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PipelineSpec is an ordered list of environments a release's chart version is
// promoted through, how, and who is told.
// +kubebuilder:validation:XValidation:rule="self.environments.all(e, !has(e.rollout) || !has(e.rollout.onFailure) || e.rollout.onFailure != 'Rollback' || (has(e.promotion) ? e.promotion.type : self.promotion.type) in ['helm', 'kubernetes', 'pullRequest'])",message="rollout.onFailure Rollback needs the environment's strategy to be helm, kubernetes or pullRequest: tugboat cannot roll back what a webhook or notification strategy's external actor changed (use onFailure Pause)",fieldPath=".environments"
// +kubebuilder:validation:XValidation:rule="self.environments.all(e, !has(e.steps) || !has(e.steps.post) || (has(e.promotion) ? e.promotion.type : self.promotion.type) == 'helm' || e.steps.post.all(s, s.type != 'helmTest'))",message="a helmTest step needs the environment's strategy to be helm: the destination's agents run the tests on the release they installed",fieldPath=".environments"
type PipelineSpec struct {
	// release is the Helm release name the Pipeline promotes; a target may
	// override it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=53
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Release string `json:"release"`

	// environments in promotion order: a version proven in environments[i] is
	// promoted into environments[i+1]. Names are unique.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	Environments []Environment `json:"environments"`

	// promotion is the default strategy, used for every environment that does
	// not set its own.
	// +required
	Promotion PromotionStrategy `json:"promotion"`

	// notify lists who is told about promotions. Names are unique.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	Notify []Notifier `json:"notify,omitempty"`

	// secretRef names a Secret in the Pipeline's namespace that authenticates
	// external CI calling the hub for this Pipeline (promotions, approvals):
	// key "token" for a bearer token, or key "key" for an HMAC key.
	// +optional
	SecretRef *LocalSecretReference `json:"secretRef,omitempty"`

	// approvalSecretRef names a Secret in the Pipeline's namespace holding
	// the CI approval credentials: each key is a credential's name, its value
	// the bearer token (or HMAC key) of that credential. They are separate
	// from secretRef: the token that requests promotions cannot approve them.
	// gates.approvers.ciCredentials says which may approve which environment.
	// +optional
	ApprovalSecretRef *LocalSecretReference `json:"approvalSecretRef,omitempty"`

	// timeout bounds one Promotion, from start to the destination's targets
	// reporting the version healthy. Defaults to 30m.
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="timeout must be positive"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// historyLimit is how many finished Promotions of this Pipeline are kept.
	// Defaults to 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	HistoryLimit *int32 `json:"historyLimit,omitempty"`

	// suspend stops new Promotions of this Pipeline; running ones continue.
	// Defaults to false.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// Environment is one stage of a Pipeline.
type Environment struct {
	// name of the environment, a DNS label (e.g. staging).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// CEL spells the field namespace as __namespace__: namespace is a reserved
	// word in CEL.

	// targets are the releases that make up the environment: a version is in
	// the environment when every target runs it. A target names one spoke
	// (spoke) or every Spoke of the Pipeline's namespace whose labels match
	// (spokeSelector); the controller expands selectors each time it
	// reconciles, so a Spoke labeled to match joins the environment
	// without an edit of the Pipeline. Named targets are unique by spoke,
	// namespace and release; a spoke both named and selected, or selected
	// twice, counts once. At most 100 targets after expansion.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.spoke) || self.exists_one(u, has(u.spoke) && u.spoke == t.spoke && u.__namespace__ == t.__namespace__ && (has(u.release) ? u.release : '') == (has(t.release) ? t.release : '')))",message="targets must be unique by spoke, namespace and release"
	Targets []Target `json:"targets"`

	// gates must pass before a version proven here is promoted onwards, or (for
	// requireApproval) before a version is promoted into this environment.
	// +optional
	// +kubebuilder:default={}
	Gates Gates `json:"gates,omitempty"`

	// promotion overrides the Pipeline's default strategy for promotions into
	// this environment.
	// +optional
	Promotion *PromotionStrategy `json:"promotion,omitempty"`

	// rollout makes a promotion into this environment reach its targets in
	// waves: a canary, then counts or percentages of the targets, each with
	// a soak, under one failure budget (see Rollout). Without it, every
	// target is acted on at once, as one wave.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`

	// steps are lifecycle checks of every promotion into this environment:
	// pre steps before the strategy acts, post steps after the targets
	// verified and before the Promotion succeeds (see Steps).
	// +optional
	Steps *Steps `json:"steps,omitempty"`
}

// Target is one Helm release on one spoke, or on every spoke a label
// selector matches.
// +kubebuilder:validation:XValidation:rule="has(self.spoke) != has(self.spokeSelector)",message="a target names exactly one of spoke and spokeSelector"
// +kubebuilder:validation:XValidation:rule="!has(self.spokeSelector) || (has(self.spokeSelector.matchLabels) && size(self.spokeSelector.matchLabels) > 0) || (has(self.spokeSelector.matchExpressions) && size(self.spokeSelector.matchExpressions) > 0)",message="spokeSelector must not be empty: it would select every spoke of the namespace",fieldPath=".spokeSelector"
type Target struct {
	// spoke is the name of a Spoke in the Pipeline's namespace. Exactly one
	// of spoke and spokeSelector is set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Spoke string `json:"spoke,omitempty"`

	// spokeSelector selects Spokes of the Pipeline's namespace by label
	// (e.g. matchLabels: {env: production}): the target stands for the same
	// release (namespace, release, helmRelease) on every Spoke it matches,
	// in the order of their names. A Spoke that is created, relabeled or
	// deleted joins or leaves the environment at once. While it matches no
	// Spoke the environment waits, and the Pipeline's Ready condition says
	// so. Exactly one of spoke and spokeSelector is set; an empty selector
	// is refused.
	// +optional
	SpokeSelector *metav1.LabelSelector `json:"spokeSelector,omitempty"`

	// namespace is the release's namespace on the spoke.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// release overrides spec.release for this target.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=53
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Release string `json:"release,omitempty"`

	// helmRelease names the Flux HelmRelease on the spoke that manages the
	// release (namespace defaults to the target's namespace). Strategies that
	// edit HelmReleases need it.
	// +optional
	HelmRelease *ObjectReference `json:"helmRelease,omitempty"`
}

// Gates are the checks between environments.
// +kubebuilder:validation:XValidation:rule="!has(self.approvals) || (has(self.requireApproval) && self.requireApproval)",message="approvals needs requireApproval",fieldPath=".approvals"
// +kubebuilder:validation:XValidation:rule="!has(self.approvers) || (has(self.requireApproval) && self.requireApproval)",message="approvers needs requireApproval",fieldPath=".approvers"
// +kubebuilder:validation:XValidation:rule="!has(self.reapproveOnChange) || !self.reapproveOnChange || (has(self.requireApproval) && self.requireApproval)",message="reapproveOnChange needs requireApproval",fieldPath=".reapproveOnChange"
type Gates struct {
	// soakTime is how long every target must run a version, healthy, before it
	// is promoted onwards. Defaults to 0 (promote as soon as healthy).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="soakTime must not be negative"
	SoakTime *metav1.Duration `json:"soakTime,omitempty"`

	// requireApproval makes a promotion into this environment wait for a
	// person's approval. Defaults to false.
	// +optional
	RequireApproval bool `json:"requireApproval,omitempty"`

	// approvals is how many distinct people must approve a promotion into
	// this environment (four eyes: 2). Defaults to 1. The requester of a
	// manual promotion never counts, through any identity approvers.people
	// declares to be theirs. Needs requireApproval.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	Approvals *int32 `json:"approvals,omitempty"`

	// approvers say which Slack users and CI approval credentials may approve
	// a promotion into this environment, and which Kubernetes user each of
	// them is (people), so that approvals counts people. Kubernetes users
	// approve when RBAC grants them the verb "approve" on the resource
	// "environments" of group tugboat.dev, named "<pipeline>/<environment>"
	// or "<pipeline>/*" (as CertificateSigningRequest approval uses
	// signers); see docs/approvals.md.
	// +optional
	Approvers *Approvers `json:"approvers,omitempty"`

	// reapproveOnChange asks for approval again when a promotion's preview
	// changed after the approval: a previewed release moved, the hub
	// computed the preview again before the strategy acted, and the change
	// differs from the one approved (or could not be computed again). The
	// votes cast before no longer count (status.preview.approvalsReset),
	// the approvers are told with the new preview (the notice
	// PromotionPreviewChanged, the Event ApprovalAskedAgain), and the
	// Promotion waits for approval. Defaults to false: the approvers are
	// told, and the promotion proceeds. Needs requireApproval; applies to
	// promotions with a preview (the helm strategy).
	// +optional
	ReapproveOnChange bool `json:"reapproveOnChange,omitempty"`

	// requireHealthy requires every target to be healthy (kstatus Current)
	// before a version is promoted onwards. Defaults to true.
	// +optional
	// +kubebuilder:default=true
	RequireHealthy *bool `json:"requireHealthy,omitempty"`
}

// Approvers are the identities outside Kubernetes that may approve, and
// the people they belong to.
// +kubebuilder:validation:XValidation:rule="!has(self.people) || self.people.all(p, !has(p.slackUsers) || p.slackUsers.all(s, has(self.slackUsers) && s in self.slackUsers))",message="people[].slackUsers must also be listed in slackUsers: people say who an approver is, slackUsers who may approve",fieldPath=".people"
// +kubebuilder:validation:XValidation:rule="!has(self.people) || self.people.all(p, !has(p.ciCredentials) || p.ciCredentials.all(c, has(self.ciCredentials) && c in self.ciCredentials))",message="people[].ciCredentials must also be listed in ciCredentials: people say who an approver is, ciCredentials who may approve",fieldPath=".people"
// +kubebuilder:validation:XValidation:rule="!has(self.people) || self.people.all(p, !has(p.slackUsers) || p.slackUsers.all(s, self.people.exists_one(q, has(q.slackUsers) && s in q.slackUsers)))",message="a Slack user belongs to one person: list it under one entry of people only",fieldPath=".people"
// +kubebuilder:validation:XValidation:rule="!has(self.people) || self.people.all(p, !has(p.ciCredentials) || p.ciCredentials.all(c, self.people.exists_one(q, has(q.ciCredentials) && c in q.ciCredentials)))",message="a CI credential belongs to one person: list it under one entry of people only",fieldPath=".people"
type Approvers struct {
	// slackUsers are Slack user IDs (e.g. U024BE7LH) whose clicks on Approve
	// and Reject count. Without any, the Slack buttons are not shown.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:Pattern=`^[UW][A-Z0-9]{2,20}$`
	SlackUsers []string `json:"slackUsers,omitempty"`

	// ciCredentials are names of approval credentials: keys of the Pipeline's
	// approvalSecretRef Secret. A CI approval signed or authenticated with
	// one of them is recorded under its name.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:Pattern=`^[-._a-zA-Z0-9]{1,63}$`
	CICredentials []string `json:"ciCredentials,omitempty"`

	// people say which Kubernetes user a Slack user or CI credential is, so
	// that the hub counts people, not identities: one person's votes count
	// once, whichever identities they come through, and the requester of a
	// manual promotion may approve it through none of them. A Slack user
	// or CI credential not listed here counts as a person of its own.
	// Listing an identity here does not let it approve: slackUsers and
	// ciCredentials do.
	// +optional
	// +listType=map
	// +listMapKey=user
	// +kubebuilder:validation:MaxItems=20
	People []ApproverIdentity `json:"people,omitempty"`
}

// ApproverIdentity names the Slack users and CI approval credentials of
// one Kubernetes user.
// +kubebuilder:validation:XValidation:rule="(has(self.slackUsers) && size(self.slackUsers) > 0) || (has(self.ciCredentials) && size(self.ciCredentials) > 0)",message="a person needs at least one entry in slackUsers or ciCredentials"
type ApproverIdentity struct {
	// user is the Kubernetes user name, as the hub cluster's API server
	// authenticates it (what kubectl auth whoami shows).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	User string `json:"user"`

	// slackUsers are the user's Slack user IDs.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:items:Pattern=`^[UW][A-Z0-9]{2,20}$`
	SlackUsers []string `json:"slackUsers,omitempty"`

	// ciCredentials are the names of the user's CI approval credentials.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:items:Pattern=`^[-._a-zA-Z0-9]{1,63}$`
	CICredentials []string `json:"ciCredentials,omitempty"`
}

// PipelineStatus is where each environment stands.
type PipelineStatus struct {
	// observedGeneration is the metadata.generation the controller last
	// reconciled to a steady state.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// environments holds one entry per environment, in spec order.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	Environments []EnvironmentStatus `json:"environments,omitempty"`

	// heldEnvironments are environments into and out of which automatic
	// promotion is held because a person rolled back or uninstalled one of
	// their targets; only `tugboat promote --resume` releases the hold.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	HeldEnvironments []HeldEnvironment `json:"heldEnvironments,omitempty"`

	// notifications records the hold notices (HoldStarted, HoldReleased) of
	// each notifier, per environment, so a restart neither loses nor repeats
	// one. The hub's notifier writes it.
	// +optional
	// +listType=map
	// +listMapKey=notifier
	// +listMapKey=event
	// +listMapKey=environment
	// +kubebuilder:validation:MaxItems=200
	Notifications []HoldNotification `json:"notifications,omitempty"`

	// notifiers says, per notifier of spec.notify, when it last delivered
	// and last failed; the Notified condition is False while any notifier's
	// last attempt failed.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	Notifiers []NotifierStatus `json:"notifiers,omitempty"`
}

// NotifierStatus is how one notifier fares.
type NotifierStatus struct {
	// name of the notifier in spec.notify.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// lastDeliveredAt is when it last delivered a notice.
	// +optional
	LastDeliveredAt *metav1.Time `json:"lastDeliveredAt,omitempty"`

	// lastFailedAt is when a delivery last failed.
	// +optional
	LastFailedAt *metav1.Time `json:"lastFailedAt,omitempty"`

	// lastError is the error of the last failed delivery (never a URL or a
	// token).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LastError string `json:"lastError,omitempty"`
}

// HoldNotification is one hold notice of one notifier.
type HoldNotification struct {
	// notifier is the name of the notifier in spec.notify.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Notifier string `json:"notifier"`

	// event is HoldStarted or HoldReleased.
	// +required
	Event NotifyEvent `json:"event"`

	// environment is the held environment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Environment string `json:"environment"`

	// since identifies the hold: its heldEnvironments[].since.
	// +required
	Since metav1.Time `json:"since"`

	// DeliveryState is where the delivery stands, inlined.
	DeliveryState `json:",inline"`
}

// EnvironmentStatus is where one environment stands.
type EnvironmentStatus struct {
	// name of the environment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// versions are the distinct chart versions the targets run, newest
	// first (at most 100); one entry when the environment is converged.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=64
	Versions []string `json:"versions,omitempty"`

	// healthySince is when every target started running versions[0], healthy;
	// absent while the environment is not converged or not healthy. The soak
	// time counts from here.
	// +optional
	HealthySince *metav1.Time `json:"healthySince,omitempty"`

	// activePromotion is the name of the Promotion into this environment that
	// has not finished, if any.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ActivePromotion string `json:"activePromotion,omitempty"`

	// targets holds one entry per target, in spec order (a spokeSelector
	// target gives one entry per Spoke it matches, sorted by name), at
	// most MaxTargetStatuses: with more targets, those that do not run a
	// release deployed and Current come first, and targetCount says how
	// many there are. An environment may have up to 5,000 targets.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Targets []TargetStatus `json:"targets,omitempty"`

	// targetCount is how many targets the environment has, its
	// spokeSelectors expanded (targets lists at most 100 of them).
	// +optional
	// +kubebuilder:validation:Minimum=0
	TargetCount int32 `json:"targetCount,omitempty"`

	// healthyTargets is how many of them report health Current.
	// +optional
	// +kubebuilder:validation:Minimum=0
	HealthyTargets int32 `json:"healthyTargets,omitempty"`
}

// MaxTargetStatuses bounds a Pipeline's status.environments[].targets.
const MaxTargetStatuses = 100

// TargetStatus is what the target's ReleaseHistory reports.
type TargetStatus struct {
	// spoke is the target's Spoke.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Spoke string `json:"spoke"`

	// selector is the target's spokeSelector (as kubectl writes a label
	// selector, e.g. "env=production") when the Spoke was selected by label;
	// empty for a target that names its spoke.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Selector string `json:"selector,omitempty"`

	// namespace is the release's namespace on the spoke.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// release is the release's name (spec.release unless overridden).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=53
	Release string `json:"release"`

	// revision is the release's current Helm revision; 0 when not reported.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Revision int32 `json:"revision,omitempty"`

	// version is the chart version of the current revision.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`

	// health is the release's health.
	// +optional
	Health Health `json:"health,omitempty"`

	// lastDeployed is when the current revision was deployed.
	// +optional
	LastDeployed *metav1.Time `json:"lastDeployed,omitempty"`

	// absent is true when the target's Spoke is Ready and reports no such
	// release, or the release was uninstalled: a promotion into the
	// environment installs it (helm strategy) or fails to find it.
	// +optional
	Absent bool `json:"absent,omitempty"`
}

// HoldReason says what a person did, or what failed, that holds an
// environment.
// +kubebuilder:validation:Enum=Rollback;Uninstall;RolloutFailed
type HoldReason string

const (
	// HoldRollback: a target was rolled back to an older chart version.
	HoldRollback HoldReason = "Rollback"
	// HoldUninstall: a target's release was uninstalled.
	HoldUninstall HoldReason = "Uninstall"
	// HoldRolloutFailed: a rollout into the environment spent its failure
	// budget (or one of its post steps failed) and was rolled back
	// automatically (onFailure Rollback).
	HoldRolloutFailed HoldReason = "RolloutFailed"
)

// HeldAfterUninstallReason: a person uninstalled a target's release;
// automatic promotion into and out of its environment is held until someone
// resumes it.
const HeldAfterUninstallReason ConditionReason = "HeldAfterUninstall"

// HeldEnvironment records a hold: automatic promotion into and out of the
// environment stops until someone resumes it (`tugboat promote --resume`).
type HeldEnvironment struct {
	// name of the held environment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// reason is what was seen: Rollback (a target runs an older chart version
	// than before), Uninstall (a target's release was uninstalled) or
	// RolloutFailed (a rollout spent its failure budget, or one of its post
	// steps failed, and was rolled back automatically). Empty in holds recorded before this field existed,
	// which are rollbacks.
	// +optional
	Reason HoldReason `json:"reason,omitempty"`

	// since is when the rollback, uninstall or failed rollout happened; a resume dated at or
	// after it releases the hold.
	// +required
	Since metav1.Time `json:"since"`

	// version is the chart version the environment was rolled back to (for
	// RolloutFailed: the version whose rollout failed).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`

	// message says what was seen, e.g. which target was rolled back from which
	// revision.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// Pipeline promotes a Helm release's chart version from one environment to the
// next once it is proven healthy there. Its name is at most 63 characters: it
// is part of its Promotions' names and labels.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pl,categories=tugboat
// +kubebuilder:printcolumn:name="Release",type=string,JSONPath=`.spec.release`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Notified",type=string,JSONPath=`.status.conditions[?(@.type=="Notified")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters"
type Pipeline struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the environments, gates, strategy and notifiers.
	// +required
	Spec PipelineSpec `json:"spec"`

	// status is where each environment stands.
	// +optional
	Status PipelineStatus `json:"status,omitempty"`
}

// PipelineList is a list of Pipelines.
//
// +kubebuilder:object:root=true
type PipelineList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Pipelines.
	Items []Pipeline `json:"items"`
}
