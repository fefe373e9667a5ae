package releasehistory

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// recordEvent applies one event (and the release state it carries) to
// status, and reports whether anything changed. A redelivered event changes
// nothing, however often and in whatever order it comes (see applyEvent).
func recordEvent(st *tugboatv1alpha1.ReleaseHistoryStatus, spec *tugboatv1alpha1.ReleaseHistorySpec, e *wire.Event, limit int) bool {
	if hasEvent(st, e.ID) {
		return false // a redelivery (another replica, or after a restart)
	}
	changed := false
	at := revKey{life: newestLife(st), rev: clampRevision(e.Revision)}
	switch {
	case e.State != nil:
		before := st.DeepCopy()
		at = applyState(st, e.State)
		changed = !apiequality.Semantic.DeepEqual(before, st)
		if changed {
			reported(st, e.Time)
		}
		if e.State.HelmRelease != nil && spec.HelmRelease == nil {
			spec.HelmRelease = &tugboatv1alpha1.ObjectReference{Namespace: e.State.HelmRelease.Namespace, Name: e.State.HelmRelease.Name}
		}
	case e.ReleaseUID != "" && findByUID(st, e.ReleaseUID) != nil:
		// The revision the event belongs to, in whichever life.
		r := findByUID(st, e.ReleaseUID)
		at = revKey{life: r.Life(), rev: r.Revision}
	case at.rev == 0 && st.Current != nil:
		at = revKey{life: st.Current.Life(), rev: st.Current.Revision}
	}
	return applyEvent(st, withOwnMessage(e), at, limit) || changed
}

// revKey names a revision: Helm's revision number within one installation
// (life) of the release.
type revKey struct {
	life, rev int32
}

// withOwnMessage drops the Helm description from the message of a status
// event for a superseded or uninstalled revision: Helm keeps the
// description of the action that made the revision ("Upgrade complete"),
// which is not what happened now.
func withOwnMessage(e *wire.Event) *wire.Event {
	if e.Kind != wire.EventReleaseStatus || e.State == nil ||
		(e.State.Status != wire.StatusSuperseded && e.State.Status != wire.StatusUninstalled) {
		return e
	}
	c := *e
	c.Message = fmt.Sprintf("revision %d (%s %s) %s", e.Revision, e.State.Chart, e.State.ChartVersion, e.State.Status)
	return &c
}

