package spokedir_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/webhook/receiver"
	"tugboat.dev/tugboat/webhook/receiver/spokedir"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const testTTL = 5 * time.Minute

// cachingDirectory returns a Directory with the default-like TTL, a
// settable clock and a count of its Secret GETs.
func cachingDirectory() (*spokedir.Directory, *harness.GetCounter[*corev1.Secret], *clock) {
	reads := harness.CountGets[*corev1.Secret](apiReader)
	clk := &clock{t: time.Now()}
	d := spokedir.New(mgrClient, reads, testTTL, spokedir.NewOptions())
	spokedir.SetClock(d, clk.now)
	return d, reads, clk
}

// setUpSpoke creates namespace ns with Spoke name and its key Secret
// holding data, and waits until d finds the Spoke with keys.
func setUpSpoke(t *testing.T, d *spokedir.Directory, ns, name string, data map[string][]byte) receiver.Spoke {
	t.Helper()
	g := NewWithT(t)
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, keySecret(ns, name, data), spoke(ns, name, false))
	var sp receiver.Spoke
	g.Eventually(func() ([]receiver.Spoke, error) { return d.Spokes(context.Background(), name) }).WithTimeout(10 * time.Second).
		Should(ConsistOf(HaveField("SpokeRef", receiver.SpokeRef{Namespace: ns, Name: name})))
	spokes, err := d.Spokes(context.Background(), name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(spokes).To(HaveLen(1))
	sp = spokes[0]
	g.Expect(sp.Keys.Current).To(Equal(data[tugboatv1alpha1.SpokeKeySecretKey]))
	return sp
}

// updateSecret replaces the data of Spoke name's key Secret on the API server.
func updateSecret(t *testing.T, ns, name string, data map[string][]byte) {
	t.Helper()
	g := NewWithT(t)
	secret := &corev1.Secret{}
	g.Expect(cluster.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name + "-key"}, secret)).To(Succeed())
	secret.Data = data
	g.Expect(cluster.Client.Update(context.Background(), secret)).To(Succeed())
}

// TestDirectory_steadyStateReadsNoSecret: once a Spoke's keys are read,
// requests read no Secret until the TTL (the bound for hand edits) passes.
func TestDirectory_steadyStateReadsNoSecret(t *testing.T) {
	g := NewWithT(t)
	d, reads, clk := cachingDirectory()
	const ns, name = "keys-steady", "steady-1"
	setUpSpoke(t, d, ns, name, map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: agentKey})

	before, ttlReads := reads.Total(), spokedir.KeyReads(spokedir.ReadTTL)
	for range 100 {
		clk.add(time.Second) // 100 s of requests, far below the TTL
		spokes, err := d.Spokes(context.Background(), name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(spokes).To(HaveLen(1))
		g.Expect(spokes[0].Keys.Current).To(Equal(agentKey))
	}
	g.Expect(reads.Total()-before).To(BeZero(), "Secret GETs in the steady state")

	// A hand edit that does not touch the Spoke takes effect within the TTL.
	updateSecret(t, ns, name, map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: previousKey})
	spokes, err := d.Spokes(context.Background(), name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(spokes[0].Keys.Current).To(Equal(agentKey), "still cached")
	clk.add(testTTL)
	spokes, err = d.Spokes(context.Background(), name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(spokes[0].Keys.Current).To(Equal(previousKey), "read again after the TTL")
	g.Expect(reads.Total() - before).To(BeEquivalentTo(1))
	g.Expect(spokedir.KeyReads(spokedir.ReadTTL)-ttlReads).To(BeEquivalentTo(1), "tugboat_receiver_key_reads_total{reason=\"ttl\"}")
}

// TestDirectory_spreadsTheReadsOfKeysReadTogether: the keys of a fleet read
// at once (its agents announcing themselves after a hub restart) are not
// all read again at once when the TTL passes: each read's TTL is shortened
// by up to a fifth at random, and none outlives the TTL.
func TestDirectory_spreadsTheReadsOfKeysReadTogether(t *testing.T) {
	g := NewWithT(t)
	d, reads, clk := cachingDirectory()
	const ns, n = "keys-spread", 20
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("spread-%02d", i)
		create(t, keySecret(ns, names[i], map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: agentKey}), spoke(ns, names[i], false))
	}
	requestAll := func() {
		t.Helper()
		for _, name := range names {
			spokes, err := d.Spokes(context.Background(), name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(spokes).To(HaveLen(1))
			g.Expect(spokes[0].Keys.Current).To(Equal(agentKey))
		}
	}
	g.Eventually(func() ([]receiver.Spoke, error) { return d.Spokes(context.Background(), names[n-1]) }).WithTimeout(10 * time.Second).Should(HaveLen(1))
	requestAll() // every key read at the same instant
	before, ttlReads := reads.Total(), spokedir.KeyReads(spokedir.ReadTTL)

	clk.add(testTTL * 4 / 5)
	requestAll()
	g.Expect(reads.Total()-before).To(BeZero(), "no read before four fifths of the TTL")

	clk.add(testTTL / 10)
	requestAll()
	spread := reads.Total() - before
	g.Expect(spread).To(BeNumerically(">", 0), "some keys read again at nine tenths of the TTL")
	g.Expect(spread).To(BeNumerically("<", n), "not all of them")

	clk.add(testTTL / 10)
	requestAll()
	g.Expect(reads.Total()-before).To(BeEquivalentTo(n), "every key read again once the TTL passed, each once")
	g.Expect(spokedir.KeyReads(spokedir.ReadTTL) - ttlReads).To(BeEquivalentTo(n))
}

