package v1alpha1

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of a PromotionPreview (issue 26). At every limit the object stays
// far below etcd's 1.5 MiB (TestPromotionPreview_sizeAtEveryLimit).
const (
	// MaxPreviewTargets is the most targets a preview asks (one per
	// distinct set of values).
	MaxPreviewTargets = 20
	// MaxPreviewGroups is the most distinct changes stored; more are
	// counted in status.otherChanges.
	MaxPreviewGroups = 4
	// MaxPreviewVotes is the most votes status.preview.approvalsReset
	// sets aside (status.approvals holds at most 20).
	MaxPreviewVotes = 20
	// MaxPreviewSpokes is the most spokes a group or target names.
	MaxPreviewSpokes = 20
	// MaxPreviewObjects is the most objects a group lists.
	MaxPreviewObjects = 50
	// MaxPreviewDiff is the longest diff of one object, in bytes.
	MaxPreviewDiff = 16384
	// MaxPreviewValuesDiff is the longest values diff of a group.
	MaxPreviewValuesDiff = 65536
	// MaxPreviewGroupDiffs is the most bytes of diffs (objects and
	// values) a group holds.
	MaxPreviewGroupDiffs = 131072
)

// PreviewChange is what an upgrade does to one object.
// +kubebuilder:validation:Enum=Added;Removed;Changed
type PreviewChange string

const (
	PreviewAdded   PreviewChange = "Added"
	PreviewRemoved PreviewChange = "Removed"
	PreviewChanged PreviewChange = "Changed"
)

// PreviewPhase is where a preview stands.
// +kubebuilder:validation:Enum=Pending;Ready;Failed;Stale
type PreviewPhase string

const (
	// PreviewPending: asked; waiting for the agents' answers.
	PreviewPending PreviewPhase = "Pending"
	// PreviewReady: at least one target answered; status.preview has the
	// summary and the PromotionPreview the diffs.
	PreviewReady PreviewPhase = "Ready"
	// PreviewFailed: no target answered within the deadline, or every one
	// failed or refused; reason says why. It never blocks the approval.
	PreviewFailed PreviewPhase = "Failed"
	// PreviewStale: a previewed target's live revision changed since.
	PreviewStale PreviewPhase = "Stale"
)

// PreviewTarget is one target a preview asks, standing for the targets
// that share its values.
type PreviewTarget struct {
	// spoke, namespace and release name the target asked.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Spoke string `json:"spoke"`
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=53
	Release string `json:"release"`

	// actionID is the id of the preview action offered to the spoke's
	// agent.
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{32}$`
	ActionID string `json:"actionID"`

	// valuesDigest is the digest of the values the target runs with, as
	// its ReleaseHistory reports them; targets that share it share this
	// target's preview.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ValuesDigest string `json:"valuesDigest,omitempty"`

	// targets is how many targets of the environment this one stands for
	// (itself included).
	// +required
	// +kubebuilder:validation:Minimum=1
	Targets int32 `json:"targets"`

	// spokes are the spokes of those targets (at most 20).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=63
	Spokes []string `json:"spokes,omitempty"`
}

// PromotionPreviewSpec is what a preview asks. A Promotion's preview is
// written whole by the Promotion reconciler when it creates the object. An
// on-demand preview (`tugboat diff PIPELINE --from ENV --to ENV`) is
// created by a person naming only pipeline, from and to; the hub then
// writes, once, the version running in from and the targets of to it
// asks. Then it does not change.
// +kubebuilder:validation:XValidation:rule="has(self.promotion) != has(self.pipeline)",message="a preview names either a promotion, or a pipeline with from and to (on demand)"
// +kubebuilder:validation:XValidation:rule="!has(self.pipeline) || (has(self.from) && has(self.to) && self.from != self.to)",message="an on-demand preview names from and to, two environments of the pipeline"
// +kubebuilder:validation:XValidation:rule="has(self.pipeline) || (has(self.version) && has(self.targets) && has(self.totalTargets) && has(self.deadline))",message="a promotion's preview names its version, targets, totalTargets and deadline"
// +kubebuilder:validation:XValidation:rule="has(self.version) == has(self.targets) && has(self.targets) == has(self.totalTargets) && has(self.targets) == has(self.deadline)",message="version, targets, totalTargets and deadline are written together"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.targets) ? self == oldSelf : (has(oldSelf.pipeline) && has(self.pipeline) && self.pipeline == oldSelf.pipeline && self.from == oldSelf.from && self.to == oldSelf.to)",message="spec is immutable (the hub writes an on-demand preview's version and targets once)"
type PromotionPreviewSpec struct {
	// promotion is the name of the Promotion, in the same namespace (and
	// the PromotionPreview's own name); empty for an on-demand preview.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Promotion string `json:"promotion,omitempty"`

	// pipeline, from and to name an on-demand preview: what promoting the
	// version that runs in environment from into environment to of the
	// Pipeline, in the same namespace, would change.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Pipeline string `json:"pipeline,omitempty"`
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	From string `json:"from,omitempty"`
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	To string `json:"to,omitempty"`

	// version is the chart version previewed.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`

	// targets are the targets asked, one per distinct set of values.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Targets []PreviewTarget `json:"targets,omitempty"`

	// totalTargets is how many targets the environment has.
	// +optional
	// +kubebuilder:validation:Minimum=1
	TotalTargets int32 `json:"totalTargets,omitempty"`

	// deadline is when the preview gives up waiting for answers.
	// +optional
	Deadline metav1.Time `json:"deadline,omitzero"`
}