// applyState records a release's state into status. A state with revision 0
// comes from a source that does not know Helm's revision (Flux events): it
// is matched to the newest revision of the same chart version, else recorded
// as a new revision after the newest. It returns the revision it wrote.
func applyState(st *tugboatv1alpha1.ReleaseHistoryStatus, s *wire.ReleaseState) revKey {
	rev := clampRevision(s.Revision)
	if rev == 0 {
		rev = resolveUnknownRevision(st, s.ChartVersion)
	}
	at := revKey{life: newestLife(st), rev: rev}
	var r *tugboatv1alpha1.Revision
	if s.ReleaseUID != "" {
		// Known by its storage object: news of that revision, in
		// whichever life (a late uninstall of the previous life's included).
		r = findByUID(st, s.ReleaseUID)
	}
	if r == nil && newLife(st, at, s) {
		// The release was uninstalled and installed again: Helm numbers
		// from 1 again, in a new life; the old life's revisions stay, older
		// than every revision of the new one.
		at.life++
	}
	if r == nil {
		r = findRevision(st, at)
		if r != nil && s.ReleaseUID != "" && r.ReleaseUID != "" && r.ReleaseUID != s.ReleaseUID {
			// News of a storage object the history does not hold (of a
			// life trimmed away): not about the revision under that number.
			return at
		}
	}
	if r != nil {
		at.life = r.Life()
	}
	if r != nil && statusRank(wire.ReleaseStatus(r.Status)) > statusRank(s.Status) {
		// Late news within one revision (pending after deployed): the
		// revision already moved on.
		return at
	}
	if r == nil {
		st.Revisions = append(st.Revisions, tugboatv1alpha1.Revision{})
		r = &st.Revisions[len(st.Revisions)-1]
		r.Revision = rev
		r.Installation = at.life
	}
	if r.ReleaseUID == "" {
		r.ReleaseUID = s.ReleaseUID
	}
	r.Chart = s.Chart
	r.ChartVersion = s.ChartVersion
	if s.AppVersion != "" {
		r.AppVersion = s.AppVersion
	}
	if s.ValuesDigest != "" {
		r.ValuesDigest = s.ValuesDigest
	}
	if s.ManifestDigest != "" {
		r.ManifestDigest = s.ManifestDigest
	}
	r.Status = tugboatv1alpha1.ReleaseStatus(s.Status)
	switch {
	case s.Status == wire.StatusUninstalled:
		// Whatever health the agent last knew belongs to the release
		// before its uninstall.
		r.Health, r.HealthReason = tugboatv1alpha1.HealthUnknown, "the release was uninstalled"
	case s.Health != "":
		r.Health = tugboatv1alpha1.Health(s.Health)
		r.HealthReason = clip.String(s.HealthReason, 512)
	}
	if !s.FirstDeployed.IsZero() {
		r.FirstDeployed = &metav1.Time{Time: s.FirstDeployed.UTC().Truncate(time.Second)}
	}
	if !s.LastDeployed.IsZero() {
		r.LastDeployed = &metav1.Time{Time: s.LastDeployed.UTC().Truncate(time.Second)}
	}
	sortRevisions(st)
	if s.Status == wire.StatusDeployed && st.Revisions[0].Revision == rev && st.Revisions[0].Life() == at.life {
		supersedeOlder(st)
	}
	// The current revision is the newest one; an update of an older
	// revision (Helm marking it superseded) never moves current back.
	newest := st.Revisions[0].RevisionSummary
	st.Current = &newest
	// What the HelmRelease says belongs to the release as it is now: only
	// news of the current revision carries it, and news of the current
	// revision managed by no HelmRelease (it was deleted) clears it.
	switch h := s.HelmReleaseStatus; {
	case rev != newest.Revision || at.life != newest.Life():
	case h != nil:
		st.HelmRelease = &tugboatv1alpha1.HelmReleaseStatus{
			Ready: metav1.ConditionStatus(h.Ready), Reason: clip.String(h.Reason, 128), Message: clip.String(h.Message, 1024),
			Stalled: h.Stalled, Reconciling: h.Reconciling, Suspended: h.Suspended,
			LastAttemptedRevision: clip.String(h.LastAttemptedRevision, 64),
		}
	case s.HelmRelease == nil:
		st.HelmRelease = nil
	}
	return at
}

// supersedeOlder marks superseded the revisions that a deployed newest
// revision (st.Revisions[0], sorted) supersedes: those of its life still
// recorded as deployed. Helm does the same in its storage; an agent reports
// it, but Flux events never do (helm-controller sends no event about the
// revision an upgrade or a rollback replaced), so without this every
// revision an agentless spoke deployed would stay deployed.
func supersedeOlder(st *tugboatv1alpha1.ReleaseHistoryStatus) {
	newest := &st.Revisions[0]
	for i := 1; i < len(st.Revisions); i++ {
		if r := &st.Revisions[i]; r.Life() == newest.Life() && r.Status == tugboatv1alpha1.ReleaseStatusDeployed {
			r.Status = tugboatv1alpha1.ReleaseStatusSuperseded
		}
	}
}

// newLife reports whether state s, for at in the newest life, starts a new
// life of the release: an install after an uninstall. It does when the
// newest life ended (its current revision is uninstalled) and s numbers a
// revision no later than it; or, when s names its storage object, when the
// newest life holds another object under the same number, or none at a
// number below the current revision's (the hub missed the uninstall). News
// of an ending (superseded, uninstalling, uninstalled) never starts a life.
func newLife(st *tugboatv1alpha1.ReleaseHistoryStatus, at revKey, s *wire.ReleaseState) bool {
	cur := st.Current
	if cur == nil || len(st.Revisions) == 0 {
		return false
	}
	switch s.Status {
	case wire.StatusUninstalled, wire.StatusUninstalling, wire.StatusSuperseded:
		return false
	}
	if cur.Status == tugboatv1alpha1.ReleaseStatusUninstalled && at.rev <= cur.Revision {
		return true
	}
	if s.ReleaseUID == "" {
		return false
	}
	r := findRevision(st, at)
	if r == nil {
		return at.rev < cur.Revision
	}
	return r.ReleaseUID != "" && r.ReleaseUID != s.ReleaseUID
}

// newestLife returns the installation of the newest revision recorded (1
// when there is none).
func newestLife(st *tugboatv1alpha1.ReleaseHistoryStatus) int32 {
	life := int32(1)
	for i := range st.Revisions {
		life = max(life, st.Revisions[i].Life())
	}
	return life
}

