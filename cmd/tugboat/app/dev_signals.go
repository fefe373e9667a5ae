//go:build !agentonly

package app

import (
	"context"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interruptible returns a context that ends on SIGINT, SIGTERM or SIGHUP,
// and out wrapped so that a reader that went away ends it too, instead of
// killing the process before it cleaned up.
//
// Under `make dev | tee log`, Ctrl-C interrupts tee as well: the next line
// written to the pipe would raise SIGPIPE, which kills a Go program writing
// to its stdout or stderr, and leaves every cluster process and the
// environment's directory behind. Asking for SIGPIPE (and dropping it) makes
// such a write fail with EPIPE instead; the wrapped writer then ends the
// context and discards what follows, so the cleanup runs to the end.
func interruptible(parent context.Context, out io.Writer) (context.Context, io.Writer, func()) {
	ctx, stopSignals := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-pipe: // a broken pipe: the write that raised it returns EPIPE
			case <-done:
				return
			}
		}
	}()
	stop := func() {
		// Writes after this one (the error main prints to stderr) still
		// meet the broken pipe: keep them from killing the process.
		signal.Ignore(syscall.SIGPIPE)
		signal.Stop(pipe)
		close(done)
		cancel()
		stopSignals()
	}
	return ctx, &guardedWriter{w: out, broken: cancel}, stop
}

// guardedWriter passes writes on until one fails (the reader went away);
// then it calls broken once and discards every later write.
type guardedWriter struct {
	mu     sync.Mutex
	w      io.Writer
	failed bool
	broken func()
}

func (g *guardedWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed {
		return len(p), nil
	}
	if _, err := g.w.Write(p); err != nil {
		g.failed = true
		g.broken()
	}
	return len(p), nil
}
