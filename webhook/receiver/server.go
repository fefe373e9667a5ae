package receiver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"tugboat.dev/tugboat/api/clip"
	"tugboat.dev/tugboat/controllers/ingest"
)

// Server is the hub's HTTP receiver: it authenticates what spokes send,
// de-duplicates and orders it, and hands it to a Store. Add it to the
// manager (mgr.Add); every replica serves, so it needs no leader election.
type Server struct {
	opts      Options
	store     ingest.Store
	log       logr.Logger
	now       func() time.Time
	metrics   *metrics
	ids       *idCache
	revs      *revisionTracker
	limits    *limiter
	spokes    SpokeDirectory
	verifiers *verifierCache
	dummyKeys [keysPerVerification][]byte
	states    *stateFloors
	preAuth   *preAuthBudget
	handler   http.Handler

	// stopPolls is closed when the server shuts down, to end the polls
	// for actions being held.
	stopPolls     chan struct{}
	stopPollsOnce sync.Once

	mu   sync.Mutex
	addr net.Addr
}

var (
	_ manager.Runnable               = (*Server)(nil)
	_ manager.LeaderElectionRunnable = (*Server)(nil)
)

// New returns a Server that records into store, configured by opts
// (validated first). It registers its metrics with opts.Registerer.
func New(store ingest.Store, opts Options) (*Server, error) {
	if store == nil {
		return nil, errors.New("receiver: a store is required")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = ctrllog.Log.WithName("webhook-receiver")
	}
	if opts.Registerer == nil {
		opts.Registerer = ctrlmetrics.Registry
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("receiver: registering metrics: %w", err)
	}
	s := &Server{
		opts:      opts,
		store:     store,
		log:       opts.Logger,
		now:       opts.Clock,
		metrics:   m,
		ids:       newIDCache(opts.DedupeCacheSize),
		revs:      newRevisionTracker(max(opts.DedupeCacheSize/10, 1024)),
		limits:    newLimiter(opts.RateLimit, opts.RateBurst, opts.Clock),
		spokes:    opts.Spokes,
		verifiers: newVerifierCache(opts.ReplayWindow, opts.Clock),
		dummyKeys: newDummyKeys(),
		states:    newStateFloors(),
		preAuth:   newPreAuthBudget(&opts),

		stopPolls: make(chan struct{}),
	}
	if s.spokes == nil {
		s.spokes = storeDirectory{store: store}
	}
	s.handler = http.HandlerFunc(s.serveHTTP)
	return s, nil
}

// Handler returns the receiver's HTTP handler, for tests, benchmarks, or to
// mount it in another server.
func (s *Server) Handler() http.Handler { return s.handler }

// NeedLeaderElection returns false: every replica receives.
func (s *Server) NeedLeaderElection() bool { return false }

// Addr returns the address the server listens on once Start has bound it,
// else nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Start listens on Options.BindAddress, with TLS when a certificate is
// configured (reloaded when its files change), and serves until ctx ends;
// then it stops accepting and waits up to Options.ShutdownTimeout for
// requests in flight. It returns nil after a graceful stop and an error when
// it cannot listen or serving fails.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.BindAddress)
	if err != nil {
		return fmt.Errorf("receiver: listening on %s: %w", s.opts.BindAddress, err)
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	srv.RegisterOnShutdown(s.endPolls)
	var wg sync.WaitGroup
	defer wg.Wait()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	tlsOn := s.opts.TLSCertFile != ""
	if tlsOn {
		cw, err := certwatcher.New(s.opts.TLSCertFile, s.opts.TLSKeyFile)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("receiver: loading TLS certificate: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cw.Start(watchCtx); err != nil {
				s.log.Error(err, "Watching the TLS certificate failed; serving the last one loaded")
			}
		}()
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cw.GetCertificate}
	}

	s.mu.Lock()
	s.addr = ln.Addr()
	s.mu.Unlock()
	s.log.Info("Receiver listening", "address", ln.Addr().String(), "tls", tlsOn)

	served := make(chan error, 1)
	go func() {
		if tlsOn {
			served <- srv.ServeTLS(ln, "", "")
		} else {
			served <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-served:
		return fmt.Errorf("receiver: serving: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("Receiver shutting down", "timeout", s.opts.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	shutdownErr := srv.Shutdown(sctx)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("receiver: serving: %w", err)
	}
	if shutdownErr != nil {
		return fmt.Errorf("receiver: graceful shutdown: %w", shutdownErr)
	}
	return nil
}

// serveHTTP routes a request and records its metrics.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	endpoint := s.route(sw, r)
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	s.metrics.requests.WithLabelValues(endpoint, statusCode(sw.status)).Inc()
	s.metrics.latency.WithLabelValues(endpoint).Observe(time.Since(start).Seconds())
}

