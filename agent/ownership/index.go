package ownership

import (
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultMaxEntries bounds an Index created with NewIndex(0).
const DefaultMaxEntries = 200_000

// ObjectRef names an object the way an ownerReference does, minus the UID
// and version: API group, kind, namespace and name.
type ObjectRef struct {
	// Group is the API group, "" for the core group.
	Group string
	// Kind is the object's kind, e.g. Deployment.
	Kind string
	// Namespace is empty for cluster-scoped objects.
	Namespace string
	// Name is the object's name.
	Name string
}

// Index maps tracked objects to the release that owns them, by UID and by
// name (ObjectRef). Lookups and updates are O(1) and safe for concurrent
// use. The index holds at most its capacity of entries and evicts the least
// recently used one beyond it; an entry is one object, reachable by its UID,
// its name or both.
type Index struct {
	mu    sync.Mutex
	max   int
	byUID map[types.UID]*entry
	byRef map[ObjectRef]*entry
	n     int
	// head.next is the most recently used entry, head.prev the least.
	head entry
}

type entry struct {
	uid        types.UID
	ref        ObjectRef
	rel        Release
	prev, next *entry
}

// NewIndex returns an empty index holding at most maxEntries objects
// (DefaultMaxEntries when maxEntries <= 0).
func NewIndex(maxEntries int) *Index {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	ix := &Index{max: maxEntries, byUID: map[types.UID]*entry{}, byRef: map[ObjectRef]*entry{}}
	ix.head.prev, ix.head.next = &ix.head, &ix.head
	return ix
}

// Record notes that the object with uid and/or ref belongs to rel. Either
// may be empty (a UID is unknown while an object is being created; only the
// UID is known to a metadata informer, which does not see kinds). When both
// are given they are joined into one entry, replacing whatever the index
// held for either. A zero rel is ignored.
func (ix *Index) Record(uid types.UID, ref ObjectRef, rel Release) {
	hasRef := ref.Name != ""
	if rel.IsZero() || (uid == "" && !hasRef) {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var e *entry
	if uid != "" {
		e = ix.byUID[uid]
	}
	if hasRef {
		if other := ix.byRef[ref]; other != nil && other != e {
			if e == nil {
				e = other
			} else {
				// The name now belongs to uid's entry; a namesake recorded
				// separately is a deleted object or a pending create.
				ix.remove(other)
			}
		}
	}
	if e == nil {
		e = &entry{}
		ix.pushFront(e)
		ix.n++
	} else {
		ix.moveToFront(e)
	}
	if uid != "" && e.uid != uid {
		if e.uid != "" {
			delete(ix.byUID, e.uid)
		}
		e.uid = uid
		ix.byUID[uid] = e
	}
	if hasRef && e.ref != ref {
		if e.ref.Name != "" {
			delete(ix.byRef, e.ref)
		}
		e.ref = ref
		ix.byRef[ref] = e
	}
	e.rel = rel
	for ix.n > ix.max {
		ix.remove(ix.head.prev)
	}
}

// Observe records a labeled or Helm-annotated object by UID; objects that
// name no release are ignored. It is meant for informer event handlers (see
// EventHandler).
func (ix *Index) Observe(obj metav1.Object) {
	if rel, ok := ReleaseOf(obj); ok {
		ix.Record(obj.GetUID(), ObjectRef{}, rel)
	}
}

// Lookup returns the release of the object with uid.
func (ix *Index) Lookup(uid types.UID) (Release, bool) {
	if uid == "" {
		return Release{}, false
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	e := ix.byUID[uid]
	if e == nil {
		return Release{}, false
	}
	ix.moveToFront(e)
	return e.rel, true
}

// LookupRef returns the release of the object named ref. When uid is given
// and the entry already knows a different UID, the entry describes another
// object of the same name and the lookup misses.
func (ix *Index) LookupRef(ref ObjectRef, uid types.UID) (Release, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	e := ix.byRef[ref]
	if e == nil || (uid != "" && e.uid != "" && e.uid != uid) {
		return Release{}, false
	}
	ix.moveToFront(e)
	return e.rel, true
}

// Owner returns the release of the first owner in refs the index knows,
// trying the controller reference first. namespace is the namespace of the
// object carrying refs (owners are in the same namespace or cluster-scoped).
func (ix *Index) Owner(namespace string, refs []metav1.OwnerReference) (Release, bool) {
	for _, controller := range [...]bool{true, false} {
		for i := range refs {
			ref := &refs[i]
			if isController(ref) != controller {
				continue
			}
			if rel, ok := ix.Lookup(ref.UID); ok {
				return rel, true
			}
			if rel, ok := ix.LookupRef(RefOf(namespace, ref), ref.UID); ok {
				return rel, true
			}
		}
	}
	return Release{}, false
}

// Forget removes the object with uid, also by name.
func (ix *Index) Forget(uid types.UID) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if e := ix.byUID[uid]; e != nil {
		ix.remove(e)
	}
}

// ForgetRef removes the object named ref, also by UID.
func (ix *Index) ForgetRef(ref ObjectRef) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if e := ix.byRef[ref]; e != nil {
		ix.remove(e)
	}
}

// Len returns the number of objects in the index.
func (ix *Index) Len() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.n
}

// Cap returns the most objects the index holds.
func (ix *Index) Cap() int { return ix.max }

// RefOf returns the ObjectRef an ownerReference points at, for an object in
// namespace.
func RefOf(namespace string, ref *metav1.OwnerReference) ObjectRef {
	group := ""
	if i := strings.IndexByte(ref.APIVersion, '/'); i >= 0 {
		group = ref.APIVersion[:i]
	}
	return ObjectRef{Group: group, Kind: ref.Kind, Namespace: namespace, Name: ref.Name}
}

func isController(ref *metav1.OwnerReference) bool {
	return ref.Controller != nil && *ref.Controller
}

func (ix *Index) pushFront(e *entry) {
	e.prev, e.next = &ix.head, ix.head.next
	ix.head.next.prev = e
	ix.head.next = e
}

func (ix *Index) moveToFront(e *entry) {
	if ix.head.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	ix.pushFront(e)
}

func (ix *Index) remove(e *entry) {
	if e.uid != "" {
		delete(ix.byUID, e.uid)
	}
	if e.ref.Name != "" {
		delete(ix.byRef, e.ref)
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	ix.n--
}
