//go:build !agentonly

package app

// findingCode names one kind of `tugboat doctor` finding. It is stable:
// scripts (-o json/yaml), tests and docs/troubleshooting.md name findings
// by it, so a code is never reused for another meaning.
type findingCode string

// connection: doctor could not talk to the hub's API server.
const (
	codeConnectionUnauthorized findingCode = "connection-unauthorized"
	codeConnectionForbidden    findingCode = "connection-forbidden"
	codeConnectionUnreachable  findingCode = "connection-unreachable"
)

// Reads any check makes: a list or get that failed.
const (
	codeReadForbidden findingCode = "read-forbidden"
	codeReadFailed    findingCode = "read-failed"
)

// crds: the tugboat.dev CustomResourceDefinitions.
const (
	codeCRDsOK              findingCode = "crds-ok"
	codeCRDsDiscoveryFailed findingCode = "crds-discovery-failed"
	codeCRDsNewerVersion    findingCode = "crds-newer-version-preferred"
	codeCRDMissing          findingCode = "crd-missing"
	codeCRDUnreadable       findingCode = "crd-unreadable"
	codeCRDReadFailed       findingCode = "crd-read-failed"
	codeCRDNotEstablished   findingCode = "crd-not-established"
	codeCRDVersionNotServed findingCode = "crd-version-not-served"
	codeCRDNotDiscoveredYet findingCode = "crd-not-discovered-yet"
)

// hub: the hub's receiver and controllers, judged from what they write.
const (
	codeHubNoSpokes          findingCode = "hub-no-spokes"
	codeHubFluxEventsOK      findingCode = "hub-flux-events-ok"
	codeHubNeverReported     findingCode = "hub-never-reported"
	codeHubHeartbeatsStale   findingCode = "hub-heartbeats-stale"
	codeHubHeartbeatsOK      findingCode = "hub-heartbeats-ok"
	codeHubControllersDown   findingCode = "hub-controllers-not-reconciling"
	codeHubControllersBehind findingCode = "hub-controllers-behind"
	codeHubControllersOK     findingCode = "hub-controllers-ok"
)

// spoke: one or more findings per Spoke.
const (
	codeSpokeSuspended          findingCode = "spoke-suspended"
	codeSpokeUnreconciled       findingCode = "spoke-unreconciled"
	codeSpokeJustChanged        findingCode = "spoke-just-changed"
	codeSpokeAgentlessReady     findingCode = "spoke-agentless-ready"
	codeSpokeAgentlessNotReady  findingCode = "spoke-agentless-not-ready"
	codeSpokeReady              findingCode = "spoke-ready"
	codeSpokeNoReleases         findingCode = "spoke-no-releases"
	codeSpokeDuplicateName      findingCode = "spoke-duplicate-name"
	codeSpokeInvalidKey         findingCode = "spoke-invalid-key"
	codeSpokeNotReady           findingCode = "spoke-not-ready"
	codeSpokeAgentNotSeen       findingCode = "spoke-agent-not-seen"
	codeSpokeVersionSkew        findingCode = "spoke-version-skew"
	codeSpokeBootstrapRefused   findingCode = "spoke-bootstrap-refused"
	codeSpokeKeySecretMissing   findingCode = "spoke-key-secret-missing"
	codeSpokeKeySecretForbidden findingCode = "spoke-key-secret-forbidden"
	codeSpokeKeySecretReadError findingCode = "spoke-key-secret-read-failed"
)

// pipeline: one or more findings per Pipeline.
const (
	codePipelineStalled          findingCode = "pipeline-stalled"
	codePipelineUnreconciled     findingCode = "pipeline-unreconciled"
	codePipelineJustChanged      findingCode = "pipeline-just-changed"
	codePipelineReconcileFailed  findingCode = "pipeline-reconcile-failed"
	codePipelineTargetNotFound   findingCode = "pipeline-target-not-found"
	codePipelineNotReady         findingCode = "pipeline-not-ready"
	codePipelineReady            findingCode = "pipeline-ready"
	codePipelineReadyUnknown     findingCode = "pipeline-ready-unknown"
	codePipelineGenerationBehind findingCode = "pipeline-generation-behind"
	codePipelineReconcilingLong  findingCode = "pipeline-reconciling-long"
	codePipelineSuspended        findingCode = "pipeline-suspended"
	codePipelineUnknownSpoke     findingCode = "pipeline-unknown-spoke"
	codePipelineHeldRollback     findingCode = "pipeline-held-rollback"
	codePipelineHeldUninstall    findingCode = "pipeline-held-uninstall"
)

// promotion: stuck Promotions and recent failures.
const (
	codePromotionsOK              findingCode = "promotions-ok"
	codePromotionAwaitingApproval findingCode = "promotion-awaiting-approval"
	codePromotionPending          findingCode = "promotion-pending"
	codePromotionPastTimeout      findingCode = "promotion-past-timeout"
	codePromotionNearTimeout      findingCode = "promotion-near-timeout"
	codePromotionRolloutPaused    findingCode = "promotion-rollout-paused"
	codePromotionRollingBack      findingCode = "promotion-rolling-back"
	codePromotionFailed           findingCode = "promotion-failed"
	codePromotionFailedSuperseded findingCode = "promotion-failed-superseded"
	codeLifecycleUnclaimed        findingCode = "lifecycle-unclaimed"
	codeLifecycleStepsTimeOut     findingCode = "lifecycle-steps-time-out"
)

// releasehistory: ReleaseHistories whose Ready is False, by reason.
const (
	codeReleaseHistoriesOK        findingCode = "releasehistories-ok"
	codeReleaseHistoryFailed      findingCode = "releasehistory-failed"
	codeReleaseHistoryUninstalled findingCode = "releasehistory-uninstalled"
	codeReleaseHistoryNotReady    findingCode = "releasehistory-not-ready"
)