// findByUID returns the revision whose storage object has uid, or nil.
func findByUID(st *tugboatv1alpha1.ReleaseHistoryStatus, uid string) *tugboatv1alpha1.Revision {
	for i := range st.Revisions {
		if st.Revisions[i].ReleaseUID == uid {
			return &st.Revisions[i]
		}
	}
	return nil
}

// statusRank orders the statuses one revision goes through; a revision
// never moves back to a lower rank.
func statusRank(s wire.ReleaseStatus) int {
	switch s {
	case wire.StatusDeployed, wire.StatusFailed:
		return 1
	case wire.StatusSuperseded:
		return 2
	case wire.StatusUninstalling:
		return 3
	case wire.StatusUninstalled:
		return 4
	}
	return 0 // pending-*, unknown
}

// hasEvent reports whether an event with id is recorded in any revision.
func hasEvent(st *tugboatv1alpha1.ReleaseHistoryStatus, id string) bool {
	for i := range st.Revisions {
		for j := range st.Revisions[i].Events {
			if st.Revisions[i].Events[j].ID == id {
				return true
			}
		}
	}
	return false
}

// resolveUnknownRevision places a state without Helm's revision number (a
// Flux event) in the newest life: the newest revision if it runs
// chartVersion, else the one after it.
func resolveUnknownRevision(st *tugboatv1alpha1.ReleaseHistoryStatus, chartVersion string) int32 {
	sortRevisions(st)
	if len(st.Revisions) == 0 {
		return 1
	}
	if st.Revisions[0].ChartVersion == chartVersion {
		return st.Revisions[0].Revision
	}
	return st.Revisions[0].Revision + 1
}

// markUninstalled records that the release is no longer on the spoke.
func markUninstalled(st *tugboatv1alpha1.ReleaseHistoryStatus) bool {
	if st.Current == nil || st.Current.Status == tugboatv1alpha1.ReleaseStatusUninstalled {
		return false
	}
	if r := st.CurrentRevision(); r != nil {
		r.Status = tugboatv1alpha1.ReleaseStatusUninstalled
		r.Health = tugboatv1alpha1.HealthUnknown
		r.HealthReason = "release not present in the spoke's state snapshot"
		cur := r.RevisionSummary
		st.Current = &cur
	}
	return true
}

// applyEvent adds e to the revision it belongs to, compacting a repeat of
// the newest event with the same reason, object and message into a count.
// An event for a revision the history does not hold is attached to the
// newest revision of the same life not after it, or dropped when there is
// none.
func applyEvent(st *tugboatv1alpha1.ReleaseHistoryStatus, e *wire.Event, at revKey, limit int) bool {
	r := findRevision(st, at)
	if r == nil {
		sortRevisions(st)
		for i := range st.Revisions {
			if st.Revisions[i].Life() == at.life && st.Revisions[i].Revision <= at.rev {
				r = &st.Revisions[i]
				break
			}
		}
	}
	if r == nil {
		return false
	}
	t := metav1.Time{Time: e.Time.UTC().Truncate(time.Second)}
	var obj *tugboatv1alpha1.EventObjectReference
	if e.Object != nil {
		obj = &tugboatv1alpha1.EventObjectReference{Kind: e.Object.Kind, Namespace: e.Object.Namespace, Name: e.Object.Name}
	}
	msg := clip.String(e.Message, tugboatv1alpha1.MaxEventMessageLength)
	same := func(x *tugboatv1alpha1.ReleaseEvent) bool {
		return x.Reason == e.Reason && x.Message == msg && x.Type == tugboatv1alpha1.EventType(e.Type) && sameObject(x.Object, obj)
	}
	for i := range r.Events {
		if r.Events[i].ID == e.ID {
			return false // already recorded
		}
		// A compacted entry keeps only its latest id: an event like it
		// and not after it is one it already counts (a redelivery whose id
		// was overwritten, or a repeat within the same second, which
		// counts once). This keeps a redelivered batch from counting
		// twice; its price is that a repeat arriving out of order, older
		// than the entry, is not counted.
		if same(&r.Events[i]) && !t.After(r.Events[i].Time.Time) {
			return false
		}
	}
	if n := len(r.Events); n > 0 {
		last := &r.Events[n-1]
		if same(last) {
			if last.Count == 0 {
				last.Count = 1
			}
			last.Count++
			last.ID = e.ID
			if t.After(last.Time.Time) {
				last.Time = t
			}
			touch(st, t)
			return true
		}
	}
	r.Events = append(r.Events, tugboatv1alpha1.ReleaseEvent{
		ID: e.ID, Time: t, Type: tugboatv1alpha1.EventType(e.Type), Reason: e.Reason, Object: obj, Message: msg,
	})
	sort.SliceStable(r.Events, func(i, j int) bool { return r.Events[i].Time.Before(&r.Events[j].Time) })
	if len(r.Events) > limit {
		r.Events = append([]tugboatv1alpha1.ReleaseEvent(nil), r.Events[len(r.Events)-limit:]...)
	}
	touch(st, t)
	return true
}