// TestDirectory_refreshesKeysOnAFailedVerification: a key written to the
// Secret is found by the first request that fails to verify (RefreshKeys),
// without waiting for the TTL; forced reads happen at most once per
// MinForcedReadInterval per Spoke, and a request that held keys older than
// the cache's gets the cache's without a read.
func TestDirectory_refreshesKeysOnAFailedVerification(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d, reads, clk := cachingDirectory()
	const ns, name = "keys-refresh", "refresh-1"
	stale := setUpSpoke(t, d, ns, name, map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: agentKey})

	newKey := []byte("new-agent-key-0123456789abcdef012345")
	updateSecret(t, ns, name, map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: newKey, tugboatv1alpha1.SpokePreviousKeySecretKey: agentKey})
	spokes, err := d.Spokes(ctx, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(spokes[0].Keys).To(Equal(stale.Keys), "cached: the Secret is not read per request")

	before, forced := reads.Total(), spokedir.KeyReads(spokedir.ReadVerificationFailed)
	fresh, changed, err := d.RefreshKeys(ctx, stale)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeTrue())
	g.Expect(fresh.Keys).To(Equal(ingest.SpokeKeys{Current: newKey, Previous: agentKey}))
	g.Expect(fresh.SpokeRef).To(Equal(stale.SpokeRef))
	g.Expect(reads.Total() - before).To(BeEquivalentTo(1))

	// Later requests get the new keys from the cache.
	spokes, err = d.Spokes(ctx, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(spokes[0].Keys).To(Equal(fresh.Keys))
	// A request that still held the old keys (in flight during the
	// refresh) gets the new ones without another read.
	again, changed, err := d.RefreshKeys(ctx, stale)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeTrue())
	g.Expect(again.Keys).To(Equal(fresh.Keys))
	g.Expect(reads.Total() - before).To(BeEquivalentTo(1))

	// Bad signatures with the current keys: one read per interval at most.
	for range 50 {
		_, changed, err := d.RefreshKeys(ctx, fresh)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(changed).To(BeFalse())
	}
	g.Expect(reads.Total()-before).To(BeEquivalentTo(1), "forced reads within one interval")
	clk.add(spokedir.MinForcedReadInterval)
	_, changed, err = d.RefreshKeys(ctx, fresh)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeFalse(), "the keys did not change")
	g.Expect(reads.Total()-before).To(BeEquivalentTo(2), "one more read once the interval passed")
	g.Expect(spokedir.KeyReads(spokedir.ReadVerificationFailed)-forced).To(BeEquivalentTo(2), "tugboat_receiver_key_reads_total{reason=\"verification_failed\"}")
}

