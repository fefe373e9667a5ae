package receiver_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/webhook/receiver"
)

// liveHeap returns the bytes of live heap objects, after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// servedOverTCP serves h's receiver on a loopback listener and counts the
// connections whose request has started to arrive.
func servedOverTCP(t *testing.T, h *harness) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var active atomic.Int32
	srv := httptest.NewUnstartedServer(h.server.Handler())
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateActive {
			active.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &active
}

// slowAnonymousPost opens a connection that claims a body of length
// bytes on path, sends its headers (a plausible but wrong signature) and
// the first sent bytes, and then stalls.
func slowAnonymousPost(t *testing.T, addr, path string, length int64, sent int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s: %d\r\n%s: v1=%s\r\n\r\n",
		path, length, wire.HeaderTimestamp, testNow.Unix(), wire.HeaderSignature, strings.Repeat("0", 64))
	if _, err := c.Write(append([]byte(head), bytes.Repeat([]byte(" "), sent)...)); err != nil {
		t.Fatal(err)
	}
	return c
}

// answer is the status and headers of a response.
type answer struct {
	StatusCode int
	Header     http.Header
}

// postSigned sends body to path over a real connection, signed with key.
func postSigned(g Gomega, srv *httptest.Server, path string, key, body []byte) answer {
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	wire.SignRequest(req, key, body, testNow)
	resp, err := srv.Client().Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	return answer{StatusCode: resp.StatusCode, Header: resp.Header}
}

// TestReceiver_slowAnonymousBodiesDoNotExhaustMemory is issue 12 Medium 1:
// many anonymous requests that claim the largest body allowed and send it
// slowly must not make the hub allocate what they claim, and signed
// requests must still be served meanwhile.
func TestReceiver_slowAnonymousBodiesDoNotExhaustMemory(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	srv, active := servedOverTCP(t, h)
	base := liveHeap()

	const n = 64 // claiming 8 MiB each: 512 MiB if the claim were believed
	for range n {
		slowAnonymousPost(t, srv.Listener.Addr().String(), wire.StatePath(testSpoke), receiver.DefaultStateBodyLimit, 1024)
	}
	g.Eventually(active.Load).WithTimeout(10 * time.Second).Should(BeNumerically(">=", n))

	// Signed requests are served while the anonymous ones hang.
	events := mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)))
	g.Expect(postSigned(g, srv, wire.EventsPath(testSpoke), testKey, events).StatusCode).To(Equal(http.StatusAccepted))
	g.Expect(postSigned(g, srv, wire.StatePath(testSpoke), testKey, mustJSON(t, snapshot())).StatusCode).To(Equal(http.StatusAccepted))

	// Memory stays far below what the anonymous requests claim: a generous
	// 32 MiB over the baseline.
	g.Consistently(liveHeap).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).
		Should(BeNumerically("<", base+32<<20))
}

// TestReceiver_boundsLargeUnauthenticatedBodies: past PreAuthBodyLimit a
// body not yet authenticated needs one of PreAuthLargeBodies slots, and all
// of them share PreAuthMemoryLimit; a request that finds neither gets 503
// with Retry-After, while small signed requests are still served.
func TestReceiver_boundsLargeUnauthenticatedBodies(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, func(o *receiver.Options) {
		o.PreAuthBodyLimit, o.PreAuthLargeBodies = 4<<10, 1
		o.BodyLimit, o.StateBodyLimit, o.PreAuthMemoryLimit = 64<<10, 64<<10, 100<<10
	})
	srv, active := servedOverTCP(t, h)
	addr := srv.Listener.Addr().String()
	large := make([]wire.Event, 60) // about 30 KiB of JSON
	for i := range large {
		large[i] = event(7, wire.EventObjectCreated, int64(100+i))
	}
	largeBody := mustJSON(t, batchOf(large...))
	g.Expect(len(largeBody)).To(BeNumerically(">", 16<<10))

	// An anonymous request holds the one large-body slot (and 32 KiB of
	// the budget).
	slowAnonymousPost(t, addr, wire.EventsPath(testSpoke), 60<<10, 20<<10)
	g.Eventually(active.Load).WithTimeout(10 * time.Second).Should(BeEquivalentTo(1))
	g.Eventually(func() int {
		return postSigned(g, srv, wire.EventsPath(testSpoke), testKey, largeBody).StatusCode
	}).WithTimeout(5 * time.Second).Should(Equal(http.StatusServiceUnavailable))
	resp := postSigned(g, srv, wire.EventsPath(testSpoke), testKey, largeBody)
	g.Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable))
	g.Expect(resp.Header.Get("Retry-After")).To(Equal("1"))
	g.Expect(h.metric("tugboat_receiver_rejected_total", map[string]string{"reason": "preauth_busy"})).To(BeNumerically(">=", 1))
	// A small signed batch is served.
	small := mustJSON(t, batchOf(event(7, wire.EventObjectCreated, 1)))
	g.Expect(postSigned(g, srv, wire.EventsPath(testSpoke), testKey, small).StatusCode).To(Equal(http.StatusAccepted))
	g.Expect(h.store.recorded(testSpoke)).To(HaveLen(1))

	// With slots to spare but the budget held by anonymous bodies (32 KiB
	// each), the large one must wait its turn.
	h2 := newHarness(t, func(o *receiver.Options) {
		o.PreAuthBodyLimit, o.PreAuthLargeBodies = 64<<10, 4
		o.BodyLimit, o.StateBodyLimit, o.PreAuthMemoryLimit = 64<<10, 64<<10, 80<<10
	})
	srv2, active2 := servedOverTCP(t, h2)
	for range 2 {
		slowAnonymousPost(t, srv2.Listener.Addr().String(), wire.EventsPath(testSpoke), 60<<10, 20<<10)
	}
	g.Eventually(active2.Load).WithTimeout(10 * time.Second).Should(BeEquivalentTo(2))
	g.Eventually(func() int {
		return postSigned(g, srv2, wire.EventsPath(testSpoke), testKey, largeBody).StatusCode
	}).WithTimeout(5 * time.Second).Should(Equal(http.StatusServiceUnavailable))
	g.Expect(h2.store.recorded(testSpoke)).To(BeEmpty())
}
