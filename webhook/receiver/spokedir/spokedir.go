package spokedir

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/controllers/releasehistory"
	"tugboat.dev/tugboat/webhook/receiver"
)

// maxCachedSecrets bounds the key cache (a few hundred bytes per Spoke);
// it is cleared when full. Keys are kept for the TTL (5 min by default), so
// the bound must exceed the fleet: ten times the 5,000 spokes one hub is
// measured with (docs/benchmarks.md), or every clear would re-read them all.
const maxCachedSecrets = 50_000

// MinForcedReadInterval is the least time between two reads of one Spoke's
// key Secret forced by a request that failed to verify (RefreshKeys).
const MinForcedReadInterval = time.Second

// Why a key Secret was read: the reason label of
// tugboat_receiver_key_reads_total.
const (
	// ReadFirst: the Spoke's keys were never read (or were evicted).
	ReadFirst = "first"
	// ReadKeysChanged: the Spoke's keys annotation or Secret name changed.
	ReadKeysChanged = "keys_changed"
	// ReadVerificationFailed: a request of the Spoke failed to verify.
	ReadVerificationFailed = "verification_failed"
	// ReadTTL: --spoke-key-cache-ttl passed since the last read.
	ReadTTL = "ttl"
)

var keyReadsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tugboat_receiver_key_reads_total",
	Help: "Spoke key Secrets read from the API server, by reason: first, keys_changed, verification_failed, ttl.",
}, []string{"reason"})

var keyReadsLimitedTotal = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "tugboat_receiver_key_reads_limited_total",
	Help: "Spoke key Secret reads that a request which failed to verify would have forced, not made because --spoke-key-forced-reads-per-second (over all spokes) was reached.",
})

func init() {
	for _, r := range []string{ReadFirst, ReadKeysChanged, ReadVerificationFailed, ReadTTL} {
		keyReadsTotal.WithLabelValues(r)
	}
	metrics.Registry.MustRegister(keyReadsTotal, keyReadsLimitedTotal)
}

// Directory implements receiver.SpokeDirectory over the API server.
//
// It reads a Spoke's key Secret (uncached: the hub may only get Secrets,
// never list or watch them) once, then answers from memory until one of:
//   - the Spoke's tugboat.dev/keys-updated-at annotation changes (whoever
//     changes the keys sets it; the Spoke comes from the manager's informer,
//     so every replica sees it within milliseconds): a removed key is
//     refused from the next request on;
//   - a request of the Spoke fails to verify (RefreshKeys, at most once a
//     second per Spoke, and Options.ForcedReadsPerSecond over all Spokes):
//     a new key works on its first request;
//   - the TTL passes: the bound for hand edits of the Secret that do not set
//     the annotation.
//
// The steady state of a fleet therefore reads no Secret.
type Directory struct {
	// client reads Spokes from the manager's cache, which must have
	// releasehistory.SpokeNameIndex registered, and patches their status.
	client client.Client
	// api reads Secrets uncached: the hub does not watch Secrets.
	api client.Reader
	ttl time.Duration
	now func() time.Time
	// forced is the token bucket of the reads RefreshKeys forces, over all
	// Spokes (Options.ForcedReadsPerSecond).
	forced *rate.Limiter

	mu   sync.Mutex
	keys map[receiver.SpokeRef]cachedSecret
	// forcing holds a channel per Spoke whose forced read is under way,
	// closed when it ends.
	forcing map[receiver.SpokeRef]chan struct{}
}

// cachedSecret is what a Spoke's key Secret held when last read.
type cachedSecret struct {
	// secret is the name of the Secret read (spec.keySecretRef) and
	// annotation the Spoke's KeysUpdatedAtAnnotation then: a change of
	// either makes the next request read again.
	secret, annotation string
	agent, flux        ingest.SpokeKeys
	readAt             time.Time
	// expiresAt is when the TTL of this read ends: readAt + the TTL,
	// shortened by up to a fifth at random, so Secrets read together (a
	// fleet announcing itself after a hub restart) are not read again
	// all at once.
	expiresAt time.Time
	// forcedAt is when RefreshKeys last read the Secret.
	forcedAt time.Time
}

var (
	_ receiver.SpokeDirectory = (*Directory)(nil)
	_ receiver.KeyRefresher   = (*Directory)(nil)
)