// TestDirectory_refusesARemovedKeyOnceTheSpokeIsAnnotated: removing the
// previous key and setting tugboat.dev/keys-updated-at on the Spoke makes
// the directory drop the key as soon as its informer sees the Spoke, far
// below the TTL (the clock does not move).
func TestDirectory_refusesARemovedKeyOnceTheSpokeIsAnnotated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d, reads, _ := cachingDirectory()
	const ns, name = "keys-revoke", "revoke-1"
	sp := setUpSpoke(t, d, ns, name, map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: agentKey, tugboatv1alpha1.SpokePreviousKeySecretKey: previousKey})
	g.Expect(sp.Keys.Previous).To(Equal(previousKey))

	updateSecret(t, ns, name, map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: agentKey})
	spokes, err := d.Spokes(ctx, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(spokes[0].Keys.Previous).To(Equal(previousKey), "cached until the Spoke says the keys changed")

	before, changedReads := reads.Total(), spokedir.KeyReads(spokedir.ReadKeysChanged)
	obj := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := []byte(`{"metadata":{"annotations":{"` + tugboatv1alpha1.KeysUpdatedAtAnnotation + `":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}}}`)
	g.Expect(cluster.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	g.Eventually(func() (ingest.SpokeKeys, error) {
		spokes, err := d.Spokes(ctx, name)
		if err != nil || len(spokes) != 1 {
			return ingest.SpokeKeys{}, err
		}
		return spokes[0].Keys, nil
	}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(Equal(ingest.SpokeKeys{Current: agentKey}))
	g.Expect(reads.Total()-before).To(BeEquivalentTo(1), "one read for the annotation's change")
	g.Expect(spokedir.KeyReads(spokedir.ReadKeysChanged)-changedReads).To(BeEquivalentTo(1), "tugboat_receiver_key_reads_total{reason=\"keys_changed\"}")
	// And none after it.
	_, err = d.Spokes(ctx, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reads.Total() - before).To(BeEquivalentTo(1))
}

// TestDirectory_concurrentRequestsWithANewKeyAllVerify: the requests an
// agent sends at once with a new key all fail with the cached keys; one
// reads the Secret and the others wait for that read instead of being
// refused by the read rate limit.
func TestDirectory_concurrentRequestsWithANewKeyAllVerify(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d, reads, _ := cachingDirectory()
	const ns, name = "keys-concurrent", "concurrent-1"
	stale := setUpSpoke(t, d, ns, name, map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: agentKey})
	newKey := []byte("concurrent-new-key-0123456789abcdef0")
	updateSecret(t, ns, name, map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: newKey, tugboatv1alpha1.SpokePreviousKeySecretKey: agentKey})

	before := reads.Total()
	const n = 20
	type result struct {
		keys    ingest.SpokeKeys
		changed bool
		err     error
	}
	results := make(chan result, n)
	var start sync.WaitGroup
	start.Add(1)
	for range n {
		go func() {
			start.Wait()
			fresh, changed, err := d.RefreshKeys(ctx, stale)
			results <- result{fresh.Keys, changed, err}
		}()
	}
	start.Done()
	for range n {
		r := <-results
		g.Expect(r.err).NotTo(HaveOccurred())
		g.Expect(r.changed).To(BeTrue())
		g.Expect(r.keys).To(Equal(ingest.SpokeKeys{Current: newKey, Previous: agentKey}))
	}
	g.Expect(reads.Total()-before).To(BeEquivalentTo(1), "one read for all of them")
}

// TestDirectory_capsForcedReadsOverAllSpokes is issue 23 Low 2: the reads
// forced by requests that fail to verify are capped per Spoke and also over
// all Spokes together, so bad signatures naming many known spokes cannot
// drive a Secret GET per spoke and second. A read refused by the cap is
// counted in tugboat_receiver_key_reads_limited_total; the bucket refills
// with time.
func TestDirectory_capsForcedReadsOverAllSpokes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reads := harness.CountGets[*corev1.Secret](apiReader)
	clk := &clock{t: time.Now()}
	d := spokedir.New(mgrClient, reads, testTTL, spokedir.Options{ForcedReadsPerSecond: 2})
	spokedir.SetClock(d, clk.now)
	const ns, n = "keys-capped", 6
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	spokes := make([]receiver.Spoke, n)
	for i := range spokes {
		name := fmt.Sprintf("capped-%d", i)
		create(t, keySecret(ns, name, map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: agentKey}), spoke(ns, name, false))
		g.Eventually(func() ([]receiver.Spoke, error) { return d.Spokes(ctx, name) }).WithTimeout(10 * time.Second).Should(HaveLen(1))
		got, err := d.Spokes(ctx, name)
		g.Expect(err).NotTo(HaveOccurred())
		spokes[i] = got[0]
	}
	forceAll := func() {
		t.Helper()
		for _, sp := range spokes {
			_, changed, err := d.RefreshKeys(ctx, sp)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(changed).To(BeFalse())
		}
	}
	// Every spoke's first forced read: each is allowed by its own
	// interval, the cap lets two through (its burst).
	before, limited := reads.Total(), spokedir.KeyReadsLimited()
	forceAll()
	g.Expect(reads.Total()-before).To(BeEquivalentTo(2), "Secret GETs forced at once over six spokes")
	g.Expect(spokedir.KeyReadsLimited()-limited).To(BeEquivalentTo(n-2), "tugboat_receiver_key_reads_limited_total")

	// A second later, two more.
	clk.add(time.Second)
	forceAll()
	g.Expect(reads.Total() - before).To(BeEquivalentTo(4))

	// 0 forces no read at all.
	none := spokedir.New(mgrClient, reads, testTTL, spokedir.Options{ForcedReadsPerSecond: 0})
	before = reads.Total()
	for _, sp := range spokes {
		_, _, err := none.RefreshKeys(ctx, sp)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(reads.Total() - before).To(BeZero())
}
