package ownership

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// EventHandler returns informer handlers that keep the index in step with an
// informer of objects of kind gk (typically a metadata-only informer
// selecting tugboatv1alpha1.LabelRelease): adds and updates record the object by UID and
// name, deletes forget it. Objects naming no release are forgotten, so an
// object whose labels were removed stops counting as a tracked owner.
func (ix *Index) EventHandler(gk schema.GroupKind) cache.ResourceEventHandler {
	observe := func(obj any) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return
		}
		if rel, ok := ReleaseOf(m); ok {
			ix.Record(m.GetUID(), ObjectRef{Group: gk.Group, Kind: gk.Kind, Namespace: m.GetNamespace(), Name: m.GetName()}, rel)
			return
		}
		ix.Forget(m.GetUID())
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if m, err := meta.Accessor(obj); err == nil {
				ix.Forget(m.GetUID())
			}
		},
	}
}
