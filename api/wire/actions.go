package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"
)

// Agent actions: the `helm` promotion strategy does not need credentials to
// a spoke. The hub queues an Action per destination target; the spoke's
// agent long-polls for its actions (GET ActionsPath, signed like every agent
// request, held up to about 30 s), carries each out within the limits the
// spoke sets, and reports the outcome (POST ActionPath). Actions are
// idempotent by ID: an agent that restarts mid-action checks the release
// before acting again.

// ActionsPath is where an agent long-polls for its pending actions.
func ActionsPath(spoke string) string { return "/v1/spokes/" + url.PathEscape(spoke) + "/actions" }

// ActionPath is where an agent reports the outcome of one action.
func ActionPath(spoke, id string) string {
	return ActionsPath(spoke) + "/" + url.PathEscape(id)
}

// ActionIDLength is the length of an action id in hex digits.
const ActionIDLength = 32

// NewActionID returns the deterministic id of the action of promotion
// (its UID) for one target.
func NewActionID(promotionUID, spoke, namespace, release string) string {
	h := sha256.New()
	for _, s := range []string{promotionUID, spoke, namespace, release} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:ActionIDLength]
}

// ChartSource says where the agent fetches the chart from.
type ChartSource struct {
	// Repository is an HTTP(S) Helm repository URL, or an OCI reference
	// prefix (oci://registry/path).
	Repository string `json:"repository"`
	// Name is the chart's name in the repository.
	Name string `json:"name"`
}

// Values policies of an upgrade.
const (
	// ValuesReuse reuses the release's current values (helm upgrade
	// --reuse-values).
	ValuesReuse = "reuse"
	// ValuesResetThenReuse resets to the new chart's defaults, then applies
	// the release's current user values (--reset-then-reuse-values).
	ValuesResetThenReuse = "reset-then-reuse"
)

// Action types. An upgrade is the only type that sets Action.Version (and,
// without HelmRelease, Action.Chart): every other type carries what it needs
// in a field of its own and leaves Version empty, so that an agent older than
// the type fails it as invalid ("version is required") instead of upgrading.
const (
	// ActionUpgrade upgrades the release to Version (the default: an
	// action without a type is an upgrade).
	ActionUpgrade = "upgrade"
	// ActionRollback returns the release to a revision it ran before.
	ActionRollback = "rollback"
	// ActionPreview renders a version and answers the change it would make,
	// changing nothing.
	ActionPreview = "preview"
	// ActionHelmTest runs the release's Helm test hooks.
	ActionHelmTest = "helmTest"
)

// Action is one promotion step a spoke's agent carries out.
type Action struct {
	// ID is deterministic (NewActionID): the same action is offered again
	// until its outcome is reported.
	ID string `json:"id"`
	// Type is one of the Action* types; empty is ActionUpgrade.
	Type string `json:"type,omitempty"`
	// Promotion is the Promotion's namespace/name on the hub.
	Promotion string `json:"promotion"`
	// Namespace and Release name the Helm release on the spoke.
	Namespace string `json:"namespace"`
	Release   string `json:"release"`
	// Chart is where the chart comes from. Credentials for it are the
	// spoke's own, never the hub's.
	Chart ChartSource `json:"chart"`
	// Version is the chart version to upgrade to.
	Version string `json:"version"`
	// ValuesPolicy is ValuesReuse (default) or ValuesResetThenReuse.
	ValuesPolicy string `json:"valuesPolicy,omitempty"`
	// HelmRelease, when set, names a Flux HelmRelease on the spoke that
	// manages the release: the agent sets its spec.chart.spec.version
	// (server-side apply, field manager tugboat) instead of running Helm.
	HelmRelease *HelmReleaseRef `json:"helmRelease,omitempty"`
	// Rollback says what an ActionRollback returns the release to; set
	// only on that type.
	Rollback *RollbackAction `json:"rollback,omitempty"`

	// Preview is what a preview action renders (type ActionPreview only;
	// see preview.go).
	Preview *PreviewAction `json:"preview,omitempty"`
	// HelmTest says which revision a helm test action tests (type
	// ActionHelmTest only).
	HelmTest *HelmTestAction `json:"helmTest,omitempty"`
	// Created is when the hub queued the action.
	Created time.Time `json:"created"`
}

