package receiver

import (
	"sync"
	"time"

	"tugboat.dev/tugboat/api/wire"
)

// releaseKey names one Helm release on one spoke.
type releaseKey struct {
	spoke, namespace, release string
}

// releaseMark is the newest revision the receiver has seen of a release.
type releaseMark struct {
	revision int
	// at is the newest event time (or snapshot time) seen for revision, on
	// the spoke's clock.
	at time.Time
	// uninstalled is true when the newest release-state news of revision
	// said it was uninstalled (or uninstalling): Helm may start again at
	// revision 1.
	uninstalled bool
}

// revisionTracker remembers, per release, the newest revision seen, so that
// a late event about an older revision does not overwrite newer state. It
// holds at most size releases and forgets the oldest first; forgetting only
// means a stale event may get through to the store, which orders by
// revision too.
type revisionTracker struct {
	mu   sync.Mutex
	m    map[releaseKey]*releaseMark
	ring []releaseKey
	used []bool
	next int
}

func newRevisionTracker(size int) *revisionTracker {
	if size < 1 {
		size = 1
	}
	return &revisionTracker{
		m:    make(map[releaseKey]*releaseMark, min(size, 1<<12)),
		ring: make([]releaseKey, size),
		used: make([]bool, size),
	}
}

// isReleaseState reports whether events of kind k carry the state of the
// release (as opposed to news about an object it owns).
func isReleaseState(k wire.EventKind) bool {
	switch k {
	case wire.EventReleaseStarted, wire.EventReleaseStatus, wire.EventHealthChanged:
		return true
	}
	return false
}

// freshInstall reports whether e starts a release anew at revision 1 (after
// an uninstall that purged its history, Helm numbers from 1 again).
func freshInstall(e *wire.Event) bool {
	if e.Revision != 1 {
		return false
	}
	return e.Kind == wire.EventReleaseStarted || (e.State != nil && e.State.Status == wire.StatusPendingInstall)
}

func uninstalledState(e *wire.Event) bool {
	return e.State != nil && (e.State.Status == wire.StatusUninstalled || e.State.Status == wire.StatusUninstalling)
}

// stale marks, in out, the events of a batch from spoke that report the
// state of a revision older than the newest one seen for their release
// (earlier in the batch included), unless the release starts anew. Events
// with revision 0 (unknown, from Flux) and events about objects are never
// stale. It changes nothing: observe records what was accepted.
func (t *revisionTracker) stale(spoke string, events []wire.Event, out []bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var overlay map[releaseKey]releaseMark // this batch's own news
	for i := range events {
		e := &events[i]
		if e.Revision <= 0 {
			continue
		}
		k := releaseKey{spoke, e.Namespace, e.Release}
		mark, ok := overlay[k]
		if !ok {
			if m := t.m[k]; m != nil {
				mark, ok = *m, true
			}
		}
		if ok && isReleaseState(e.Kind) && e.Revision < mark.revision && !resets(&mark, e) {
			out[i] = true
			continue
		}
		if overlay == nil {
			overlay = make(map[releaseKey]releaseMark)
		}
		if !ok {
			mark = releaseMark{revision: e.Revision, at: e.Time}
		}
		advance(&mark, e)
		overlay[k] = mark
	}
}

// observe records events of spoke that were accepted (not stale, recorded
// by the store).
func (t *revisionTracker) observe(spoke string, events []wire.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range events {
		e := &events[i]
		if e.Revision <= 0 {
			continue
		}
		m := t.get(releaseKey{spoke, e.Namespace, e.Release}, e.Revision, e.Time)
		advance(m, e)
	}
}

// observeSnapshot records a state snapshot the store accepted. A snapshot
// is level state: when it was taken after the newest news seen and shows an
// older revision, the release was reinstalled (or rolled back its history)
// while the hub was not looking, and the snapshot wins.
func (t *revisionTracker) observeSnapshot(spoke string, snap *wire.StateSnapshot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range snap.Releases {
		r := &snap.Releases[i]
		m := t.get(releaseKey{spoke, r.Namespace, r.Release}, r.Revision, snap.TakenAt)
		switch {
		case r.Revision > m.revision, r.Revision < m.revision && snap.TakenAt.After(m.at):
			*m = releaseMark{revision: r.Revision, at: snap.TakenAt}
		case r.Revision == m.revision && snap.TakenAt.After(m.at):
			m.at = snap.TakenAt
		case r.Revision < m.revision:
			continue
		}
		m.uninstalled = r.Status == wire.StatusUninstalled || r.Status == wire.StatusUninstalling
	}
}

// get returns the mark of k, adding one for revision at time at (and
// forgetting the oldest release when full) when there is none.
func (t *revisionTracker) get(k releaseKey, revision int, at time.Time) *releaseMark {
	if m := t.m[k]; m != nil {
		return m
	}
	if t.used[t.next] {
		delete(t.m, t.ring[t.next])
	}
	t.ring[t.next], t.used[t.next] = k, true
	t.next = (t.next + 1) % len(t.ring)
	m := &releaseMark{revision: revision, at: at}
	t.m[k] = m
	return m
}

// resets reports whether e, a release-state event about a revision older
// than mark's, starts the release anew rather than being stale.
func resets(mark *releaseMark, e *wire.Event) bool {
	return isReleaseState(e.Kind) && (mark.uninstalled || freshInstall(e))
}

// advance updates mark with an accepted event e.
func advance(mark *releaseMark, e *wire.Event) {
	switch {
	case e.Revision < mark.revision:
		if !resets(mark, e) {
			return // news about an older revision's objects: nothing to move
		}
		*mark = releaseMark{revision: e.Revision, at: e.Time}
	case e.Revision > mark.revision:
		*mark = releaseMark{revision: e.Revision, at: e.Time}
	case e.Time.After(mark.at):
		mark.at = e.Time
	}
	if isReleaseState(e.Kind) && e.State != nil {
		mark.uninstalled = uninstalledState(e)
	}
}
