//go:build !agentonly

package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/webhook/dashboard"
)

// DefaultUIPort is the port `tugboat ui` listens on unless told otherwise.
const DefaultUIPort = 7468

// uiOptions configure `tugboat ui`.
type uiOptions struct {
	hub     hubFlags
	address string
	port    int
	noOpen  bool
}

func newUICommand() *cobra.Command {
	o := uiOptions{address: "127.0.0.1", port: DefaultUIPort}
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web dashboard on 127.0.0.1, acting as you",
		Long: `ui serves tugboat's dashboard (Pipelines, Promotions, Releases, Fleet) on
127.0.0.1 and opens it in your browser. It talks to the hub with your own
kubeconfig identity: you see what your RBAC lets you read, and the Approve and
Reject buttons appear where RBAC allows you the verb approve on the
environment (see docs/approvals.md). A decision records the user the hub's API
server authenticated, exactly as tugboat approve does. Pages update live.

Anyone who can reach the dashboard acts as you: it listens on loopback only,
refuses other Host names (DNS rebinding) and cross-site requests. --address
exposes it further; do that only on a machine nobody else uses. See
docs/dashboard.md.`,
		Example: "  tugboat ui -n fleet\n  tugboat ui -n fleet --port 0 --no-open",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return o.run(ctx, cmd)
		},
	}
	o.hub.bind(cmd)
	cmd.Flags().StringVar(&o.address, "address", o.address, "address to listen on; anything but loopback lets others act as you")
	cmd.Flags().IntVar(&o.port, "port", o.port, "port to listen on (0 picks a free one)")
	cmd.Flags().BoolVar(&o.noOpen, "no-open", o.noOpen, "do not open the dashboard in a browser")
	return cmd
}

func (o *uiOptions) run(ctx context.Context, cmd *cobra.Command) error {
	if o.port < 0 || o.port > 65535 {
		return fmt.Errorf("--port: must be between 0 and 65535, got %d", o.port)
	}
	s, err := o.hub.connect()
	if err != nil {
		return err
	}
	user, err := s.whoAmI(ctx)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(o.address, strconv.Itoa(o.port)))
	if err != nil {
		return fmt.Errorf("listening for the dashboard: %w", err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	loopback := isLoopback(o.address)
	p := strconv.Itoa(port)
	hosts := []string{strings.ToLower(net.JoinHostPort(o.address, p))}
	switch {
	case loopback:
		hosts = []string{"127.0.0.1:" + p, "localhost:" + p, "[::1]:" + p}
	case isUnspecified(o.address):
		hosts = nil // every address of the machine: the access token guards it
	}
	// This run's access token: the dashboard answers nothing without it,
	// so another local process (or a page in the browser) cannot read the
	// pages or their CSRF token and act as the user. Printed once, in the
	// address.
	token, err := accessToken()
	if err != nil {
		return err
	}
	d, err := dashboard.New(s.config, hub.Scheme(), dashboard.Options{Namespace: s.namespace, AllowedHosts: hosts, AccessToken: token})
	if err != nil {
		return err
	}
	host := o.address
	if loopback {
		host = "127.0.0.1"
	}
	url := "http://" + net.JoinHostPort(host, p) + "/?token=" + token
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "Dashboard of namespace %s, as %s: %s\n", s.namespace, user, url)
	if !loopback {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: listening on %s: anyone who reaches it reads and approves as %s\n", o.address, user)
	}
	fmt.Fprintln(out, "Press Ctrl-C to stop.")
	if !o.noOpen {
		if err := openBrowser(url); err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "could not open a browser (%v): open %s yourself\n", err, url)
		}
	}
	return serveDashboard(ctx, ln, d)
}

// serveDashboard serves d on ln, and runs its watches, until ctx ends.
func serveDashboard(ctx context.Context, ln net.Listener, d *dashboard.Server) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		_ = d.Start(ctx)
	}()
	srv := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var err error
	select {
	case err = <-served:
	case <-ctx.Done():
		// Event streams never finish on their own: close them.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = srv.Shutdown(sctx)
		scancel()
		_ = srv.Close()
	}
	cancel()
	<-watching
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// isLoopback reports whether address is a loopback address or localhost.
func isLoopback(address string) bool {
	if address == "localhost" {
		return true
	}
	ip := net.ParseIP(address)
	return ip != nil && ip.IsLoopback()
}

// openBrowser opens url in the desktop's browser, without waiting for it.
func openBrowser(url string) error {
	var c *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		c = exec.Command("open", url)
	case "windows":
		c = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		c = exec.Command("xdg-open", url)
	}
	if err := c.Start(); err != nil {
		return err
	}
	go func() { _ = c.Wait() }()
	return nil
}

// accessToken is a random token for one run of tugboat ui.
func accessToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// isUnspecified reports whether address listens on every address of the
// machine (0.0.0.0, ::, or empty).
func isUnspecified(address string) bool {
	if address == "" {
		return true
	}
	ip := net.ParseIP(address)
	return ip != nil && ip.IsUnspecified()
}
