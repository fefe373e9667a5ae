package ownership_test

import (
	"fmt"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"tugboat.dev/tugboat/agent/ownership"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

var (
	web    = ownership.Release{Name: "web", Namespace: "apps"}
	api    = ownership.Release{Name: "api", Namespace: "apps"}
	deploy = ownership.ObjectRef{Group: "apps", Kind: "Deployment", Namespace: "apps", Name: "web"}
)

func TestIndex_recordLookupForget(t *testing.T) {
	g := NewWithT(t)
	ix := ownership.NewIndex(0)
	g.Expect(ix.Cap()).To(Equal(ownership.DefaultMaxEntries))

	ix.Record("uid-1", deploy, web)
	g.Expect(found(ix.Lookup("uid-1"))).To(Equal(web))
	g.Expect(found(ix.LookupRef(deploy, ""))).To(Equal(web))
	g.Expect(found(ix.LookupRef(deploy, "uid-1"))).To(Equal(web))
	_, ok := ix.LookupRef(deploy, "uid-other")
	g.Expect(ok).To(BeFalse(), "a namesake with another UID is another object")
	g.Expect(ix.Len()).To(Equal(1))

	ix.Forget("uid-1")
	_, ok = ix.Lookup("uid-1")
	g.Expect(ok).To(BeFalse())
	_, ok = ix.LookupRef(deploy, "")
	g.Expect(ok).To(BeFalse(), "Forget removes the name too")
	g.Expect(ix.Len()).To(BeZero())

	ix.Record("uid-2", deploy, web)
	ix.ForgetRef(deploy)
	_, ok = ix.Lookup("uid-2")
	g.Expect(ok).To(BeFalse(), "ForgetRef removes the UID too")

	ix.Record("", ownership.ObjectRef{}, web)
	ix.Record("uid-3", deploy, ownership.Release{})
	g.Expect(ix.Len()).To(BeZero(), "nothing to key or no release: ignored")
}

func TestIndex_nameThenUIDJoinIntoOneEntry(t *testing.T) {
	g := NewWithT(t)
	ix := ownership.NewIndex(10)

	// Mutating admission at CREATE: name only.
	ix.Record("", deploy, web)
	g.Expect(found(ix.LookupRef(deploy, "uid-1"))).To(Equal(web), "a pending name matches any UID")
	// Validating admission: same object with its UID.
	ix.Record("uid-1", deploy, web)
	g.Expect(ix.Len()).To(Equal(1))
	g.Expect(found(ix.Lookup("uid-1"))).To(Equal(web))

	// Deleted and recreated by another release: the name moves on, the old
	// UID goes with its entry.
	ix.Record("uid-2", deploy, api)
	g.Expect(ix.Len()).To(Equal(1))
	_, ok := ix.Lookup("uid-1")
	g.Expect(ok).To(BeFalse())
	g.Expect(found(ix.Lookup("uid-2"))).To(Equal(api))

	// A UID first seen alone (metadata informer), then with its name.
	ix.Record("uid-9", ownership.ObjectRef{}, web)
	other := ownership.ObjectRef{Group: "apps", Kind: "ReplicaSet", Namespace: "apps", Name: "web-1"}
	ix.Record("uid-9", other, web)
	g.Expect(ix.Len()).To(Equal(2))
	g.Expect(found(ix.LookupRef(other, "uid-9"))).To(Equal(web))
}

func TestIndex_boundedLeastRecentlyUsedFirst(t *testing.T) {
	g := NewWithT(t)
	ix := ownership.NewIndex(3)
	for i := range 3 {
		ix.Record(types.UID(fmt.Sprint(i)), ownership.ObjectRef{}, web)
	}
	g.Expect(found(ix.Lookup("0"))).To(Equal(web)) // 0 is now the most recently used
	ix.Record("3", ownership.ObjectRef{}, web)
	ix.Record("", deploy, web) // a name-only entry counts too
	g.Expect(ix.Len()).To(Equal(3))
	for uid, want := range map[types.UID]bool{"0": true, "1": false, "2": false, "3": true} {
		_, ok := ix.Lookup(uid)
		g.Expect(ok).To(Equal(want), "uid %s", uid)
	}

	big := ownership.NewIndex(1000)
	for i := range 10_000 {
		big.Record(types.UID(fmt.Sprint(i)), ownership.ObjectRef{Kind: "ReplicaSet", Name: fmt.Sprint(i)}, web)
	}
	g.Expect(big.Len()).To(Equal(1000))
	_, ok := big.Lookup("9999")
	g.Expect(ok).To(BeTrue())
	_, ok = big.Lookup("8999")
	g.Expect(ok).To(BeFalse())
}

func TestIndex_ownerPrefersControllerAndFallsBackToName(t *testing.T) {
	g := NewWithT(t)
	ix := ownership.NewIndex(0)
	ix.Record("rs-uid", ownership.ObjectRef{}, web)
	ix.Record("", deploy, api)

	refs := []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "deploy-uid"},
		{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs-uid", Controller: ptr.To(true)},
	}
	g.Expect(found(ix.Owner("apps", refs))).To(Equal(web), "the controller reference wins")
	g.Expect(found(ix.Owner("apps", refs[:1]))).To(Equal(api), "found by name while its UID is unknown")
	_, ok := ix.Owner("other", refs[:1])
	g.Expect(ok).To(BeFalse(), "names are per namespace")
	_, ok = ix.Owner("apps", nil)
	g.Expect(ok).To(BeFalse())
}

