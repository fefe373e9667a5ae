package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Options configure a dashboard.
type Options struct {
	// Namespace is the hub namespace whose Pipelines, Promotions,
	// ReleaseHistories and Spokes the dashboard shows. Required.
	Namespace string
	// ReadOnly hides the Approve and Reject buttons and refuses every
	// POST: for a team screen served by the hub with its own identity.
	ReadOnly bool
	// BasePath is the path the dashboard is served under, starting and
	// ending with "/". Defaults to "/".
	BasePath string
	// AllowedHosts are the Host header values accepted (e.g.
	// "127.0.0.1:7070", "localhost:7070"), which refuses DNS rebinding.
	// Empty accepts any host (behind a proxy that checks it).
	AllowedHosts []string
	// AccessToken, when set, must come with every request: in the query
	// parameter "token" of the first address (tugboat ui prints it once),
	// then in an HttpOnly cookie. Without it, any process that can reach
	// the address could read the pages and act as the dashboard's user.
	AccessToken string
	// Reader, when set, serves the pages' reads (e.g. the hub manager's
	// cached client: a GET then costs the API server nothing). Nil reads
	// through the dashboard's own client, as its user (tugboat ui: what
	// RBAC lets that user read).
	Reader client.Reader
	// MaxStreams bounds the live event streams open at once (100 when
	// zero); past it a new one is answered 503 with Retry-After.
	MaxStreams int
	// Clock returns the current time. Defaults to time.Now.
	Clock func() time.Time
	// Log receives the dashboard's errors. Defaults to discarding them.
	Log logr.Logger
}

// Server is a dashboard: an http.Handler plus the watches that make its
// pages live. Start runs the watches.
type Server struct {
	client client.WithWatch
	// reader serves the pages' reads: Options.Reader, else client.
	reader client.Reader
	opts   Options
	// token is the per-process CSRF token, also the value of the cookie
	// cookieName.
	token        string
	cookieName   string
	accessCookie string
	pages        map[string]*pageTemplate
	events       *broker
	handler      http.Handler
	cop          *http.CrossOriginProtection
	// stopped is closed when Start returns, which ends the event streams.
	stopped chan struct{}
}

// HubPath is where the hub serves the read-only dashboard, on the
// receiver's listener.
const HubPath = "/ui/"

// New returns a dashboard reading the hub cfg points at, with cfg's
// identity. The scheme must know tugboat.dev/v1alpha1 and client-go's kinds.
func New(cfg *rest.Config, scheme *runtime.Scheme, opts Options) (*Server, error) {
	if opts.Namespace == "" {
		return nil, errors.New("dashboard: a namespace is required")
	}
	if opts.BasePath == "" {
		opts.BasePath = "/"
	}
	if !strings.HasPrefix(opts.BasePath, "/") || !strings.HasSuffix(opts.BasePath, "/") {
		return nil, fmt.Errorf("dashboard: base path %q must start and end with /", opts.BasePath)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("dashboard: connecting to the hub: %w", err)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(b)
	sum := sha256.Sum256(b)
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = 100
	}
	var reader client.Reader = c
	if opts.Reader != nil {
		reader = opts.Reader
	}
	s := &Server{
		client: c,
		reader: reader,
		opts:   opts,
		token:  token,
		// Cookies do not tell ports apart: two dashboards on one host
		// each keep their own cookie.
		cookieName:   "tugboat_csrf_" + hex.EncodeToString(sum[:4]),
		accessCookie: accessCookieName(opts.AccessToken),
		pages:        pages,
		events:       newBroker(),
		cop:          http.NewCrossOriginProtection(),
		stopped:      make(chan struct{}),
	}
	s.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusForbidden, "cross-site request refused: actions are taken only from the dashboard's own pages")
	}))
	s.handler = s.routes()
	return s, nil
}

// Handler serves the dashboard.
func (s *Server) Handler() http.Handler { return s.handler }

// Start watches the hub until ctx ends, so pages update live. It
// implements controller-runtime's manager.Runnable.
func (s *Server) Start(ctx context.Context) error {
	defer close(s.stopped)
	s.watchAll(ctx)
	return nil
}

// NeedLeaderElection reports false: every hub replica serves the
// dashboard.
func (s *Server) NeedLeaderElection() bool { return false }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.servePipelines)
	mux.HandleFunc("GET /promotions/{name}", s.servePromotion)
	mux.HandleFunc("POST /promotions/{name}/decision", s.serveDecision)
	mux.HandleFunc("/promotions/{name}/decision", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		s.fail(w, r, http.StatusMethodNotAllowed, "a decision is posted from the promotion's page")
	})
	mux.HandleFunc("POST /promotions/{name}/rollout", s.serveRollout)
	mux.HandleFunc("/promotions/{name}/rollout", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		s.fail(w, r, http.StatusMethodNotAllowed, "a rollout request is posted from the promotion's page")
	})
	mux.HandleFunc("GET /releases/{name}", s.serveRelease)
	mux.HandleFunc("GET /fleet", s.serveFleet)
	mux.HandleFunc("GET /events", s.serveEvents)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "no such page: "+clip.String(r.URL.Path, 100))
	})
	var h http.Handler = mux
	if base := strings.TrimSuffix(s.opts.BasePath, "/"); base != "" {
		h = http.StripPrefix(base, h)
	}
	return s.secure(h)
}

// contentSecurityPolicy allows the dashboard's own script, style and
// connections only: no inline script or style, no frames, forms post to
// the dashboard only.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// secure sets the security headers of every answer and refuses hosts the
// dashboard is not served as.
func (s *Server) secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if len(s.opts.AllowedHosts) > 0 && !slices.Contains(s.opts.AllowedHosts, strings.ToLower(r.Host)) {
			s.fail(w, r, http.StatusMisdirectedRequest, "this dashboard is not served as host "+clip.String(r.Host, 100)+": open it through the address tugboat ui printed")
			return
		}
		if !s.checkAccess(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}