// route dispatches on the escaped path (spoke names are DNS labels, so they
// never need escaping; anything escaped is no spoke of ours) and returns the
// endpoint label.
func (s *Server) route(w *statusWriter, r *http.Request) string {
	path := r.URL.EscapedPath()
	if h := s.mounted(path); h != nil {
		h.ServeHTTP(w, r)
		return endpointMount
	}
	switch path {
	case "/healthz":
		if s.allowMethod(w, r, endpointHealthz, http.MethodGet, http.MethodHead) {
			writeText(w, http.StatusOK, "ok")
		}
		return endpointHealthz
	case "/readyz":
		if s.allowMethod(w, r, endpointReadyz, http.MethodGet, http.MethodHead) {
			s.serveReadyz(w, r)
		}
		return endpointReadyz
	}
	seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if ep := s.routeActions(w, r, seg); ep != "" {
		return ep
	}
	switch {
	case len(seg) == 4 && seg[0] == "v1" && seg[1] == "spokes" && seg[3] == "events":
		if s.allowMethod(w, r, endpointEvents, http.MethodPost) {
			s.serveEvents(w, r, seg[2])
		}
		return endpointEvents
	case len(seg) == 4 && seg[0] == "v1" && seg[1] == "spokes" && seg[3] == "state":
		if s.allowMethod(w, r, endpointState, http.MethodPost) {
			s.serveState(w, r, seg[2])
		}
		return endpointState
	case len(seg) == 3 && seg[0] == "v1" && seg[1] == "flux":
		if s.allowMethod(w, r, endpointFlux, http.MethodPost) {
			s.serveFlux(w, r, seg[2])
		}
		return endpointFlux
	}
	s.metrics.rejected.WithLabelValues(endpointOther, reasonNotFound).Inc()
	writeError(w, http.StatusNotFound, errorf("no such endpoint: %s", clip.String(path, quoteLimit)))
	return endpointOther
}

// mounted returns the handler of the longest Options.Mounts prefix of path,
// or nil.
func (s *Server) mounted(path string) http.Handler {
	var h http.Handler
	longest := 0
	for prefix, mh := range s.opts.Mounts {
		if len(prefix) > longest && strings.HasPrefix(path, prefix) {
			h, longest = mh, len(prefix)
		}
	}
	return h
}

// allowMethod answers 405 (with Allow) unless r's method is one of methods.
func (s *Server) allowMethod(w http.ResponseWriter, r *http.Request, endpoint string, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	s.metrics.rejected.WithLabelValues(endpoint, reasonMethodNotAllowed).Inc()
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeError(w, http.StatusMethodNotAllowed, errorf("method %s not allowed: use %s", clip.String(r.Method, quoteLimit), strings.Join(methods, " or ")))
	return false
}

// serveReadyz answers 200 while Options.ReadyCheck passes.
func (s *Server) serveReadyz(w http.ResponseWriter, r *http.Request) {
	if s.opts.ReadyCheck != nil {
		if err := s.opts.ReadyCheck(r); err != nil {
			s.log.V(1).Info("Receiver not ready", "reason", err.Error())
			writeText(w, http.StatusServiceUnavailable, "not ready")
			return
		}
	}
	writeText(w, http.StatusOK, "ok")
}
