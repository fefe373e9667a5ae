// Package promtest runs a real Prometheus server on loopback for tests: it
// scrapes the targets a test names (e.g. an httptest server exposing a
// gauge through promhttp) every second and answers PromQL over its HTTP
// API. The binary is built from the Go module proxy on first use
// (bins.EnsurePrometheus, cached under bin/prometheus), so tests need no
// manual step.
//
// It is a test helper: it is not used by tugboat itself.
package promtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"

	"tugboat.dev/tugboat/e2e/bins"
)

// ScrapeInterval is how often the server scrapes its targets.
const ScrapeInterval = time.Second

// Server is a running Prometheus.
type Server struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:40123 (no slash).
	URL string

	cmd  *exec.Cmd
	done chan struct{}
	log  *syncBuffer
	once sync.Once
}

// listening is the line Prometheus logs once its web server listens,
// which names the port it got (it is started on port 0).
var listening = regexp.MustCompile(`msg="Listening on".*address=(\S+)`)

// Start builds Prometheus if needed and runs it on a free loopback port
// (it listens on port 0 and says which port it got), with a fresh TSDB in
// a temporary directory, scraping targets (host:port, path /metrics) as
// job "test" every ScrapeInterval. It is stopped when the test ends.
func Start(t testing.TB, targets ...string) *Server {
	t.Helper()
	ctx := context.Background()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := bins.FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := bins.EnsurePrometheus(ctx, root, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = fmt.Sprintf("%q", tg)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
  - job_name: test
    static_configs:
      - targets: [%[2]s]
`, ScrapeInterval, strings.Join(quoted, ", "))
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Server{log: &syncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin,
		"--config.file="+configFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:0",
		"--log.level=info",
	)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.Stop)
	if err := s.waitReady(60 * time.Second); err != nil {
		t.Fatalf("prometheus: %v\n%s", err, s.log.String())
	}
	return s
}

// waitReady waits for the listening line and then for /-/ready to answer
// 200.
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-s.done:
			return errors.New("exited before it was ready")
		case <-deadline.C:
			return fmt.Errorf("not ready within %s", timeout)
		case <-tick.C:
		}
		if s.URL == "" {
			m := listening.FindStringSubmatch(s.log.String())
			if m == nil {
				continue
			}
			s.URL = "http://" + m[1]
		}
		resp, err := hc.Get(s.URL + "/-/ready")
		if err != nil {
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (s *Server) Stop() {
	s.once.Do(func() {
		if s.cmd.Process == nil {
			return
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
}

// Target serves collectors on /metrics of a loopback HTTP server (promhttp)
// until the test ends, and returns its host:port, for Start.
func Target(t testing.TB, collectors ...prometheus.Collector) string {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors...)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Query evaluates query now and returns its value as Prometheus writes it:
// a scalar's or a single sample's value, else the whole result.
func (s *Server) Query(ctx context.Context, query string) (string, error) {
	c, err := promapi.NewClient(promapi.Config{Address: s.URL})
	if err != nil {
		return "", err
	}
	v, _, err := promv1.NewAPI(c).Query(ctx, query, time.Now())
	if err != nil {
		return "", err
	}
	switch res := v.(type) {
	case *model.Scalar:
		return res.Value.String(), nil
	case model.Vector:
		if len(res) == 1 {
			return res[0].Value.String(), nil
		}
	}
	return v.String(), nil
}

// Log is what the server logged.
func (s *Server) Log() string { return s.log.String() }

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
