package hubhttp_test

import (
	"encoding/pem"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/agent/hubhttp"
)

func TestBackoff_isCappedExponential(t *testing.T) {
	g := NewWithT(t)
	top := func(n int64) int64 { return n - 1 } // the largest draw: the ceiling itself
	initial, maxDelay := 250*time.Millisecond, 30*time.Second
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		g.Expect(hubhttp.Backoff(i+1, initial, maxDelay, top)).To(Equal(w), "attempt %d", i+1)
	}
	g.Expect(hubhttp.Backoff(0, initial, maxDelay, top)).To(Equal(initial))
	g.Expect(hubhttp.Backoff(1000, initial, maxDelay, top)).To(Equal(maxDelay))
	g.Expect(hubhttp.Backoff(math.MaxInt, time.Second, math.MaxInt64, top)).To(Equal(time.Duration(math.MaxInt64)), "no overflow")
	g.Expect(hubhttp.Backoff(5, initial, maxDelay, func(int64) int64 { return 0 })).To(BeZero(), "full jitter reaches 0")
}

func TestBackoff_isJittered(t *testing.T) {
	g := NewWithT(t)
	initial, maxDelay := 250*time.Millisecond, 30*time.Second
	seen := map[time.Duration]bool{}
	var low, high int
	for range 1000 {
		d := hubhttp.Backoff(20, initial, maxDelay, rand.Int64N)
		g.Expect(d).To(And(BeNumerically(">=", 0), BeNumerically("<=", maxDelay)))
		seen[d] = true
		if d < maxDelay/2 {
			low++
		} else {
			high++
		}
	}
	g.Expect(len(seen)).To(BeNumerically(">", 900), "delays are spread, not synchronized")
	g.Expect(low).To(BeNumerically(">", 300), "uniform over [0, cap]")
	g.Expect(high).To(BeNumerically(">", 300), "uniform over [0, cap]")
}

func TestParseRetryAfter(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1", time.Second, true},
		{" 0 ", 0, true},
		{"120", 2 * time.Minute, true},
		{"999999999999", hubhttp.MaxRetryAfter, true},
		{now.Add(3 * time.Second).Format(http.TimeFormat), 3 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	}
	for _, c := range cases {
		d, ok := hubhttp.ParseRetryAfter(c.in, now)
		g.Expect(ok).To(Equal(c.ok), "%q", c.in)
		g.Expect(d).To(Equal(c.want), "%q", c.in)
	}
}

// TestNewClient_trustsTheCAFileAndFollowsNoRedirect reaches a TLS server
// whose certificate only the CA file vouches for: the system roots refuse
// it, the CA file's client gets the redirect the server answers, not its
// target.
func TestNewClient_trustsTheCAFileAndFollowsNoRedirect(t *testing.T) {
	g := NewWithT(t)
	var followed bool
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed = true
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)

	system, err := hubhttp.NewClient("")
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := system.Get(srv.URL + "/v1/spokes/dev/state")
	if err == nil {
		_ = resp.Body.Close()
	}
	g.Expect(err).To(MatchError(ContainSubstring("certificate")), "the system roots do not know the test CA")

	caFile := filepath.Join(t.TempDir(), "ca.pem")
	g.Expect(os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)).To(Succeed())
	c, err := hubhttp.NewClient(caFile)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err = c.Get(srv.URL + "/v1/spokes/dev/state")
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusTemporaryRedirect))
	g.Expect(resp.Header.Get("Location")).To(Equal("/elsewhere"))
	g.Expect(followed).To(BeFalse(), "the redirect was not followed")
}

func TestNewClient_rejectsABadCAFile(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	_, err := hubhttp.NewClient(filepath.Join(dir, "missing.pem"))
	g.Expect(err).To(MatchError(HavePrefix("reading hub CA file: ")))

	notPEM := filepath.Join(dir, "ca.pem")
	g.Expect(os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600)).To(Succeed())
	_, err = hubhttp.NewClient(notPEM)
	g.Expect(err).To(MatchError("hub CA file " + notPEM + " holds no PEM certificate"))
}
