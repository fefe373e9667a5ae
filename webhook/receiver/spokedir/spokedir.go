package spokedir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/releasehistory"
	"tugboat.dev/tugboat/webhook/receiver"
)

// maxCachedSecrets bounds the key cache; it is cleared when full.
const maxCachedSecrets = 10_000

// Directory implements receiver.SpokeDirectory over the API server.
type Directory struct {
	// client reads Spokes from the manager's cache, which must have
	// releasehistory.SpokeNameIndex registered, and patches their status.
	client client.Client
	// api reads Secrets uncached: the hub does not watch Secrets.
	api client.Reader
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	keys map[types.NamespacedName]cachedSecret
}

type cachedSecret struct {
	agent, flux receiver.SpokeKeys
	expires     time.Time
}

var _ receiver.SpokeDirectory = (*Directory)(nil)

// New returns a Directory reading Spokes through c (the manager's cached
// client) and key Secrets through api (its APIReader), keeping keys for ttl
// (a rotated key is used within it).
func New(c client.Client, api client.Reader, ttl time.Duration) *Directory {
	return &Directory{client: c, api: api, ttl: ttl, now: time.Now, keys: make(map[types.NamespacedName]cachedSecret)}
}

// Spokes returns every live Spoke named name, with its keys. A Spoke whose
// key Secret is missing has no keys (it authenticates nothing). It returns
// receiver.ErrNotReady until the cache has started.
func (d *Directory) Spokes(ctx context.Context, name string) ([]receiver.Spoke, error) {
	var list tugboatv1alpha1.SpokeList
	if err := d.client.List(ctx, &list, client.MatchingFields{releasehistory.SpokeNameIndex: name}); err != nil {
		if errors.As(err, new(*cache.ErrCacheNotStarted)) {
			return nil, fmt.Errorf("%w: %w", receiver.ErrNotReady, err)
		}
		return nil, fmt.Errorf("listing spokes named %s: %w", name, err)
	}
	out := make([]receiver.Spoke, 0, len(list.Items))
	for i := range list.Items {
		sp := &list.Items[i]
		if sp.DeletionTimestamp != nil {
			continue
		}
		agent, flux, err := d.secretKeys(ctx, types.NamespacedName{Namespace: sp.Namespace, Name: sp.Spec.KeySecretRef.Name})
		if err != nil {
			return nil, err
		}
		s := receiver.Spoke{
			SpokeRef:  receiver.SpokeRef{Namespace: sp.Namespace, Name: sp.Name},
			Keys:      agent,
			FluxKeys:  flux,
			Suspended: sp.Spec.Suspend,
		}
		if t := sp.Status.LastSnapshotTakenAt; t != nil {
			s.LastSnapshotTakenAt = t.Time
		}
		out = append(out, s)
	}
	return out, nil
}

// secretKeys returns the agent and Flux keys in Secret key, cached for the
// TTL. The key material is used as stored (surrounding whitespace trimmed);
// a previous key equal to the current one is dropped.
func (d *Directory) secretKeys(ctx context.Context, key types.NamespacedName) (agent, flux receiver.SpokeKeys, err error) {
	now := d.now()
	d.mu.Lock()
	c, ok := d.keys[key]
	d.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.agent, c.flux, nil
	}
	secret := &corev1.Secret{}
	switch err := d.api.Get(ctx, key, secret); {
	case apierrors.IsNotFound(err):
		// The Spoke controller generates it; until then the spoke
		// cannot authenticate.
	case err != nil:
		return agent, flux, fmt.Errorf("reading key secret %s: %w", key, err)
	default:
		agent = keysOf(secret, tugboatv1alpha1.SpokeKeySecretKey, tugboatv1alpha1.SpokePreviousKeySecretKey)
		flux = keysOf(secret, tugboatv1alpha1.SpokeFluxKeySecretKey, tugboatv1alpha1.SpokePreviousFluxKeySecretKey)
	}
	d.mu.Lock()
	if len(d.keys) >= maxCachedSecrets {
		clear(d.keys)
	}
	d.keys[key] = cachedSecret{agent: agent, flux: flux, expires: now.Add(d.ttl)}
	d.mu.Unlock()
	return agent, flux, nil
}

func keysOf(secret *corev1.Secret, current, previous string) receiver.SpokeKeys {
	cur := []byte(strings.TrimSpace(string(secret.Data[current])))
	prev := []byte(strings.TrimSpace(string(secret.Data[previous])))
	if len(cur) == 0 {
		return receiver.SpokeKeys{}
	}
	if len(prev) == 0 || string(prev) == string(cur) {
		prev = nil
	}
	return receiver.SpokeKeys{Current: cur, Previous: prev}
}

// FluxEventReceived sets status.lastFluxEvent of the Spoke ref (a merge
// patch of that one field): the liveness of an agentless spoke.
func (d *Directory) FluxEventReceived(ctx context.Context, ref receiver.SpokeRef, ev receiver.FluxEventSummary) error {
	rec := tugboatv1alpha1.FluxEventRecord{ReceivedAt: metav1.NewTime(ev.ReceivedAt.UTC().Truncate(time.Second)), Reason: ev.Reason, Object: ev.Object, KeyID: ev.KeyID}
	data, err := json.Marshal(map[string]any{"status": map[string]any{"lastFluxEvent": rec}})
	if err != nil {
		return err
	}
	sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}}
	if err := d.client.Status().Patch(ctx, sp, client.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("recording the last Flux event of spoke %s: %w", ref, err)
	}
	return nil
}
