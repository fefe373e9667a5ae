package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys of the Secret that spec.keySecretRef names.
const (
	// SpokeKeySecretKey holds the HMAC key the spoke's agent signs with, and the
	// key the hub verifies with first. The hub's receiver refuses keys shorter
	// than 32 bytes; the hub generates 32 random bytes, hex-encoded.
	SpokeKeySecretKey = "key"

	// SpokePreviousKeySecretKey optionally holds the key being rotated out. While
	// it is present the hub accepts signatures made with either key, so the
	// agent can switch keys without a gap. Remove it once every agent signs
	// with the new key.
	SpokePreviousKeySecretKey = "previousKey"

	// SpokeFluxKeySecretKey optionally holds the key of the spoke's Flux
	// notification-controller Provider (type generic-hmac): the value of key
	// "token" in the Provider's Secret on the spoke. It must differ from the
	// agent's key, so that whoever can read Flux's Secret on the spoke cannot
	// act as its agent; the hub never accepts the agent's key on the Flux
	// endpoint, and refuses every Flux request of a spoke without this key.
	// At least 32 bytes.
	SpokeFluxKeySecretKey = "fluxKey"

	// SpokePreviousFluxKeySecretKey optionally holds the Flux key being
	// rotated out, accepted alongside fluxKey while present.
	SpokePreviousFluxKeySecretKey = "previousFluxKey"

	// DefaultKubeConfigSecretKey is the key of a kubeconfig Secret when none is
	// given; Cluster API writes the kubeconfig of Cluster <name> to Secret
	// <name>-kubeconfig under this key.
	DefaultKubeConfigSecretKey = "value"
)

// SpokeSpec describes a leaf cluster and how the hub authenticates its agent.
// +kubebuilder:validation:XValidation:rule="!(has(self.clusterRef) && has(self.kubeConfigSecretRef))",message="clusterRef and kubeConfigSecretRef are mutually exclusive",fieldPath=".kubeConfigSecretRef"
// +kubebuilder:validation:XValidation:rule="!has(self.agentBootstrap) || has(self.clusterRef) || has(self.kubeConfigSecretRef)",message="agentBootstrap needs clusterRef or kubeConfigSecretRef: the hub installs the agent through that kubeconfig",fieldPath=".agentBootstrap"
type SpokeSpec struct {
	// keySecretRef names the Secret, in the Spoke's namespace, that holds the
	// HMAC key the spoke's agent signs its requests with. The Secret holds the
	// current key under "key" and, during a rotation, the previous one under
	// "previousKey": the hub accepts either while both are present. To rotate,
	// move "key" to "previousKey", write the new "key", roll the agent, then
	// delete "previousKey" and set the annotation tugboat.dev/keys-updated-at
	// on the Spoke, so the hub refuses the old key at once rather than within
	// its --spoke-key-cache-ttl (`tugboat spoke rotate-key` does all of it). A spoke fed by Flux notification-controller holds
	// its Provider's own key under "fluxKey" (and "previousFluxKey" during a
	// rotation). Keys are at least 32 bytes.
	// +required
	KeySecretRef LocalSecretReference `json:"keySecretRef"`

	// clusterRef names a Cluster API Cluster in the Spoke's namespace. When
	// set, the hub reaches the spoke's API server (for strategies that need
	// it, such as kubernetes) through the kubeconfig in Secret
	// <cluster>-kubeconfig, key "value", in the Spoke's namespace. Its
	// namespace must be unset: a Spoke only reaches clusters and Secrets in
	// its own namespace (the hub refuses any other too). Mutually exclusive
	// with kubeConfigSecretRef.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.__namespace__)",message="clusterRef.namespace must be unset: a Spoke only reaches clusters in its own namespace"
	ClusterRef *ObjectReference `json:"clusterRef,omitempty"`

	// kubeConfigSecretRef names a Secret, in the Spoke's namespace, holding a
	// kubeconfig for the spoke's API server. key defaults to "value".
	// Mutually exclusive with clusterRef. Leave both unset when no strategy
	// needs the hub to reach the spoke (the agent pulls helm actions itself).
	// +optional
	KubeConfigSecretRef *SecretKeyReference `json:"kubeConfigSecretRef,omitempty"`

	// suspend tells the hub to ignore the spoke: its authenticated requests
	// (agent and Flux) are answered 503 with a body saying the spoke is
	// suspended, its releases are not promoted into or from, and its
	// agentBootstrap installs and upgrades nothing until it is resumed.
	// Defaults to false.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// agentBootstrap, when set, has the hub install the tugboat agent (its Helm
	// chart, through the Helm SDK) into the spoke through the kubeconfig of
	// clusterRef or kubeConfigSecretRef, with the spoke's key, and upgrade it
	// when the hub's version moves. For a Cluster API Cluster it waits until
	// the control plane is initialized. Progress and errors show in the
	// condition AgentInstalled. Unset (the default), the hub never writes to
	// the spoke. A SpokeClass sets it on the Spokes it creates. The hub copies
	// only a key Secret it generated for this Spoke (labeled
	// tugboat.dev/spoke with its name and controlled by it), and installs
	// only the values its operator allows; otherwise the Spoke is Stalled and
	// nothing is installed.
	// +optional
	AgentBootstrap *AgentBootstrap `json:"agentBootstrap,omitempty"`
}

