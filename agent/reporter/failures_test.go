package reporter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
)

// Issue 13, reporter rules: a 5xx from the hub is an outage, not a verdict
// on the request. A batch answered 5xx (with a JSON error body naming a
// field, as a 400 would have) is retried until accepted, never dropped as
// rejected, and the reconnect is followed by a state resync.
func TestReporter_retriesEvery5xxAndNeverDropsTheBatch(t *testing.T) {
	for _, code := range []int{
		http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable,
		http.StatusGatewayTimeout, http.StatusInsufficientStorage,
	} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			g := NewWithT(t)
			rc := newReceiver(t, fmt.Sprintf("spoke-%d", code), testKey)
			spoke := rc.spoke
			var failing atomic.Int32
			failing.Store(3)
			rc.setHook(func(kind string, _ *wire.EventBatch) (int, http.Header) {
				if kind == "events" && failing.Add(-1) >= 0 {
					return code, nil
				}
				return 0, nil
			})
			r := startReporter(t, testOptions(t, rc, testKey), (&fakeState{rev: 1}).snapshot)
			g.Eventually(rc.stateCount, eventually, poll).Should(Equal(1))

			r.Enqueue(testEvents(0, 5)...)
			g.Eventually(rc.eventCount, eventually, poll).Should(Equal(5), "delivered once the hub recovers")
			g.Expect(rc.countCode(code)).To(Equal(3), "answered %d three times, retried each time", code)
			g.Expect(batchesWithCode(spoke, strconv.Itoa(code))).To(Equal(3.0))
			g.Expect(value(r.metrics.eventsFailed)).To(BeZero(), "a 5xx is not a rejection")
			// The outage ended: the hub hears the full state again.
			g.Eventually(rc.stateCount, eventually, poll).Should(Equal(2), "a reconnect resyncs the state")
		})
	}
}

// A state sync that fails (the hub answers 5xx, or the snapshot cannot be
// taken) is retried until a snapshot is accepted, well before the next
// periodic sync (an hour away in these tests).
func TestReporter_aFailedStateSyncIsRetried(t *testing.T) {
	t.Run("the hub fails the post", func(t *testing.T) {
		g := NewWithT(t)
		rc := newReceiver(t, "spoke-state-5xx", testKey)
		var failing atomic.Int32
		failing.Store(2)
		rc.setHook(func(kind string, _ *wire.EventBatch) (int, http.Header) {
			if kind == "state" && failing.Add(-1) >= 0 {
				return http.StatusInternalServerError, nil
			}
			return 0, nil
		})
		state := &fakeState{rev: 3}
		startReporter(t, testOptions(t, rc, testKey), state.snapshot)
		g.Eventually(rc.stateCount, eventually, poll).Should(Equal(1))
		g.Expect(rc.countCode(http.StatusInternalServerError)).To(Equal(2))
		g.Expect(rc.statesSince(rc.requestsOf("state")[0].at)[0].snap.Releases[0].Revision).To(Equal(3))
	})
	t.Run("the snapshot cannot be taken", func(t *testing.T) {
		g := NewWithT(t)
		rc := newReceiver(t, "spoke-state-snap", testKey)
		state := &fakeState{rev: 5}
		var mu sync.Mutex
		fails := 2
		snap := func(ctx context.Context) (*wire.StateSnapshot, error) {
			mu.Lock()
			defer mu.Unlock()
			if fails > 0 {
				fails--
				return nil, errors.New("informers not synced")
			}
			return state.snapshot(ctx)
		}
		startReporter(t, testOptions(t, rc, testKey), snap)
		g.Eventually(rc.stateCount, eventually, poll).Should(Equal(1))
		mu.Lock()
		defer mu.Unlock()
		g.Expect(fails).To(BeZero())
	})
}