// TypeOf returns a's type, ActionUpgrade when it has none.
func (a Action) TypeOf() string {
	if a.Type == "" {
		return ActionUpgrade
	}
	return a.Type
}

// RollbackAction is what a rollback action undoes and returns the release
// to: the revision it ran before a promotion's upgrade changed it.
type RollbackAction struct {
	// Revision is the Helm revision to return to (helm rollback); unused
	// for a HelmRelease, whose controller makes the revisions.
	Revision int `json:"revision,omitempty"`
	// Version is the chart version the release ran at Revision: the
	// agent refuses a Revision that runs another, and restores it in a
	// HelmRelease.
	Version string `json:"version"`
	// From is the chart version the undone upgrade set; a HelmRelease is
	// restored only while it asks for From (else someone changed it since).
	From string `json:"from"`
	// Undoes is the id of the upgrade action undone: a release is rolled
	// back only while its latest revision is that upgrade's (labeled with
	// it), never over a change someone made since.
	Undoes string `json:"undoes"`
}

// NewRollbackActionID returns the deterministic id of the rollback action
// of promotion (its UID) for one target: distinct from its upgrade's.
func NewRollbackActionID(promotionUID, spoke, namespace, release string) string {
	return NewActionID(promotionUID+"/"+ActionRollback, spoke, namespace, release)
}

// HelmTestAction is what a helm test action tests: the release's test
// hooks are run only while its latest revision is the one the promotion's
// upgrade produced (Revision, at chart Version), never on a change made
// since. Its outcome is Succeeded when every test hook passed, Failed with
// the failing test Pod and an excerpt of its log otherwise.
type HelmTestAction struct {
	// Revision is the Helm revision the promotion produced or found at
	// Version.
	Revision int `json:"revision"`
	// Version is the chart version Revision runs.
	Version string `json:"version"`
	// TimeoutSeconds bounds the test hooks (helm test --timeout); the
	// agent's own bound applies when it is shorter, or when this is 0.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

// NewHelmTestActionID returns the deterministic id of attempt attempt of
// the helmTest step step of promotion (its UID) for one target: distinct
// from its upgrade's and rollback's, and from every other attempt's.
func NewHelmTestActionID(promotionUID, step string, attempt int32, spoke, namespace, release string) string {
	return NewActionID(fmt.Sprintf("%s/%s/%s/%d", promotionUID, ActionHelmTest, step, attempt), spoke, namespace, release)
}

// ActionList is the answer to a poll.
type ActionList struct {
	Actions []Action `json:"actions"`
}

// Action results.
const (
	// ActionSucceeded: the agent upgraded (or found the release already at
	// the version).
	ActionSucceeded = "Succeeded"
	// ActionFailed: the upgrade was attempted and failed.
	ActionFailed = "Failed"
	// ActionRefused: the action is outside the limits the spoke sets
	// (namespace, chart source, downgrade); it was not attempted.
	ActionRefused = "Refused"
)

// ActionOutcome is what an agent reports about one action.
type ActionOutcome struct {
	// ID of the action.
	ID string `json:"id"`
	// Result is ActionSucceeded, ActionFailed or ActionRefused.
	Result string `json:"result"`
	// Message says what happened, e.g. why the action was refused.
	Message string `json:"message,omitempty"`
	// Revision is the Helm revision the upgrade (or rollback) made, when
	// known.
	Revision int `json:"revision,omitempty"`
	// Time is when the agent finished the action.
	Time time.Time `json:"time"`
	// Preview is the change a Succeeded preview action found (type
	// ActionPreview only; see preview.go).
	Preview *PreviewResult `json:"preview,omitempty"`
}