// AgentBootstrap is how the hub installs a spoke's agent.
type AgentBootstrap struct {
	// hubURL is the hub's receiver URL as the spoke reaches it (https://...).
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https://[^\s/?#]+(/[^\s?#]*)?$`
	HubURL string `json:"hubURL"`

	// caSecretRef names a Secret, in the Spoke's namespace, whose "ca.crt" the
	// agent trusts for the hub's certificate (copied to the spoke, e.g. the
	// hub chart's self-signed tugboat-hub-receiver-tls). It must hold PEM
	// certificates only (public data): anything else is refused. Unset: the
	// system roots.
	// +optional
	CASecretRef *LocalSecretReference `json:"caSecretRef,omitempty"`

	// values are more values of the agent's chart (config/charts/tugboat-agent),
	// e.g. {"watchNamespaces": ["apps"]}, limited to those the hub's operator
	// allows (the hub's --bootstrap-allowed-values; by default replicas,
	// resources, logLevel, watchNamespaces, webhook.enabled, backfill.enabled,
	// backfill.namespaces and networkPolicy, and no namespace list naming
	// kube-system, kube-node-lease or kube-public): with any other the Spoke
	// is Stalled (reason ValuesNotAllowed) and nothing is installed. spoke,
	// hub.url, hub.caSecretName and the image tag are set by the hub.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Values *apiextensionsv1.JSON `json:"values,omitempty"`
}

// SpokeStatus is what the hub last heard from the spoke's agent.
type SpokeStatus struct {
	// observedGeneration is the metadata.generation of the spec the hub last
	// reconciled.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is True while the agent's heartbeats (state snapshots)
	// arrive, and Unknown once none arrived within the heartbeat timeout. For
	// an agentless spoke (a Flux key and no agent heartbeat yet) Ready is True
	// once a Flux event arrived, else Unknown with reason NoEventSinceSetup.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// lastSeen is when the hub last recorded a heartbeat (an accepted state
	// snapshot) of the agent: written when the Spoke turns Ready or is lost,
	// when the agent's versions, release count or signing key change, and
	// otherwise at most every --spoke-heartbeat-refresh of the hub (5m).
	// Ready follows every heartbeat, through the hub replicas' heartbeat
	// digests, so a Ready Spoke's lastSeen may be minutes old.
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`

	// lastSnapshotTakenAt is the takenAt (on the spoke's clock) of the newest
	// state snapshot the hub recorded. The hub refuses a snapshot taken at or
	// before it (409), so a replayed old snapshot cannot undo newer state,
	// across hub restarts too.
	// +optional
	LastSnapshotTakenAt *metav1.MicroTime `json:"lastSnapshotTakenAt,omitempty"`

	// lastFluxEvent is the last event the hub accepted from the spoke's Flux
	// notification-controller (POST /v1/flux/{spoke}): the liveness of an
	// agentless spoke, which sends no heartbeats.
	// +optional
	LastFluxEvent *FluxEventRecord `json:"lastFluxEvent,omitempty"`

	// signingKeyID identifies the key that signed the agent's last heartbeat:
	// the first 16 hex characters of the key's SHA-256 (never the key). During
	// a key rotation (`tugboat spoke rotate-key`) it tells when the agent signs
	// with the new key, so the previous one can be removed without refusing a
	// request.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	SigningKeyID string `json:"signingKeyID,omitempty"`

	// agentVersion is the version of the tugboat agent, as it reports it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	AgentVersion string `json:"agentVersion,omitempty"`

	// agentProtocolVersion is the agent↔hub wire protocol version the agent
	// reported in its last state snapshot (0: an agent older than the field).
	// Below the hub's, the Spoke is AgentOutdated.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AgentProtocolVersion int32 `json:"agentProtocolVersion,omitempty"`

	// kubernetesVersion is the spoke API server's version, as the agent reports
	// it (e.g. v1.36.3).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// releaseCount is how many Helm releases the agent reported in its last
	// state snapshot.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReleaseCount int32 `json:"releaseCount,omitempty"`

	// agentBootstrap is what the hub last installed into the spoke
	// (spec.agentBootstrap), when it did.
	// +optional
	AgentBootstrap *AgentBootstrapStatus `json:"agentBootstrap,omitempty"`
}

// AgentBootstrapStatus records the hub's last install of a spoke's agent.
type AgentBootstrapStatus struct {
	// version is the tugboat version (the image tag) installed.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`

	// chartVersion is the version of the agent's chart installed.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ChartVersion string `json:"chartVersion,omitempty"`

	// revision is the Helm release revision of the install.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Revision int32 `json:"revision,omitempty"`

	// observedGeneration is the Spoke generation (spec.agentBootstrap) installed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// installedAt is when the hub last installed or upgraded the agent.
	// +optional
	InstalledAt *metav1.Time `json:"installedAt,omitempty"`
}

