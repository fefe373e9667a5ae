package chaos

import (
	"bufio"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// echoServer answers every line with itself, on loopback.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through addr and returns the answer and how long
// it took, or an error once timeout passes.
func roundTrip(addr string, timeout time.Duration) (string, time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(start.Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", 0, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return line, time.Since(start), err
}

func TestProxy_forwardsDelaysDropsAndCuts(t *testing.T) {
	g := NewWithT(t)
	p, err := NewProxy(echoServer(t))
	g.Expect(err).NotTo(HaveOccurred())
	defer p.Close()

	got, _, err := roundTrip(p.Addr(), 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal("ping\n"))

	// Delay: one chunk each way, each held 200ms.
	p.SetDelay(200 * time.Millisecond)
	_, took, err := roundTrip(p.Addr(), 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(took).To(BeNumerically(">=", 400*time.Millisecond))
	p.SetDelay(0)

	// Drop: an open connection is closed under its client.
	c, err := net.Dial("tcp", p.Addr())
	g.Expect(err).NotTo(HaveOccurred())
	defer c.Close()
	_, err = c.Write([]byte("a\n"))
	g.Expect(err).NotTo(HaveOccurred())
	r := bufio.NewReader(c)
	_, err = r.ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	// The earlier round trips' connections close on the proxy's side only
	// once it reads their EOF, which may lag under load.
	g.Eventually(func() int { return p.Stats().Open }, 5*time.Second, 10*time.Millisecond).Should(Equal(1))
	g.Expect(p.Drop()).To(Equal(1))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = r.ReadString('\n')
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).NotTo(ContainSubstring("timeout"), "closed, not held")

	// Cut: nothing gets through, the client waits; Restore lets it pass.
	p.Cut()
	_, _, err = roundTrip(p.Addr(), 500*time.Millisecond)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("timeout"))
	p.Restore()
	got, _, err = roundTrip(p.Addr(), 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal("ping\n"))

	// A new upstream.
	p.SetUpstream(echoServer(t))
	got, _, err = roundTrip(p.Addr(), 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal("ping\n"))

	st := p.Stats()
	g.Expect(st.Held).To(Equal(1))
	g.Expect(st.Dropped).To(BeNumerically(">=", 1))
	g.Expect(st.Forwarded).To(Equal(st.Accepted - st.Held))
}

func TestConfig_sameSeedSameDraws(t *testing.T) {
	g := NewWithT(t)
	c := Config{Seed: 42, Scale: 1, TimeScale: 30}
	a, b := c.Rand("hub-kill"), c.Rand("hub-kill")
	for range 10 {
		g.Expect(a.Int64()).To(Equal(b.Int64()))
	}
	g.Expect(c.Rand("network").Int64()).NotTo(Equal(c.Rand("hub-kill").Int64()))
	g.Expect(c.Protocol(5*time.Minute, time.Second)).To(Equal(10 * time.Second))
	g.Expect(c.Protocol(10*time.Second, time.Second)).To(Equal(time.Second))
}