// reported records that a report made at t (the spoke's clock) changed
// the release's state: status.reportedAt only moves forward.
func reported(st *tugboatv1alpha1.ReleaseHistoryStatus, t time.Time) {
	t = t.UTC().Truncate(time.Microsecond)
	if st.ReportedAt == nil || t.After(st.ReportedAt.Time) {
		st.ReportedAt = &metav1.MicroTime{Time: t}
	}
}

// reportedSince reports whether a report made after t changed the
// release's state: a state snapshot taken at t must then change nothing.
func reportedSince(st *tugboatv1alpha1.ReleaseHistoryStatus, t time.Time) bool {
	return st.ReportedAt != nil && !t.Truncate(time.Microsecond).After(st.ReportedAt.Time)
}

// capReported keeps status.reportedAt at most at limit (the hub's clock
// plus the replay window): an event stamped by a spoke whose clock ran
// ahead must not hold off that spoke's snapshots after its clock is set
// right for longer than a snapshot ahead of the hub's clock would.
func capReported(st *tugboatv1alpha1.ReleaseHistoryStatus, limit time.Time) {
	if st.ReportedAt != nil && st.ReportedAt.After(limit) {
		st.ReportedAt = &metav1.MicroTime{Time: limit.UTC().Truncate(time.Microsecond)}
	}
}

func touch(st *tugboatv1alpha1.ReleaseHistoryStatus, t metav1.Time) {
	if st.LastEventTime == nil || t.After(st.LastEventTime.Time) {
		st.LastEventTime = &t
	}
}

func sameObject(a, b *tugboatv1alpha1.EventObjectReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// trim enforces the revision limit and the size cap: revisions beyond the
// limit go first, then the oldest events of the oldest revisions.
func trim(st *tugboatv1alpha1.ReleaseHistoryStatus, revisionLimit, maxBytes int) {
	sortRevisions(st)
	if len(st.Revisions) > revisionLimit {
		st.Revisions = st.Revisions[:revisionLimit]
	}
	for size(st) > maxBytes {
		dropped := false
		for i := len(st.Revisions) - 1; i >= 0 && !dropped; i-- {
			if len(st.Revisions[i].Events) > 0 {
				st.Revisions[i].Events = st.Revisions[i].Events[1:]
				dropped = true
			}
		}
		if !dropped {
			return
		}
	}
}

func size(st *tugboatv1alpha1.ReleaseHistoryStatus) int {
	b, _ := json.Marshal(st)
	return len(b)
}

// findRevision returns the revision at, or nil.
func findRevision(st *tugboatv1alpha1.ReleaseHistoryStatus, at revKey) *tugboatv1alpha1.Revision {
	for i := range st.Revisions {
		if st.Revisions[i].Revision == at.rev && st.Revisions[i].Life() == at.life {
			return &st.Revisions[i]
		}
	}
	return nil
}

// sortRevisions orders revisions newest first: by life, then by number.
func sortRevisions(st *tugboatv1alpha1.ReleaseHistoryStatus) {
	sort.SliceStable(st.Revisions, func(i, j int) bool {
		a, b := &st.Revisions[i], &st.Revisions[j]
		if a.Life() != b.Life() {
			return a.Life() > b.Life()
		}
		return a.Revision > b.Revision
	})
}

// clampRevision converts a wire revision (validated to fit in int32) to the
// API's int32, clamping anything out of range.
func clampRevision(n int) int32 {
	switch {
	case n < 0:
		return 0
	case n > math.MaxInt32:
		return math.MaxInt32
	}
	return int32(n)
}
