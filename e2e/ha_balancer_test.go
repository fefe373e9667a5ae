package e2e_test

import (
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// balancer is a loopback TCP load balancer in front of hub replicas, as a
// Kubernetes Service is: each new connection goes to the next replica in
// turn, and to the one after when a replica refuses it (a killed replica),
// so agents reach whichever replicas are up through one address. A
// connection stays with its replica until either side closes it.
type balancer struct {
	l  net.Listener
	mu sync.Mutex
	// upstreams are the replicas' receiver addresses.
	upstreams []string
	next      int
	// served counts the connections each upstream took.
	served map[string]int
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// newBalancer listens on a free loopback port in front of upstreams, until
// the test ends.
func newBalancer(t testing.TB, upstreams ...string) *balancer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{l: l, upstreams: upstreams, served: map[string]int{}, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(b.close)
	return b
}

// Addr is the balancer's address (host:port).
func (b *balancer) Addr() string { return b.l.Addr().String() }

// set replaces the upstreams (a replica replaced by a new process on
// another port). Open connections keep their replica.
func (b *balancer) set(upstreams ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.upstreams = slices.Clone(upstreams)
}

// connections returns how many connections upstream took so far.
func (b *balancer) connections(upstream string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.served[upstream]
}

func (b *balancer) serve() {
	defer b.wg.Done()
	for {
		c, err := b.l.Accept()
		if err != nil {
			return // closed
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.handle(c)
		}()
	}
}

// handle dials the replicas in turn, starting with the next one, and
// pipes c to the first that accepts; c is closed when no replica does.
func (b *balancer) handle(c net.Conn) {
	b.mu.Lock()
	ups := slices.Clone(b.upstreams)
	start := b.next
	b.next++
	b.conns[c] = struct{}{}
	b.mu.Unlock()
	defer b.forget(c)
	for i := range ups {
		up := ups[(start+i)%len(ups)]
		u, err := net.DialTimeout("tcp", up, time.Second)
		if err != nil {
			continue // down: the next one
		}
		b.mu.Lock()
		b.served[up]++
		b.conns[u] = struct{}{}
		b.mu.Unlock()
		defer b.forget(u)
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
		go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
		<-done // one side ended: end both
		return
	}
}

func (b *balancer) forget(c net.Conn) {
	_ = c.Close()
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
}

// close stops listening, ends every connection and waits for the pipes.
func (b *balancer) close() {
	_ = b.l.Close()
	b.mu.Lock()
	for c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}