// OnDemand reports whether the preview was asked by a person for a
// pipeline's environments, not by a Promotion.
func (s *PromotionPreviewSpec) OnDemand() bool { return s.Pipeline != "" }

// PreviewTargetStatus is the answer of one target asked.
type PreviewTargetStatus struct {
	// actionID is the preview action's id (spec.targets[].actionID).
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{32}$`
	ActionID string `json:"actionID"`

	// phase is Pending (not fetched yet), Delivered, Succeeded, Failed or
	// Refused (outside the spoke's limits).
	// +required
	Phase ActionPhase `json:"phase"`

	// message is what the agent said.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// digest is the digest of the change it found (a group's).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Digest string `json:"digest,omitempty"`

	// revision is the live revision it compared against; a newer one
	// makes the preview stale.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Revision int32 `json:"revision,omitempty"`

	// deliveries counts how often the action was handed to the agent.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Deliveries int32 `json:"deliveries,omitempty"`
}

// PreviewObject is one object the upgrade adds, removes or changes.
type PreviewObject struct {
	// apiVersion, kind, namespace and name identify the object.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	APIVersion string `json:"apiVersion,omitempty"`
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// change is Added, Removed or Changed.
	// +required
	Change PreviewChange `json:"change"`

	// diff is a unified diff of the object's manifest, sensitive values
	// redacted; never set for a Secret.
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	Diff string `json:"diff,omitempty"`

	// secret marks a Secret: its data is never sent, only that it changed.
	// +optional
	Secret bool `json:"secret,omitempty"`

	// truncated says the diff was cut or left out.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
}

// PreviewGroup is one distinct change, and the targets it stands for.
// +kubebuilder:validation:XValidation:rule="!has(self.objects) || self.objects.all(o, !has(o.diff) || !has(o.secret) || !o.secret)",message="a Secret's diff is never stored",fieldPath=".objects"
// +kubebuilder:validation:XValidation:rule="(has(self.objects) ? self.objects.map(o, has(o.diff) ? size(o.diff) : 0).sum() : 0) + (has(self.valuesDiff) ? size(self.valuesDiff) : 0) <= 131072",message="the diffs of a group must total at most 128 KiB"
type PreviewGroup struct {
	// digest identifies the change (the agents' digest).
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	Digest string `json:"digest"`

	// targets is how many targets of the environment change this way.
	// +required
	// +kubebuilder:validation:Minimum=1
	Targets int32 `json:"targets"`

	// spokes are the spokes of those targets (at most 20).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=63
	Spokes []string `json:"spokes,omitempty"`

	// fromVersion is the chart version the previewed target runs.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	FromVersion string `json:"fromVersion,omitempty"`

	// dryRun is server (Helm's --dry-run=server on the spoke) or client.
	// +optional
	// +kubebuilder:validation:Enum=server;client
	DryRun string `json:"dryRun,omitempty"`

	// objectsChanged and linesChanged count the whole change, also what
	// was cut.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObjectsChanged int32 `json:"objectsChanged,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	LinesChanged int32 `json:"linesChanged,omitempty"`

	// objects are the objects added, removed and changed (at most 50;
	// objectsChanged counts them all).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Objects []PreviewObject `json:"objects,omitempty"`

	// valuesDiff is a unified diff of the values, sensitive values
	// redacted.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	ValuesDiff string `json:"valuesDiff,omitempty"`

	// truncated says something was cut to stay within the bounds; note
	// says what.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Note string `json:"note,omitempty"`
}

// PromotionPreviewStatus holds the agents' answers. Only the hub's actions
// store writes it.
type PromotionPreviewStatus struct {
	// targets are the answers, one per spec.targets entry that was
	// offered.
	// +optional
	// +listType=map
	// +listMapKey=actionID
	// +kubebuilder:validation:MaxItems=20
	Targets []PreviewTargetStatus `json:"targets,omitempty"`

	// groups are the distinct changes found (at most 4), most targets
	// first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	Groups []PreviewGroup `json:"groups,omitempty"`

	// otherChanges counts the distinct changes beyond the four stored.
	// +optional
	// +kubebuilder:validation:Minimum=0
	OtherChanges int32 `json:"otherChanges,omitempty"`

	// failure says why the hub could not ask an on-demand preview (an
	// unknown pipeline or environment, no version running in from, no
	// target it can preview).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Failure string `json:"failure,omitempty"`
}

