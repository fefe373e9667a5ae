package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// ServerOptions configure a Server. Zero fields take the defaults.
type ServerOptions struct {
	// BindAddress is host:port to listen on (default ":9443"; use
	// "127.0.0.1:0" for a local, ephemeral port).
	BindAddress string
	// CertDir, when set, holds the serving certificate (CertName, KeyName)
	// and optionally the CA (ca.crt, returned by CABundle); the files are
	// watched and reloaded. When empty, a CA and serving certificate for
	// DNSNames and IPAddresses are generated at NewServer.
	CertDir           string
	CertName, KeyName string
	// CertsReady, when set (with CertDir), is closed once the files in
	// CertDir are valid, e.g. by a certificate rotator that fills the
	// mounted Secret: NewServer then loads nothing, and Start listens at
	// once but serves only after CertsReady (CABundle is nil until then:
	// then ca.crt of CertDir).
	CertsReady <-chan struct{}
	// DNSNames and IPAddresses the generated certificate is valid for
	// (default: localhost and 127.0.0.1).
	DNSNames    []string
	IPAddresses []net.IP
	// Webhooks serves the requests. Required. When its Metrics is nil,
	// NewServer sets it to metrics registered with controller-runtime's
	// registry (served by the manager's /metrics).
	Webhooks *Webhooks
	// ShutdownTimeout bounds the graceful shutdown (default 5s).
	ShutdownTimeout time.Duration
	// ClientCAFile, when set, is a PEM bundle: the server then requires
	// every client (the API server) to present a certificate it signed, and
	// refuses the TLS handshake otherwise (see clientauth.go). Read once,
	// by NewServer.
	ClientCAFile string
	// ClientNames, when set (with ClientCAFile), are the subject common
	// names or DNS names a client certificate must carry.
	ClientNames []string
}

// Server serves the agent's webhooks over TLS. It implements
// controller-runtime's manager.Runnable and runs on every replica (it needs
// no leader election).
type Server struct {
	opts     ServerOptions
	tls      *tls.Config // without the serving certificate
	handler  http.Handler
	caBundle []byte
	static   *tls.Certificate
	watcher  *certwatcher.CertWatcher

	serving chan struct{}

	mu sync.Mutex
	ln net.Listener
}

var _ manager.LeaderElectionRunnable = (*Server)(nil)

// NewServer loads or generates the certificates; it does not listen yet.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.Webhooks == nil || opts.Webhooks.Index == nil {
		return nil, errors.New("webhook server needs Webhooks with an ownership Index")
	}
	if opts.BindAddress == "" {
		opts.BindAddress = ":9443"
	}
	if opts.CertName == "" {
		opts.CertName = "tls.crt"
	}
	if opts.KeyName == "" {
		opts.KeyName = "tls.key"
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 5 * time.Second
	}
	if opts.Webhooks.Metrics == nil {
		m, err := NewMetrics(ctrlmetrics.Registry)
		if err != nil {
			return nil, err
		}
		opts.Webhooks.Metrics = m
	}
	s := &Server{opts: opts, handler: opts.Webhooks.Handler(), serving: make(chan struct{}), tls: &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1 only, as controller-runtime's webhook server does by
		// default (HTTP/2 stream-reset attacks).
		NextProtos: []string{"http/1.1"},
	}}
	if err := opts.clientTLS(s.tls); err != nil {
		return nil, err
	}
	if opts.CertsReady != nil && opts.CertDir == "" {
		return nil, errors.New("webhook server: CertsReady needs a CertDir")
	}
	if opts.CertDir != "" {
		if opts.CertsReady != nil {
			return s, nil // loaded by Start, once the rotator is ready
		}
		if err := s.loadCerts(); err != nil {
			return nil, err
		}
		if ca, err := os.ReadFile(filepath.Join(opts.CertDir, "ca.crt")); err == nil {
			s.caBundle = ca
		}
		return s, nil
	}
	dnsNames, ips := opts.DNSNames, opts.IPAddresses
	if len(dnsNames) == 0 && len(ips) == 0 {
		dnsNames, ips = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	bundle, err := GenerateSelfSigned(dnsNames, ips, 0)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(bundle.Cert, bundle.Key)
	if err != nil {
		return nil, err
	}
	s.static, s.caBundle = &cert, bundle.CACert
	return s, nil
}

// loadCerts starts watching the certificate files of CertDir.
func (s *Server) loadCerts() error {
	w, err := certwatcher.New(filepath.Join(s.opts.CertDir, s.opts.CertName), filepath.Join(s.opts.CertDir, s.opts.KeyName))
	if err != nil {
		return fmt.Errorf("loading webhook certificate from %s: %w", s.opts.CertDir, err)
	}
	s.watcher = w
	return nil
}

// CABundle returns the PEM CA that signed the serving certificate: the
// generated one, or ca.crt from CertDir (nil if absent).
func (s *Server) CABundle() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caBundle
}

// Listen binds BindAddress, so that Addr and URL are known before Start.
// Start calls it when it was not called; calling it again does nothing.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.opts.BindAddress)
	if err != nil {
		return fmt.Errorf("webhook server: %w", err)
	}
	s.ln = ln
	return nil
}

// Addr returns the bound address, nil before Listen.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// URL returns https://<bound address> (the base of clientConfig.url in
// local mode), "" before Listen.
func (s *Server) URL() string {
	addr := s.Addr()
	if addr == nil {
		return ""
	}
	return "https://" + addr.String()
}

// Serving is closed once Start serves: listening, with its certificate
// loaded (and CABundle set).
func (s *Server) Serving() <-chan struct{} { return s.serving }

// NeedLeaderElection returns false: every replica serves webhooks.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then shuts down gracefully. It returns nil
// after a shutdown caused by ctx.
func (s *Server) Start(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()

	if s.opts.CertsReady != nil {
		// Listening already, so Addr is known; a client connecting before
		// the certificates are ready waits in the backlog.
		select {
		case <-ctx.Done():
			_ = ln.Close()
			return nil
		case <-s.opts.CertsReady:
		}
		if err := s.loadCerts(); err != nil {
			_ = ln.Close()
			return err
		}
		if ca, err := os.ReadFile(filepath.Join(s.opts.CertDir, "ca.crt")); err == nil {
			s.mu.Lock()
			s.caBundle = ca
			s.mu.Unlock()
		}
	}
	getCert := func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.static, nil }
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	if s.watcher != nil {
		getCert = s.watcher.GetCertificate
		wg.Go(func() { _ = s.watcher.Start(ctx) })
	}
	tlsConfig := s.tls.Clone()
	tlsConfig.GetCertificate = getCert
	srv := &http.Server{
		Handler:           s.handler,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	wg.Go(func() {
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
		defer scancel()
		_ = srv.Shutdown(sctx)
	})
	close(s.serving)
	err := srv.ServeTLS(ln, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
