package receiver_test

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/webhook/receiver"
)

// cachingDirectory is a receiver.SpokeDirectory and receiver.KeyRefresher
// over a memStore (the keys as stored) that gives out the keys it last
// "read" (cached): the keys a real directory holds between reads.
type cachingDirectory struct {
	*memStore
	mu     sync.Mutex
	cached map[receiver.SpokeRef]receiver.Spoke
	// refreshes counts RefreshKeys calls.
	refreshes int
}

var _ receiver.KeyRefresher = (*cachingDirectory)(nil)

func newCachingDirectory(store *memStore) *cachingDirectory {
	return &cachingDirectory{memStore: store, cached: map[receiver.SpokeRef]receiver.Spoke{}}
}

func (d *cachingDirectory) Spokes(ctx context.Context, name string) ([]receiver.Spoke, error) {
	stored, err := d.memStore.Spokes(ctx, name)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, sp := range stored {
		if c, ok := d.cached[sp.SpokeRef]; ok {
			stored[i].Keys, stored[i].FluxKeys = c.Keys, c.FluxKeys
		} else {
			d.cached[sp.SpokeRef] = sp
		}
	}
	return stored, nil
}

func (d *cachingDirectory) RefreshKeys(ctx context.Context, sp receiver.Spoke) (receiver.Spoke, bool, error) {
	stored, err := d.memStore.Spokes(ctx, sp.Name)
	if err != nil {
		return sp, false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refreshes++
	for _, s := range stored {
		if s.SpokeRef == sp.SpokeRef {
			d.cached[s.SpokeRef] = s
			same := func(a, b ingest.SpokeKeys) bool {
				return bytes.Equal(a.Current, b.Current) && bytes.Equal(a.Previous, b.Previous)
			}
			changed := !same(s.Keys, sp.Keys) || !same(s.FluxKeys, sp.FluxKeys)
			sp.Keys, sp.FluxKeys = s.Keys, s.FluxKeys
			return sp, changed, nil
		}
	}
	return sp, false, nil
}

func (d *cachingDirectory) refreshCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.refreshes
}

func cachingHarness(t *testing.T) (*harness, *cachingDirectory) {
	store := newMemStore()
	store.setKeys(testSpoke, oldKey, nil)
	store.setFluxKeys(testSpoke, fluxOldKey, nil)
	dir := newCachingDirectory(store)
	h := newHarnessWithStore(t, store, func(o *receiver.Options) { o.Spokes = dir })
	// Prime the cache with the keys before the rotation.
	_, err := dir.Spokes(context.Background(), testSpoke)
	if err != nil {
		t.Fatal(err)
	}
	return h, dir
}

// TestReceiver_aNewKeyVerifiesOnItsFirstRequest: a key written to the
// Spoke's Secret after the directory cached the old ones (a rotation, with
// no wait) verifies on its first request, agent and Flux alike: the
// mismatch makes the receiver re-read the keys and verify once more.
func TestReceiver_aNewKeyVerifiesOnItsFirstRequest(t *testing.T) {
	g := NewWithT(t)
	h, dir := cachingHarness(t)
	h.store.setKeys(testSpoke, testKey, oldKey)
	h.store.setFluxKeys(testSpoke, fluxTestKey, fluxOldKey)

	verifications := func(endpoint string) float64 {
		return h.metric("tugboat_receiver_signature_verifications_total", map[string]string{"endpoint": endpoint})
	}
	body := mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)))
	g.Expect(accepted(g, h.do(signed(wire.EventsPath(testSpoke), testKey, body, testNow))).Accepted).To(Equal(1))
	g.Expect(dir.refreshCount()).To(Equal(1))
	g.Expect(verifications("events")).To(Equal(4.0), "the cached keys, then the new ones")

	// The next request verifies with the refreshed cache at once.
	g.Expect(h.do(signed(wire.EventsPath(testSpoke), testKey, mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 2))), testNow)).Code).To(Equal(http.StatusAccepted))
	g.Expect(dir.refreshCount()).To(Equal(1))

	p := helmReleaseEvent("UpgradeSucceeded", "info", "Helm upgrade succeeded for release apps/web.v3 with chart web@1.5.0", nil, testNow)
	g.Expect(postFlux(h, testSpoke, fluxTestKey, p).Code).To(Equal(http.StatusAccepted))
	g.Expect(h.store.recorded(testSpoke)).To(HaveLen(3))
}

// TestReceiver_aBadSignatureCostsTheSameWithACachingDirectory keeps issue
// 12 Low 2 with key refresh: a known spoke's bad signature makes the
// directory re-read its keys (a read the directory rate-limits), but since
// the keys did not change it costs no second verification: the same HMAC
// work and the same answer as an unknown spoke, which causes no read. A
// stale timestamp, which new keys cannot cure, causes no read either.
func TestReceiver_aBadSignatureCostsTheSameWithACachingDirectory(t *testing.T) {
	g := NewWithT(t)
	h, dir := cachingHarness(t)
	body := mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)))
	work := func(req *http.Request) float64 {
		before := h.metric("tugboat_receiver_signature_verifications_total", map[string]string{"endpoint": "events"})
		g.Expect(h.do(req).Code).To(Equal(http.StatusUnauthorized))
		return h.metric("tugboat_receiver_signature_verifications_total", map[string]string{"endpoint": "events"}) - before
	}
	unknown := work(signed(wire.EventsPath("nobody"), testKey, body, testNow))
	g.Expect(unknown).To(BeNumerically(">", 0))
	g.Expect(dir.refreshCount()).To(Equal(0), "an unknown spoke causes no read")
	g.Expect(work(signed(wire.EventsPath(testSpoke), wrongKey, body, testNow))).To(Equal(unknown))
	g.Expect(dir.refreshCount()).To(Equal(1), "a known spoke's mismatch asks for its keys")
	g.Expect(work(signed(wire.EventsPath(testSpoke), oldKey, body, testNow.Add(-time.Hour)))).To(Equal(unknown))
	g.Expect(dir.refreshCount()).To(Equal(1), "a stale timestamp is not a reason to re-read")
	a := h.do(signed(wire.EventsPath("nobody"), testKey, body, testNow))
	b := h.do(signed(wire.EventsPath(testSpoke), wrongKey, body, testNow))
	g.Expect(a.Body.String()).To(Equal(b.Body.String()))
}