// New returns a Directory reading Spokes through c (the manager's cached
// client) and key Secrets through api (its APIReader), keeping keys for at
// most ttl (0: read them on every request); see Directory and Options.
func New(c client.Client, api client.Reader, ttl time.Duration, opts Options) *Directory {
	return &Directory{client: c, api: api, ttl: ttl, now: time.Now, forced: opts.limiter(),
		keys: make(map[receiver.SpokeRef]cachedSecret), forcing: make(map[receiver.SpokeRef]chan struct{})}
}

// Spokes returns every live Spoke named name, with its keys. A Spoke whose
// key Secret is missing has no keys (it authenticates nothing). It returns
// ingest.ErrNotReady until the cache has started.
func (d *Directory) Spokes(ctx context.Context, name string) ([]receiver.Spoke, error) {
	var list tugboatv1alpha1.SpokeList
	if err := d.client.List(ctx, &list, client.MatchingFields{releasehistory.SpokeNameIndex: name}); err != nil {
		if errors.As(err, new(*cache.ErrCacheNotStarted)) {
			return nil, fmt.Errorf("%w: %w", ingest.ErrNotReady, err)
		}
		return nil, fmt.Errorf("listing spokes named %s: %w", name, err)
	}
	out := make([]receiver.Spoke, 0, len(list.Items))
	for i := range list.Items {
		sp := &list.Items[i]
		if sp.DeletionTimestamp != nil {
			continue
		}
		c, err := d.secretKeys(ctx, sp)
		if err != nil {
			return nil, err
		}
		s := receiver.Spoke{
			SpokeRef:  receiver.SpokeRef{Namespace: sp.Namespace, Name: sp.Name},
			Keys:      c.agent,
			FluxKeys:  c.flux,
			Suspended: sp.Spec.Suspend,
		}
		if t := sp.Status.LastSnapshotTakenAt; t != nil {
			s.LastSnapshotTakenAt = t.Time
		}
		out = append(out, s)
	}
	return out, nil
}

// RefreshKeys implements receiver.KeyRefresher: it re-reads the key Secret
// of sp unless it did less than MinForcedReadInterval ago or the forced
// reads of all Spokes reached Options.ForcedReadsPerSecond, and reports
// whether the keys it now holds for sp differ from sp's. A request that
// comes while such a read is under way waits for it and uses what it read,
// so the requests an agent sends at once with a new key all verify.
func (d *Directory) RefreshKeys(ctx context.Context, sp receiver.Spoke) (receiver.Spoke, bool, error) {
	spoke := &tugboatv1alpha1.Spoke{}
	if err := d.client.Get(ctx, types.NamespacedName{Namespace: sp.Namespace, Name: sp.Name}, spoke); err != nil {
		if apierrors.IsNotFound(err) {
			return sp, false, nil
		}
		return sp, false, fmt.Errorf("reading spoke %s: %w", sp.SpokeRef, err)
	}
	now := d.now()
	d.mu.Lock()
	if inflight, ok := d.forcing[sp.SpokeRef]; ok {
		d.mu.Unlock()
		select {
		case <-inflight:
		case <-ctx.Done():
			return sp, false, ctx.Err()
		}
		return d.cachedIfChanged(sp)
	}
	c, ok := d.keys[sp.SpokeRef]
	switch {
	case ok && !c.readAt.IsZero() && !sameKeys(c, sp):
		// Read since sp was given out (another request forced it, or the
		// annotation changed): no need to read again.
		d.mu.Unlock()
		return withKeys(sp, c), true, nil
	case ok && now.Sub(c.forcedAt) < MinForcedReadInterval:
		d.mu.Unlock()
		return sp, false, nil
	case !d.forced.AllowN(now, 1):
		// Over the cap of all Spokes: anonymous requests naming many
		// spokes must not drive a read for each.
		d.mu.Unlock()
		keyReadsLimitedTotal.Inc()
		return sp, false, nil
	}
	c.forcedAt = now
	d.keys[sp.SpokeRef] = c
	inflight := make(chan struct{})
	d.forcing[sp.SpokeRef] = inflight
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.forcing, sp.SpokeRef)
		d.mu.Unlock()
		close(inflight)
	}()
	keyReadsTotal.WithLabelValues(ReadVerificationFailed).Inc()
	fresh, err := d.read(ctx, spoke, now)
	if err != nil {
		return sp, false, err
	}
	return withKeys(sp, fresh), !sameKeys(fresh, sp), nil
}

