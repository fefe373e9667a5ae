package chaos

import (
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy on loopback that stands between an agent and the
// hub and injects network faults: it drops every open connection at once,
// delays what it forwards, or cuts the link (a black hole: connections are
// accepted and held, nothing reaches the other side, as when a route is
// gone). The upstream can change while it runs, so a hub restarted on a new
// port stays behind the same address.
type Proxy struct {
	ln net.Listener

	mu       sync.Mutex
	upstream string
	delay    time.Duration
	cut      bool
	conns    map[net.Conn]struct{} // every open connection, both sides
	stats    Stats
	closed   bool
	wg       sync.WaitGroup
}

// Stats count what a Proxy did.
type Stats struct {
	// Accepted is how many connections the proxy accepted.
	Accepted int
	// Forwarded is how many of them it connected to the upstream.
	Forwarded int
	// Dropped is how many connections Drop and Cut closed.
	Dropped int
	// Held is how many connections arrived while the link was cut.
	Held int
	// Open is how many client connections are open now.
	Open int
}

// NewProxy listens on a free loopback port and forwards to upstream
// (host:port).
func NewProxy(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetUpstream changes where new connections go.
func (p *Proxy) SetUpstream(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.upstream = addr
}

// SetDelay makes the proxy hold every chunk it forwards, either way, for d
// before passing it on (0: no delay).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Drop closes every open connection and returns how many; new connections
// go through as before.
func (p *Proxy) Drop() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropLocked()
}

// Cut closes every open connection and holds every new one, forwarding
// nothing, until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.dropLocked()
}

// Restore ends a Cut: the connections held meanwhile are closed (their
// clients reconnect) and new ones go through.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	p.dropLocked()
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	for c := range p.conns {
		if _, client := c.(clientConn); client {
			st.Open++
		}
	}
	return st
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// dropLocked closes every open connection, counting the client sides.
func (p *Proxy) dropLocked() int {
	n := 0
	for c := range p.conns {
		if _, client := c.(clientConn); client {
			n++
		}
		_ = c.Close()
		delete(p.conns, c)
	}
	p.stats.Dropped += n
	return n
}

// clientConn marks the accepted side of a proxied connection.
type clientConn struct{ net.Conn }

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(clientConn{c})
		}()
	}
}

// track registers c as open; it returns false when the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *Proxy) handle(client clientConn) {
	p.mu.Lock()
	p.stats.Accepted++
	cut, upstream := p.cut, p.upstream
	if cut {
		p.stats.Held++
	}
	p.mu.Unlock()
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	defer client.Close()
	if cut {
		// A black hole: read and discard until Restore or Drop closes it.
		_, _ = io.Copy(io.Discard, client)
		return
	}
	server, err := net.DialTimeout("tcp", upstream, 5*time.Second)
	if err != nil {
		return // the client sees its connection closed, as with a refused one
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	defer server.Close()
	p.mu.Lock()
	p.stats.Forwarded++
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done
	// One side ended: end the other too.
	_ = client.Close()
	_ = server.Close()
	<-done
}

// pipe copies src to dst, holding each chunk for the current delay.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d := p.delay
			p.mu.Unlock()
			if d > 0 {
				// The fault itself: this chunk is late by d.
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: handle closes both sides
		}
	}
}
