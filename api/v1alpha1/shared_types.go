package v1alpha1

// Limits shared by the types of this package. The CRD schemas repeat them as
// markers (markers cannot refer to constants); controllers use the constants to
// truncate or trim what they write so the API server never rejects a status.
const (
	// MaxRevisions is the most revisions a ReleaseHistory's status can hold.
	// The hub keeps fewer (DefaultRevisionLimit) unless told otherwise.
	MaxRevisions = 20

	// DefaultRevisionLimit is how many revisions the hub keeps per ReleaseHistory.
	DefaultRevisionLimit = 10

	// MaxEventsPerRevision is the most events one revision can hold.
	MaxEventsPerRevision = 40

	// MaxEventMessageLength is the longest event message stored, in characters.
	// The wire protocol allows longer messages; the hub truncates them.
	MaxEventMessageLength = 512

	// MaxEnvironments is the most environments a Pipeline can have.
	MaxEnvironments = 10

	// MaxTargets is the most targets an environment can have.
	MaxTargets = 20
)

// Health is a release's health, computed by the agent from the workloads the
// release owns with kstatus semantics.
// +kubebuilder:validation:Enum=InProgress;Current;Failed;Unknown
type Health string

const (
	// HealthInProgress: the release's workloads are still rolling out.
	HealthInProgress Health = "InProgress"
	// HealthCurrent: every workload reached its desired state.
	HealthCurrent Health = "Current"
	// HealthFailed: a workload failed (e.g. a Job failed, a rollout exceeded its
	// progress deadline).
	HealthFailed Health = "Failed"
	// HealthUnknown: the agent cannot tell (yet).
	HealthUnknown Health = "Unknown"
)

// ReleaseStatus is a Helm release's status, as Helm stores it in the release.
// +kubebuilder:validation:Enum=unknown;deployed;uninstalled;superseded;failed;uninstalling;pending-install;pending-upgrade;pending-rollback
type ReleaseStatus string

// The statuses Helm v3 records (helm.sh/helm/v3/pkg/release.Status).
const (
	ReleaseStatusUnknown         ReleaseStatus = "unknown"
	ReleaseStatusDeployed        ReleaseStatus = "deployed"
	ReleaseStatusUninstalled     ReleaseStatus = "uninstalled"
	ReleaseStatusSuperseded      ReleaseStatus = "superseded"
	ReleaseStatusFailed          ReleaseStatus = "failed"
	ReleaseStatusUninstalling    ReleaseStatus = "uninstalling"
	ReleaseStatusPendingInstall  ReleaseStatus = "pending-install"
	ReleaseStatusPendingUpgrade  ReleaseStatus = "pending-upgrade"
	ReleaseStatusPendingRollback ReleaseStatus = "pending-rollback"
)

// LocalSecretReference names a Secret in the referring object's namespace.
type LocalSecretReference struct {
	// name of the Secret, in the referring object's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// SecretKeyReference names one key of a Secret in the referring object's
// namespace.
type SecretKeyReference struct {
	// name of the Secret, in the referring object's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// key in the Secret's data. Defaults to "value", the key Cluster API uses
	// for kubeconfig Secrets.
	// +optional
	// +kubebuilder:default=value
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// ObjectReference names an object of a known kind, optionally in another
// namespace.
type ObjectReference struct {
	// namespace of the object. Defaults to the namespace of the object that
	// holds the reference (for a HelmRelease reference on a spoke: the release's
	// namespace).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}
