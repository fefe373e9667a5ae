package egress_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tugboat.dev/tugboat/controllers/egress"
)

func TestPolicy_Check(t *testing.T) {
	allowLink := egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("169.254.10.0/24")}}
	for _, tc := range []struct {
		policy egress.Policy
		addr   string
		refuse string // substring of the error, "" when allowed
	}{
		{egress.Policy{}, "127.0.0.1", "loopback"},
		{egress.Policy{}, "::1", "loopback"},
		{egress.Policy{}, "::ffff:127.0.0.1", "loopback"},
		{egress.Policy{AllowLoopback: true}, "127.0.0.1", ""},
		{egress.Policy{}, "169.254.169.254", "link-local"},
		{egress.Policy{}, "fe80::1", "link-local"},
		{egress.Policy{}, "fd00:ec2::254", "metadata"},
		{egress.Policy{}, "0.0.0.0", "not a unicast"},
		{egress.Policy{}, "224.0.0.1", "link-local"},
		{egress.Policy{}, "239.1.1.1", "not a unicast"},
		{egress.Policy{}, "10.0.0.7", ""},
		{egress.Policy{}, "192.168.1.1", ""},
		{egress.Policy{}, "203.0.113.9", ""},
		{allowLink, "169.254.10.3", ""},
		{allowLink, "169.254.169.254", "link-local"},
		// Metadata services outside link-local (security review 3).
		{egress.Policy{}, "fd20:ce::254", "metadata"},
		{egress.Policy{}, "100.100.100.200", "metadata"},
		{egress.Policy{}, "100.100.100.201", ""},
		// IPv6 addresses that carry a refused IPv4 one.
		{egress.Policy{}, "64:ff9b::a9fe:a9fe", "link-local"},       // NAT64 of 169.254.169.254
		{egress.Policy{}, "64:ff9b::6464:64c8", "metadata"},         // NAT64 of 100.100.100.200
		{egress.Policy{}, "64:ff9b:1::a9fe:a9fe", "link-local"},     // local-use NAT64
		{egress.Policy{}, "64:ff9b::7f00:1", "loopback"},            // NAT64 of 127.0.0.1
		{egress.Policy{}, "2002:a9fe:a9fe::1", "link-local"},        // 6to4 of 169.254.169.254
		{egress.Policy{}, "2002:6464:64c8::", "metadata"},           // 6to4 of 100.100.100.200
		{egress.Policy{}, "::a9fe:a9fe", "link-local"},              // IPv4-compatible
		{egress.Policy{AllowLoopback: true}, "64:ff9b::7f00:1", ""}, // loopback allowed, through NAT64 too
		{egress.Policy{}, "64:ff9b::cb00:7109", ""},                 // NAT64 of 203.0.113.9
		{egress.Policy{}, "2002:cb00:7109::1", ""},                  // 6to4 of 203.0.113.9
	} {
		err := tc.policy.Check(netip.MustParseAddr(tc.addr))
		switch {
		case tc.refuse == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.addr, err)
		case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
			t.Errorf("%s: got %v, want an error mentioning %q", tc.addr, err, tc.refuse)
		}
	}
}

// TestPolicy_Client_refusesLoopbackByName dials a real server on loopback
// through a name ("localhost"), so the check must run after resolution.
func TestPolicy_Client_refusesLoopbackByName(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits++ }))
	defer srv.Close()
	url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if resp, err := (egress.Policy{}).Client(5 * time.Second).Do(req); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("a request to %s was sent; want it refused", url)
	} else if !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("error %v does not say why", err)
	}
	if hits != 0 {
		t.Fatalf("the server saw %d requests", hits)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	resp, err := (egress.Policy{AllowLoopback: true}).Client(5 * time.Second).Do(req)
	if err != nil {
		t.Fatalf("allowed loopback: %v", err)
	}
	_ = resp.Body.Close()
	if hits != 1 {
		t.Fatalf("the server saw %d requests, want 1", hits)
	}
}

// TestPolicy_Client_followsNoRedirect: a destination that answers 307 (which
// would make a client repeat the same signed body and headers) to another
// address gets its own answer back; the other address receives nothing, not
// the body, not the X-Tugboat-* headers.
func TestPolicy_Client_followsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer other.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()

	req, _ := http.NewRequest(http.MethodPost, redirecting.URL+"/hook", strings.NewReader(`{"signed":"body"}`))
	req.Header.Set("X-Tugboat-Timestamp", "1700000000")
	req.Header.Set("X-Tugboat-Signature", "v1=00")
	resp, err := (egress.Policy{AllowLoopback: true}).Client(5 * time.Second).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect {
		t.Errorf("got %d, want the destination's own 307", resp.StatusCode)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect's target received %d requests", n)
	}
}