// FluxSetupAnnotation is set on a Spoke by `tugboat spoke add --flux` to
// when its Flux key was set up (RFC 3339); the Spoke's Ready condition says
// NoEventSinceSetup until the first Flux event arrives.
const FluxSetupAnnotation = "tugboat.dev/flux-setup-at"

// KeysUpdatedAtAnnotation is set on a Spoke, to the time (RFC 3339, UTC,
// nanoseconds), by whatever writes its key Secret on the hub: the Spoke
// controller when it generates a key, `tugboat spoke rotate-key` and
// `tugboat spoke add --flux`. Every hub replica watches Spokes, so a change
// of its value tells each one, within milliseconds, to re-read the keys
// (a removed previous key is refused at once) and the Spoke controller to
// check the Secret again. Only a change of the value matters, not the time
// it holds. Set it after a hand edit of the Secret to have it take effect at
// once:
//
//	kubectl -n NS annotate spoke NAME --overwrite tugboat.dev/keys-updated-at="$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)"
const KeysUpdatedAtAnnotation = "tugboat.dev/keys-updated-at"

// FluxEventRecord is what the hub keeps of a Flux event.
type FluxEventRecord struct {
	// receivedAt is when the hub accepted the event.
	// +required
	ReceivedAt metav1.Time `json:"receivedAt"`

	// reason is the event's reason, e.g. UpgradeSucceeded.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`

	// object is the event's involved object, <Kind>/<namespace>/<name>.
	// +optional
	// +kubebuilder:validation:MaxLength=600
	Object string `json:"object,omitempty"`

	// keyID identifies the Flux key that signed the event: the first 16 hex
	// characters of the key's SHA-256 (never the key). `tugboat spoke
	// rotate-key --flux` waits for an event signed with the new key.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	KeyID string `json:"keyID,omitempty"`
}

// Spoke is a leaf cluster whose tugboat agent reports Helm releases to the hub.
// Its name is a DNS label (at most 63 characters, no dots): it appears in URL
// paths and as the first dot-separated part of ReleaseHistory names.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=spk,categories=tugboat
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.status.agentVersion`
// +kubebuilder:printcolumn:name="Kubernetes",type=string,JSONPath=`.status.kubernetesVersion`
// +kubebuilder:printcolumn:name="Releases",type=integer,JSONPath=`.status.releaseCount`
// +kubebuilder:printcolumn:name="Last Seen",type=date,JSONPath=`.status.lastSeen`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && !self.metadata.name.contains('.')",message="metadata.name must be a DNS label: at most 63 characters, no dots"
type Spoke struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the spoke and its agent's credentials.
	// +required
	Spec SpokeSpec `json:"spec"`

	// status is what the hub last heard from the spoke's agent.
	// +optional
	Status SpokeStatus `json:"status,omitempty"`
}

// SpokeList is a list of Spokes.
//
// +kubebuilder:object:root=true
type SpokeList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Spokes.
	Items []Spoke `json:"items"`
}