// PromotionPreview is what a Promotion would change on its destination's
// targets, as their agents rendered it with their live values, before an
// approver decides. Owned by the Promotion, with its name; or asked on
// demand by a person (spec.pipeline, from and to), without a Promotion,
// and deleted by the hub once its time to live passed.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=preview,categories=tugboat
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Changes",type=integer,JSONPath=`.status.groups[0].objectsChanged`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PromotionPreview struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the preview asks.
	// +required
	Spec PromotionPreviewSpec `json:"spec"`

	// status holds the answers.
	// +optional
	Status PromotionPreviewStatus `json:"status,omitempty"`
}

// PromotionPreviewList is a list of PromotionPreviews.
//
// +kubebuilder:object:root=true
type PromotionPreviewList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the PromotionPreviews.
	Items []PromotionPreview `json:"items"`
}

// PreviewSummary is a Promotion's preview at a glance (status.preview).
type PreviewSummary struct {
	// phase is Pending, Ready, Failed or Stale.
	// +required
	Phase PreviewPhase `json:"phase"`

	// name is the PromotionPreview holding the diffs.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// digest is the digest of the change most targets make.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Digest string `json:"digest,omitempty"`

	// objectsChanged and linesChanged are those of the change most
	// targets make.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObjectsChanged int32 `json:"objectsChanged,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	LinesChanged int32 `json:"linesChanged,omitempty"`

	// groups is how many distinct changes were found.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Groups int32 `json:"groups,omitempty"`

	// targetsPreviewed is how many targets the answers stand for.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TargetsPreviewed int32 `json:"targetsPreviewed,omitempty"`

	// reason says why the preview failed or is partial.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// computedAt is when the last answer arrived.
	// +optional
	ComputedAt *metav1.Time `json:"computedAt,omitempty"`

	// approvedPhase and approvedDigest are the preview's phase and digest
	// when the approval completed: what the approvers saw. Set once, when
	// the hub records the approval.
	// +optional
	ApprovedPhase PreviewPhase `json:"approvedPhase,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ApprovedDigest string `json:"approvedDigest,omitempty"`

	// recomputedAt is when the hub asked the agents again, after the
	// approval and before the strategy acted, because the preview was
	// Stale (a previewed release moved to another revision). name then
	// names the second PromotionPreview (<promotion>-recheck).
	// +optional
	RecomputedAt *metav1.Time `json:"recomputedAt,omitempty"`

	// changedSinceApproval says the preview computed again before the
	// strategy acted differs from the one approved (another digest), or
	// could not be computed again (reason says why). The approvers are
	// told (the notice PromotionPreviewChanged and the Event
	// PreviewChanged); the promotion proceeds, unless the environment's
	// gate sets reapproveOnChange (approvalsReset).
	// +optional
	ChangedSinceApproval bool `json:"changedSinceApproval,omitempty"`

	// approvalsReset is how many of status.approvals, the first ones, no
	// longer count: they were cast before the preview changed since the
	// approval (changedSinceApproval) in an environment whose gate sets
	// reapproveOnChange. The hub then cleared status.approval, and the
	// Promotion waits for approval again; a person who voted before may
	// vote again.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	ApprovalsReset int32 `json:"approvalsReset,omitempty"`
}

// Line is the one-line summary of a preview, as the CLI and the notices
// print it: "Ready: 3 objects and 12 lines change (2 distinct changes; 5
// targets previewed)", or the phase and the reason.
func (s *PreviewSummary) Line() string {
	if s == nil {
		return ""
	}
	if s.Phase != PreviewReady && s.Phase != PreviewStale {
		if s.Reason != "" {
			return string(s.Phase) + ": " + s.Reason
		}
		return string(s.Phase)
	}
	change := counted(s.ObjectsChanged, "object", "objects") + " and " + counted(s.LinesChanged, "line", "lines") + " change"
	line := string(s.Phase) + ": " + change
	if s.ChangedSinceApproval {
		line = string(s.Phase) + ": changed since approval: " + change
	}
	var more []string
	if s.Groups > 1 {
		more = append(more, fmt.Sprintf("%d distinct changes", s.Groups))
	}
	if s.TargetsPreviewed > 0 {
		more = append(more, counted(s.TargetsPreviewed, "target", "targets")+" previewed")
	}
	if len(more) > 0 {
		line += " (" + strings.Join(more, "; ") + ")"
	}
	return line
}

// counted is n and the word for n: "1 object", "3 objects".
func counted(n int32, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Of reports whether pp is a preview of the Promotion pr: it names pr in
// spec.promotion and pr controls it (the hub created it). A PromotionPreview
// of the same name that someone else created (any user allowed to create
// on-demand previews may pick a name) is not pr's, and nothing of it is
// shown as pr's preview.
func (pp *PromotionPreview) Of(pr *Promotion) bool {
	return pp != nil && pr != nil && pp.Spec.Promotion == pr.Name && metav1.IsControlledBy(pp, pr)
}