func TestIndex_eventHandlerFollowsInformer(t *testing.T) {
	g := NewWithT(t)
	ix := ownership.NewIndex(0)
	h := ix.EventHandler(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "web", Namespace: "apps", UID: "uid-1", Labels: web.Labels(),
	}}
	h.OnAdd(obj, true)
	g.Expect(found(ix.Lookup("uid-1"))).To(Equal(web))
	g.Expect(found(ix.LookupRef(deploy, "uid-1"))).To(Equal(web))

	unlabelled := obj.DeepCopy()
	unlabelled.Labels = nil
	h.OnUpdate(obj, unlabelled)
	g.Expect(ix.Len()).To(BeZero(), "an object that lost its labels is no longer tracked")

	h.OnAdd(obj, false)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "apps/web", Obj: obj})
	g.Expect(ix.Len()).To(BeZero())

	ix.Observe(obj)
	g.Expect(found(ix.Lookup("uid-1"))).To(Equal(web))
}

func TestIndex_concurrentUse(t *testing.T) {
	ix := ownership.NewIndex(500)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				uid := types.UID(fmt.Sprint(w, "-", i%700))
				ix.Record(uid, ownership.ObjectRef{Kind: "Job", Name: string(uid)}, web)
				ix.Lookup(uid)
				if i%3 == 0 {
					ix.Forget(uid)
				}
			}
		})
	}
	wg.Wait()
	if n := ix.Len(); n > 500 {
		t.Fatalf("index grew to %d entries past its bound 500", n)
	}
}

func TestReleaseFrom(t *testing.T) {
	g := NewWithT(t)
	helm := map[string]string{
		ownership.AnnotationHelmReleaseName:      "web",
		ownership.AnnotationHelmReleaseNamespace: "apps",
	}
	g.Expect(found(ownership.ReleaseFrom(nil, helm))).To(Equal(web))
	g.Expect(found(ownership.ReleaseFrom(api.Labels(), helm))).To(Equal(web), "Helm's annotations win")
	g.Expect(found(ownership.ReleaseFrom(api.Labels(), nil))).To(Equal(api))
	_, ok := ownership.ReleaseFrom(map[string]string{tugboatv1alpha1.LabelRelease: "web"}, nil)
	g.Expect(ok).To(BeFalse(), "both labels are needed")
	_, ok = ownership.ReleaseFrom(nil, map[string]string{
		ownership.AnnotationHelmReleaseName:      "not a label value!",
		ownership.AnnotationHelmReleaseNamespace: "apps",
	})
	g.Expect(ok).To(BeFalse(), "a value that cannot be a label is never used")
	g.Expect(ownership.HasLabels(web.Labels(), web)).To(BeTrue())
	g.Expect(ownership.HasLabels(nil, web)).To(BeFalse())
}

// found returns the release of a lookup, or "missing".
func found(rel ownership.Release, ok bool) any {
	if !ok {
		return "missing"
	}
	return rel
}
