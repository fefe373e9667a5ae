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

// metadata are the cloud metadata services outside link-local: AWS's and
// GCP's IPv6 addresses, and Alibaba Cloud's 100.100.100.200.
var metadata = []netip.Prefix{
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("fd20:ce::254/128"),
	netip.MustParsePrefix("100.100.100.200/32"),
}

// Translated IPv6 prefixes that carry an IPv4 address, which a gateway on
// the way may turn back into that address: NAT64's well-known prefix
// (RFC 6052; the IPv4 address in the last 32 bits) and its local-use
// prefix (RFC 8215), and 6to4 (RFC 3056; the IPv4 address in bits 16-47).
var (
	nat64      = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}
	sixToFour  = netip.MustParsePrefix("2002::/16")
	ipv4Compat = netip.MustParsePrefix("::/96")
)

// embeddedIPv4 returns the IPv4 address a translated IPv6 address carries.
func embeddedIPv4(addr netip.Addr) (netip.Addr, bool) {
	if !addr.Is6() {
		return netip.Addr{}, false
	}
	b := addr.As16()
	for _, p := range nat64 {
		if p.Contains(addr) {
			return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
		}
	}
	if sixToFour.Contains(addr) {
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	if ipv4Compat.Contains(addr) && !addr.IsUnspecified() && !addr.IsLoopback() {
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	}
	return netip.Addr{}, false
}

// Check returns an error naming why addr is refused, or nil. An IPv6
// address that carries an IPv4 one (NAT64, 6to4, IPv4-mapped or
// -compatible) is judged as that IPv4 address too.
func (p Policy) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	if v4, ok := embeddedIPv4(addr); ok {
		if err := p.Check(v4); err != nil {
			return fmt.Errorf("destination %s carries %s: %w", addr, v4, err)
		}
	}
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

// Dialer returns a dialer whose connections obey p, with a connection
// timeout (10 s when timeout is 0).
func (p Policy) Dialer(timeout time.Duration) *net.Dialer {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: p.Control}
}

// Client returns an HTTP client whose connections obey p, with timeout,
// no proxy (a proxy would dial on the hub's behalf, past the check) and no
// redirects (a redirect would carry a signed body elsewhere).
func (p Policy) Client(timeout time.Duration) *http.Client {
	d := p.Dialer(0)
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
