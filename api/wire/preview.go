package wire

// Previews (issue 26): before an approval, the hub asks a destination's
// agent to render the promoted version with the release's live values,
// exactly as the upgrade would apply them, and to answer the change it
// would make. A preview changes nothing on the spoke.
//
// Secret data never leaves the spoke: a Secret appears only as added,
// removed, changed or unchanged (PreviewObject.Secret, with no Diff), and
// values the agent recognizes as sensitive are redacted in every diff.

// PreviewAction is what a preview action renders.
type PreviewAction struct {
	// Chart is where the chart comes from, as for an upgrade.
	Chart ChartSource `json:"chart"`
	// Version is the chart version to render.
	Version string `json:"version"`
	// ValuesPolicy is ValuesReuse (default) or ValuesResetThenReuse: the
	// values the upgrade would apply.
	ValuesPolicy string `json:"valuesPolicy,omitempty"`
}

// Object changes of a preview.
const (
	ChangeAdded   = "Added"
	ChangeRemoved = "Removed"
	ChangeChanged = "Changed"
)

// Dry-run modes of a preview.
const (
	// DryRunServer: Helm's --dry-run=server (lookups and validation
	// against the spoke's API server).
	DryRunServer = "server"
	// DryRunClient: a client render, where the spoke's RBAC refuses the
	// server dry run.
	DryRunClient = "client"
)

// Bounds of a preview's answer.
const (
	// MaxPreviewObjectDiff bounds the diff of one object, in bytes.
	MaxPreviewObjectDiff = 16 << 10
	// MaxPreviewTotal bounds the diffs of a preview (objects and values),
	// in bytes.
	MaxPreviewTotal = 256 << 10
	// MaxPreviewObjects bounds the objects listed.
	MaxPreviewObjects = 256
	// MaxPreviewNote bounds PreviewResult.Note.
	MaxPreviewNote = 1024
)

// PreviewResult is the change a preview found: what the upgrade would add,
// remove and change, against the live release.
type PreviewResult struct {
	// Digest identifies the change (hex SHA-256 over the whole answer
	// before truncation, secrets as sent: redacted): two targets with the
	// same digest would change the same way.
	Digest string `json:"digest"`
	// FromVersion is the chart version the release runs; Revision its
	// deployed revision, which the preview compares against (a new
	// revision makes the preview stale).
	FromVersion string `json:"fromVersion,omitempty"`
	Revision    int    `json:"revision,omitempty"`
	// DryRun is DryRunServer or DryRunClient.
	DryRun string `json:"dryRun,omitempty"`
	// Objects lists the objects added, removed and changed (at most
	// MaxPreviewObjects), sorted by kind, namespace and name.
	Objects []PreviewObject `json:"objects,omitempty"`
	// ObjectsChanged counts every object added, removed or changed, also
	// those left out of Objects.
	ObjectsChanged int `json:"objectsChanged"`
	// LinesChanged counts the lines added and removed in every diff,
	// before truncation.
	LinesChanged int `json:"linesChanged"`
	// ValuesDiff is a unified diff of the values the release runs with
	// and the values the upgrade would apply (chart defaults included),
	// sensitive values redacted.
	ValuesDiff string `json:"valuesDiff,omitempty"`
	// Truncated says that a diff or object was left out to keep within
	// the bounds; Note says what.
	Truncated bool   `json:"truncated,omitempty"`
	Note      string `json:"note,omitempty"`
}

// PreviewObject is one object a preview adds, removes or changes.
type PreviewObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Change is ChangeAdded, ChangeRemoved or ChangeChanged.
	Change string `json:"change"`
	// Diff is a unified diff of the object's manifest (at most
	// MaxPreviewObjectDiff bytes); empty for a Secret.
	Diff string `json:"diff,omitempty"`
	// Secret marks a Secret: its data is never sent, only that it changed.
	Secret bool `json:"secret,omitempty"`
	// Truncated says the diff was cut or left out.
	Truncated bool `json:"truncated,omitempty"`
}
