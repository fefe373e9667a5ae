//go:build !agentonly

package app

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
)

// TestInterruptible_aBrokenPipeEndsTheContextAndLaterWritesAreDropped
// writes through interruptible's writer to a real pipe whose reader is
// closed: the write fails with EPIPE (the process asked for SIGPIPE, so it
// is not killed), the context ends, and later writes are dropped without
// error, so the cleanup can print its lines.
func TestInterruptible_aBrokenPipeEndsTheContextAndLaterWritesAreDropped(t *testing.T) {
	g := NewWithT(t)
	r, w, err := os.Pipe()
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Close()
	ctx, out, stop := interruptible(context.Background(), w)
	defer stop()

	_, err = out.Write([]byte("before\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ctx.Err()).NotTo(HaveOccurred(), "a reader is there")
	buf := make([]byte, 16)
	n, _ := r.Read(buf)
	g.Expect(string(buf[:n])).To(Equal("before\n"))

	g.Expect(r.Close()).To(Succeed())
	n, err = out.Write([]byte("stopping clusters\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(len("stopping clusters\n")))
	g.Eventually(ctx.Done()).Should(BeClosed(), "the reader went away")
	_, err = out.Write([]byte("stopped\n"))
	g.Expect(err).NotTo(HaveOccurred())
}
