package spoke

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// MarkKeysUpdated sets the Spoke's tugboatv1alpha1.KeysUpdatedAtAnnotation
// to now (a merge patch of that one annotation). Whoever writes a Spoke's
// key Secret on the hub calls it after the write: every hub replica then
// re-reads the keys at once (a removed key is refused from the next
// request) and the Spoke controller checks the Secret again.
func MarkKeysUpdated(ctx context.Context, c client.Client, sp *tugboatv1alpha1.Spoke, now time.Time, opts ...client.PatchOption) error {
	value := now.UTC().Format(time.RFC3339Nano)
	if value == sp.Annotations[tugboatv1alpha1.KeysUpdatedAtAnnotation] {
		// Only a change of the value tells the hub anything.
		value = now.Add(time.Nanosecond).UTC().Format(time.RFC3339Nano)
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{tugboatv1alpha1.KeysUpdatedAtAnnotation: value}}})
	if err != nil {
		return err
	}
	obj := &tugboatv1alpha1.Spoke{}
	obj.Namespace, obj.Name = sp.Namespace, sp.Name
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data), opts...); err != nil {
		return fmt.Errorf("setting annotation %s on spoke %s/%s (without it the hub re-reads the keys within its --spoke-key-cache-ttl): %w",
			tugboatv1alpha1.KeysUpdatedAtAnnotation, sp.Namespace, sp.Name, err)
	}
	return nil
}

// keyChecks remembers per Spoke (by UID) the last check of its key Secret
// that found it fine (or generated it): the Spoke's generation and keys
// annotation then, when, and whether the Secret held a Flux key. A check
// that found a problem is not remembered, so the next reconcile checks
// again. (Generating a Secret sets the annotation, so the reconcile that
// follows reads it once more.)
type keyChecks struct {
	mu sync.Mutex
	m  map[types.UID]keyCheck
}

type keyCheck struct {
	generation int64
	annotation string
	at         time.Time
	agentless  bool
}

// maxKeyChecks bounds keyChecks; it is cleared when full (costing one read
// per Spoke).
const maxKeyChecks = 50_000

// fresh returns what the last check of sp's Secret found, if it was made
// under sp's current generation and keys annotation less than recheck ago.
func (k *keyChecks) fresh(sp *tugboatv1alpha1.Spoke, now time.Time, recheck time.Duration) (agentless, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, found := k.m[sp.UID]
	if !found || c.generation != sp.Generation || c.annotation != sp.Annotations[tugboatv1alpha1.KeysUpdatedAtAnnotation] ||
		now.Sub(c.at) >= recheck || now.Before(c.at) {
		return false, false
	}
	return c.agentless, true
}

// found records a check of sp's Secret that found it fine (or generated it).
func (k *keyChecks) found(sp *tugboatv1alpha1.Spoke, now time.Time, agentless bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) >= maxKeyChecks {
		k.m = make(map[types.UID]keyCheck)
	}
	k.m[sp.UID] = keyCheck{generation: sp.Generation, annotation: sp.Annotations[tugboatv1alpha1.KeysUpdatedAtAnnotation], at: now, agentless: agentless}
}

// forget drops what was remembered of a Spoke.
func (k *keyChecks) forget(uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, uid)
}