// cachedIfChanged returns sp with the keys cached for it, and whether they
// differ from sp's.
func (d *Directory) cachedIfChanged(sp receiver.Spoke) (receiver.Spoke, bool, error) {
	d.mu.Lock()
	c, ok := d.keys[sp.SpokeRef]
	d.mu.Unlock()
	if ok && !c.readAt.IsZero() && !sameKeys(c, sp) {
		return withKeys(sp, c), true, nil
	}
	return sp, false, nil
}

func sameKeys(c cachedSecret, sp receiver.Spoke) bool {
	eq := func(a, b ingest.SpokeKeys) bool {
		return bytes.Equal(a.Current, b.Current) && bytes.Equal(a.Previous, b.Previous)
	}
	return eq(c.agent, sp.Keys) && eq(c.flux, sp.FluxKeys)
}

func withKeys(sp receiver.Spoke, c cachedSecret) receiver.Spoke {
	sp.Keys, sp.FluxKeys = c.agent, c.flux
	return sp
}

// secretKeys returns the agent and Flux keys of sp's key Secret, as read
// last unless that was under another Secret name or keys annotation, or
// longer than the TTL ago. The key material is used as stored (surrounding
// whitespace trimmed); a previous key equal to the current one is dropped.
func (d *Directory) secretKeys(ctx context.Context, sp *tugboatv1alpha1.Spoke) (cachedSecret, error) {
	now := d.now()
	ref := receiver.SpokeRef{Namespace: sp.Namespace, Name: sp.Name}
	d.mu.Lock()
	c, ok := d.keys[ref]
	d.mu.Unlock()
	reason := ReadTTL
	switch {
	case !ok || c.readAt.IsZero():
		reason = ReadFirst
	case c.secret != sp.Spec.KeySecretRef.Name || c.annotation != sp.Annotations[tugboatv1alpha1.KeysUpdatedAtAnnotation]:
		reason = ReadKeysChanged
	case now.Before(c.expiresAt):
		return c, nil
	}
	keyReadsTotal.WithLabelValues(reason).Inc()
	return d.read(ctx, sp, now)
}

// read reads sp's key Secret and caches what it holds, keeping the time of
// the last forced read.
func (d *Directory) read(ctx context.Context, sp *tugboatv1alpha1.Spoke, now time.Time) (cachedSecret, error) {
	key := types.NamespacedName{Namespace: sp.Namespace, Name: sp.Spec.KeySecretRef.Name}
	c := cachedSecret{secret: key.Name, annotation: sp.Annotations[tugboatv1alpha1.KeysUpdatedAtAnnotation], readAt: now,
		expiresAt: now.Add(d.ttl - time.Duration(rand.Int64N(int64(d.ttl)/5+1)))} //nolint:gosec // spreads reads; nothing secret
	secret := &corev1.Secret{}
	switch err := d.api.Get(ctx, key, secret); {
	case apierrors.IsNotFound(err):
		// The Spoke controller generates it; until then the spoke
		// cannot authenticate.
	case err != nil:
		return c, fmt.Errorf("reading key secret %s: %w", key, err)
	default:
		c.agent = keysOf(secret, tugboatv1alpha1.SpokeKeySecretKey, tugboatv1alpha1.SpokePreviousKeySecretKey)
		c.flux = keysOf(secret, tugboatv1alpha1.SpokeFluxKeySecretKey, tugboatv1alpha1.SpokePreviousFluxKeySecretKey)
	}
	ref := receiver.SpokeRef{Namespace: sp.Namespace, Name: sp.Name}
	d.mu.Lock()
	if len(d.keys) >= maxCachedSecrets {
		clear(d.keys)
	}
	c.forcedAt = d.keys[ref].forcedAt
	d.keys[ref] = c
	d.mu.Unlock()
	return c, nil
}

func keysOf(secret *corev1.Secret, current, previous string) ingest.SpokeKeys {
	cur := []byte(strings.TrimSpace(string(secret.Data[current])))
	prev := []byte(strings.TrimSpace(string(secret.Data[previous])))
	if len(cur) == 0 {
		return ingest.SpokeKeys{}
	}
	if len(prev) == 0 || string(prev) == string(cur) {
		prev = nil
	}
	return ingest.SpokeKeys{Current: cur, Previous: prev}
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
