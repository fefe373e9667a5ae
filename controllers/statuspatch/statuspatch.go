// Package statuspatch is the one way tugboat's reconcilers write the status
// of the object they reconcile: once, in a defer, whatever the way out of
// the reconcile, on objects that implement Flux's conditions contract
// (fluxcd/pkg/runtime/conditions: GetConditions, SetConditions).
//
//	p := statuspatch.New(obj, r.Client)
//	defer func() { retErr = p.Patch(ctx, obj, retErr == nil, retErr) }()
//
// What changed in the status since the object was read is written in one
// merge patch, and nothing when nothing changed (a reconcile that finds
// everything as it was costs the API server no request).
// status.observedGeneration is set to the generation reconciled when the
// caller says the reconcile observed it. The field manager is FieldOwner.
//
// Why not Flux's patch helper (fluxcd/pkg/runtime/patch), which merges
// conditions with the object's current ones: it writes the conditions and
// the rest of the status in two requests, and a reconcile brought by the
// first sees a status half written. For a Spoke that is an agent
// installed twice: the condition said installed, status.agentBootstrap
// (written second) did not yet (TestBootstrap_suspendedSpokeGetsNoInstallUntilResumed
// failed that way). One request keeps a status whole; the conditions a
// reconciler writes (Ready, Reconciling, Stalled and its kind's own) have
// no other writer on these kinds.
//
// It is not the place for a status written by more than one writer at a
// time (a Promotion's targets, which the receiver writes too): those patch
// with an optimistic lock, each on its own (WithOptimisticLock).
package statuspatch

import (
	"context"
	"reflect"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// FieldOwner is the field manager of the hub's reconcilers' status writes.
const FieldOwner = "tugboat-hub"

// MaxMessageLength bounds a condition's message.
const MaxMessageLength = 1024

// Object is an object with status conditions: Flux's conditions contract,
// which api/v1alpha1 implements for every kind with conditions. Its Go
// type is a pointer to a struct with a Status field holding an
// ObservedGeneration int64 (every tugboat kind has both).
type Object = conditions.Setter

// Patcher writes the status of one object as its reconcile ends.
type Patcher struct {
	c      client.Client
	before Object
	lock   bool
}

// Option configures a Patcher.
type Option func(*Patcher)

// WithOptimisticLock makes the patch carry the resourceVersion read: a
// status another writer changed since is a Conflict error, not
// overwritten.
func WithOptimisticLock() Option { return func(p *Patcher) { p.lock = true } }

// New returns a Patcher for obj as just read: what Patch writes is what
// changed since.
func New(obj Object, c client.Client, opts ...Option) *Patcher {
	p := &Patcher{c: c, before: obj.DeepCopyObject().(Object)}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Patch writes what changed in obj's status since New (or the last
// Patch), with status.observedGeneration set to obj's generation when
// observed. It returns retErr when there is one (the reconcile's own error
// comes first), else the write's error; an object deleted meanwhile is not
// an error.
func (p *Patcher) Patch(ctx context.Context, obj Object, observed bool, retErr error) error {
	if observed {
		if f := statusOf(obj).FieldByName("ObservedGeneration"); f.IsValid() && f.CanSet() && f.Kind() == reflect.Int64 {
			f.SetInt(obj.GetGeneration())
		}
	}
	err := p.write(ctx, obj)
	if retErr != nil {
		return retErr
	}
	return err
}

// Changed reports whether obj's status differs from what Patch last wrote
// (or what New was given).
func (p *Patcher) Changed(obj Object) bool {
	before, after := statusOf(p.before), statusOf(obj)
	if !before.IsValid() || !after.IsValid() {
		return true
	}
	return !equality.Semantic.DeepEqual(before.Interface(), after.Interface())
}

func (p *Patcher) write(ctx context.Context, obj Object) error {
	if !p.Changed(obj) {
		return nil
	}
	var lock []client.MergeFromOption
	if p.lock {
		lock = append(lock, client.MergeFromWithOptimisticLock{})
	}
	patch := client.MergeFromWithOptions(p.before, lock...)
	if err := p.c.Status().Patch(ctx, obj, patch, client.FieldOwner(FieldOwner)); err != nil {
		return client.IgnoreNotFound(err)
	}
	p.before = obj.DeepCopyObject().(Object)
	return nil
}

// statusOf is obj's Status field (what a status patch writes): the
// invalid Value when obj has none, which compares equal to any other.
func statusOf(obj Object) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.Elem().FieldByName("Status")
}

// Set sets condition t of obj, its message bounded and its
// observedGeneration obj's generation. Its lastTransitionTime moves only
// when its status changes (Kubernetes' convention, apimeta's
// SetStatusCondition): a new message or reason keeps it, so "Reconciling
// since" ages (tugboat doctor's) are not reset by a progress message.
// Flux's conditions.Set would move it on a new reason or message too.
func Set(obj Object, t tugboatv1alpha1.ConditionType, status metav1.ConditionStatus, reason tugboatv1alpha1.ConditionReason, msg string) {
	conds := obj.GetConditions()
	apimeta.SetStatusCondition(&conds, metav1.Condition{Type: t.String(), Status: status, Reason: reason.String(),
		Message: clip.String(msg, MaxMessageLength), ObservedGeneration: obj.GetGeneration()})
	obj.SetConditions(conds)
}

// Delete removes condition t of obj.
func Delete(obj Object, t tugboatv1alpha1.ConditionType) {
	conds := obj.GetConditions()
	apimeta.RemoveStatusCondition(&conds, t.String())
	obj.SetConditions(conds)
}
