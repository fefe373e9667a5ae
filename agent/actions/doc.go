// Package actions is the spoke side of the `helm` promotion strategy: the
// agent long-polls the hub for actions (GET /v1/spokes/{spoke}/actions,
// signed like every agent request), carries each out on its own cluster, and
// reports the outcome (POST /v1/spokes/{spoke}/actions/{id}). The hub never
// needs credentials to the spoke. Every request carries a fresh nonce and
// the agent acts only on answers the hub signed with the spoke key for that
// request (wire.VerifyResponse): TLS alone does not keep a proxy that
// terminates it, or anyone on an insecure-HTTP path, from injecting an
// action.
//
// An action either upgrades an existing Helm release to a chart version
// (Helm SDK, values reused or reset-then-reused) or, when it names a Flux
// HelmRelease, sets that HelmRelease's spec.chart.spec.version by
// server-side apply with the field manager "tugboat". A rollback action
// (rollback.go) undoes one upgrade action of a rollout whose failure budget
// was spent: a Helm rollback (Helm SDK) to the revision the release ran
// before, or that HelmRelease's previous chart version restored, only
// while the release still runs what the undone upgrade made.
//
// The spoke, not the hub, decides what may happen: Limits name the
// namespaces that may receive promotions, the chart sources (URL prefixes)
// charts may come from, and whether downgrades are allowed. The defaults
// allow nothing, so an agent refuses every action until it is configured.
// An action outside the limits is not attempted and is reported Refused,
// with the reason, as is an action whose chart is not the release's own
// chart. A release that is not on the spoke is installed only with
// --actions-install-missing (off by default). Chart source credentials come
// from a Secret on the spoke, never from the hub, and go only to the host the
// Secret names.
//
// Actions are idempotent by id: a release already at the version is
// reported Succeeded without a new revision, and an upgrade this agent left
// pending when it was killed is replaced rather than stacked, so an action
// makes at most one revision however often it is delivered.
//
// Flags (Options.BindFlags): --actions-enabled (default true),
// --actions-allowed-namespaces, --actions-allowed-chart-sources,
// --actions-allow-downgrades, --actions-limits-file (YAML from a mounted
// ConfigMap; replaces the three limit flags, re-read on change),
// --actions-credentials-secret, --actions-install-missing,
// --actions-upgrade-timeout,
// --actions-pending-grace and --actions-pending-wait.
//
// Permissions: none of this package's rights are in the agent's default
// role. The opt-in ClusterRole tugboat-agent-helm-strategy of the agent chart (get and patch
// on helmreleases, Helm's release Secrets, the kinds charts usually hold) is
// bound by a RoleBinding in each allowed namespace, never cluster-wide.
//
// This package does not decide what to promote, nor judge health: the hub
// does, from the releases the reporter sends.
package actions
