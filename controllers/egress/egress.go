// Package egress is the hub's destination policy for the HTTP requests it
// makes to addresses that users write into Pipelines (notifier webhooks,
// Slack and Flux addresses): by default it refuses loopback, link-local
// (which holds the cloud metadata services, 169.254.169.254 and fd00:ec2::254),
// unspecified and multicast destinations, so a Pipeline cannot point the hub
// at itself, at the node or at a metadata service. The check runs on the
// address actually dialed, after DNS resolution, so a name that resolves
// to a refused address is refused too.
//
// It is not a firewall: private (RFC 1918) addresses stay allowed, since
// in-cluster receivers are a normal destination; a NetworkPolicy is the
// place to narrow egress further.
package egress

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// Policy says which destinations are allowed.
type Policy struct {
	// AllowLoopback allows loopback destinations (the dev environment and
	// tests, where every receiver runs on 127.0.0.1).
	AllowLoopback bool
	// Allow lists ranges allowed despite the defaults (e.g. a receiver on a
	// link-local address).
	Allow []netip.Prefix
}

// metadata ranges outside link-local: AWS's IPv6 instance metadata service.
var metadata = []netip.Prefix{netip.MustParsePrefix("fd00:ec2::254/128")}

// Check returns an error naming why addr is refused, or nil.
func (p Policy) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	for _, a := range p.Allow {
		if a.Contains(addr) {
			return nil
		}
	}
	switch {
	case addr.IsLoopback():
		if p.AllowLoopback {
			return nil
		}
		return fmt.Errorf("destination %s is a loopback address (the hub's --egress-allow-loopback allows it)", addr)
	case addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast():
		return fmt.Errorf("destination %s is link-local, where cloud metadata services live (allow it with --egress-allow-cidr)", addr)
	case addr.IsUnspecified(), addr.IsMulticast(), addr.IsInterfaceLocalMulticast():
		return fmt.Errorf("destination %s is not a unicast address", addr)
	}
	for _, m := range metadata {
		if m.Contains(addr) {
			return fmt.Errorf("destination %s is a cloud metadata address", addr)
		}
	}
	return nil
}

// Control is a net.Dialer Control function that enforces p on the address
// being dialed.
func (p Policy) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("egress policy: %w", err)
	}
	return p.Check(ap.Addr())
}

// Client returns an HTTP client whose connections obey p, with timeout,
// no proxy (a proxy would dial on the hub's behalf, past the check) and no
// redirects (a redirect would carry a signed body elsewhere).
func (p Policy) Client(timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: p.Control}
	tr := &http.Transport{
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          50,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
