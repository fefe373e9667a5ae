// Package giteatest runs a real Gitea server on loopback for tests: git over
// smart HTTP and Gitea's pull-request API, backed by SQLite in a temporary
// directory. The binary is built from the Go module proxy on first use
// (bins.EnsureGitea, cached under bin/gitea), so tests need no manual step.
//
// It is a test helper: it is not used by tugboat itself.
package giteatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"code.gitea.io/sdk/gitea"

	"tugboat.dev/tugboat/e2e/bins"
)

// Admin account created in every server.
const (
	AdminUser  = "tugboat-admin"
	AdminEmail = "tugboat-admin@tugboat.dev"
)

// Server is a running Gitea.
type Server struct {
	// URL is the server's root URL, e.g. http://127.0.0.1:3456 (no slash).
	URL string
	// AdminPassword is AdminUser's password.
	AdminPassword string
	// Token is an access token of AdminUser with every scope.
	Token string
	// Dir holds the configuration, database and repositories.
	Dir string

	bin, config string
	secretKey   string
	internalTok string
	cmd         *exec.Cmd
	done        chan struct{}
	waitErr     error
	log         *syncBuffer
	stopOnce    sync.Once
}

// Options configure Start.
type Options struct {
	// RepoRoot is tugboat's repository root (where bin/ lives); found from
	// the working directory when empty.
	RepoRoot string
	// Dir is where the server keeps its state; a new temporary directory
	// when empty (removed by Stop).
	Dir string
	// Progress receives build progress lines; may be nil.
	Progress io.Writer
	// StartTimeout bounds waiting for the server to answer. Default 90 s.
	StartTimeout time.Duration
}

// Start builds Gitea if needed, prepares a fresh instance and serves it on a
// free loopback port. Call Stop when done.
func Start(ctx context.Context, opts Options) (s *Server, err error) {
	if opts.RepoRoot == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		if opts.RepoRoot, err = bins.FindRepoRoot(wd); err != nil {
			return nil, err
		}
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	bin, err := bins.EnsureGitea(ctx, opts.RepoRoot, opts.Progress)
	if err != nil {
		return nil, err
	}
	static, err := bins.GiteaSourceDir(ctx, opts.RepoRoot)
	if err != nil {
		return nil, err
	}
	dir := opts.Dir
	ownDir := dir == ""
	if ownDir {
		if dir, err = os.MkdirTemp("", "giteatest-"); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil && ownDir {
			_ = os.RemoveAll(dir)
		}
	}()
	s = &Server{
		Dir: dir, bin: bin, log: &syncBuffer{},
		AdminPassword: randomHex(12),
		secretKey:     randomHex(32),
		internalTok:   "tugboat-test-internal-token-" + randomHex(24),
	}

	// A port is picked by listening on :0; Gitea binds it a moment later.
	// Another process could take it in between, so retry a few times.
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		if err := s.configure(dir, static, port); err != nil {
			return nil, err
		}
		if attempt == 0 {
			if err := s.prepare(ctx); err != nil {
				return nil, err
			}
		}
		err = s.serve(ctx, opts.StartTimeout)
		if err == nil {
			break
		}
		if attempt >= 2 || !strings.Contains(s.log.String(), "address already in use") {
			return nil, err
		}
	}
	if err := s.createToken(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) configure(dir, static string, port int) error {
	for _, d := range []string{"custom/conf", "data", "repos", "log", "home"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o750); err != nil {
			return err
		}
	}
	runUser := "root"
	if u, err := user.Current(); err == nil {
		runUser = u.Username
	}
	s.URL = "http://127.0.0.1:" + strconv.Itoa(port)
	s.config = filepath.Join(dir, "custom", "conf", "app.ini")
	ini := fmt.Sprintf(`APP_NAME = tugboat test
RUN_MODE = prod
RUN_USER = %[1]s
WORK_PATH = %[2]s
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[3]d
DOMAIN = 127.0.0.1
ROOT_URL = %[4]s/
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
STATIC_ROOT_PATH = %[5]s
APP_DATA_PATH = %[2]s/data

[database]
DB_TYPE = sqlite3
PATH = %[2]s/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = %[2]s/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = %[6]s
INTERNAL_TOKEN = %[7]s
PASSWORD_HASH_ALGO = pbkdf2_hi

[oauth2]
ENABLED = false

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = false
ENABLE_NOTIFY_MAIL = false

[mailer]
ENABLED = false

[actions]
ENABLED = false

[packages]
ENABLED = false

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[queue]
TYPE = channel

[cron]
ENABLED = false

[cron.update_checker]
ENABLED = false

[git]
HOME_PATH = %[2]s/home

[log]
MODE = file
LEVEL = Warn
ROOT_PATH = %[2]s/log
`, runUser, dir, port, s.URL, static, s.secretKey, s.internalTok)
	return os.WriteFile(s.config, []byte(ini), 0o600)
}

// prepare creates the database and the admin user.
func (s *Server) prepare(ctx context.Context) error {
	if err := s.run(ctx, "migrate"); err != nil {
		return err
	}
	return s.run(ctx, "admin", "user", "create",
		"--username", AdminUser, "--password", s.AdminPassword, "--email", AdminEmail,
		"--admin", "--must-change-password=false")
}

// createToken asks the running server's API for an access token with every
// scope, authenticated as the admin. (Parsing the CLI's
// `generate-access-token` output proved fragile: under load Gitea may log
// to stdout after the token.)
func (s *Server) createToken(ctx context.Context) error {
	c, err := gitea.NewClient(s.URL, gitea.SetBasicAuth(AdminUser, s.AdminPassword), gitea.SetContext(ctx))
	if err != nil {
		return fmt.Errorf("gitea client: %w", err)
	}
	tok, _, err := c.CreateAccessToken(gitea.CreateAccessTokenOption{
		Name:   "tugboat-" + randomHex(4),
		Scopes: []gitea.AccessTokenScope{gitea.AccessTokenScopeAll},
	})
	if err != nil {
		return fmt.Errorf("creating gitea access token: %w", err)
	}
	if tok.Token == "" {
		return errors.New("gitea answered with an empty access token")
	}
	s.Token = tok.Token
	return nil
}

func (s *Server) command(ctx context.Context, args ...string) *exec.Cmd {
	args = append(args, "--config", s.config, "--work-path", s.Dir)
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(),
		"GITEA_WORK_DIR="+s.Dir,
		"GITEA_CUSTOM="+filepath.Join(s.Dir, "custom"),
		"HOME="+filepath.Join(s.Dir, "home"),
		"USER="+userName(),
	)
	return cmd
}

func (s *Server) run(ctx context.Context, args ...string) error {
	_, err := s.output(ctx, args...)
	return err
}

func (s *Server) output(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := s.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("gitea %s: %w\n%s%s", args[0], err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// serve starts `gitea web` and waits until the API answers.
func (s *Server) serve(ctx context.Context, timeout time.Duration) error {
	// The server outlives ctx (which may be a setup context); Stop ends it.
	cmd := s.command(context.WithoutCancel(ctx), "web")
	s.log.Reset()
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { s.waitErr = cmd.Wait(); close(s.done) }()

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-s.done:
			return fmt.Errorf("gitea web exited: %w\n%s%s", s.waitErr, s.log.String(), s.logFiles())
		case <-deadline.C:
			s.kill()
			return fmt.Errorf("gitea did not answer within %s\n%s%s", timeout, s.log.String(), s.logFiles())
		case <-ctx.Done():
			s.kill()
			return ctx.Err()
		case <-tick.C:
			resp, err := hc.Get(s.URL + "/api/v1/version")
			if err != nil {
				continue
			}
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
}

func (s *Server) logFiles() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(s.Dir, "log", "*.log"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if len(data) > 8<<10 {
			data = data[len(data)-8<<10:]
		}
		fmt.Fprintf(&b, "--- %s\n%s", filepath.Base(f), data)
	}
	return b.String()
}

func (s *Server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Stop ends the server and removes its directory.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.kill()
		_ = os.RemoveAll(s.Dir)
	})
}

// Logs returns the server's log files, for failure messages.
func (s *Server) Logs() string { return s.log.String() + s.logFiles() }

// Client returns an SDK client authenticated with the admin token.
func (s *Server) Client(ctx context.Context) (*gitea.Client, error) {
	return gitea.NewClient(s.URL, gitea.SetToken(s.Token), gitea.SetContext(ctx))
}

// CreateRepo creates an empty repository owned by the admin user and
// returns its clone URL.
func (s *Server) CreateRepo(ctx context.Context, name string) (string, error) {
	c, err := s.Client(ctx)
	if err != nil {
		return "", err
	}
	repo, _, err := c.CreateRepo(gitea.CreateRepoOption{Name: name, DefaultBranch: "main"})
	if err != nil {
		return "", fmt.Errorf("creating repository %s: %w", name, err)
	}
	return repo.CloneURL, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func userName() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "root"
}

// syncBuffer is a bytes.Buffer safe for a process's two output streams.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 {
		b.buf.Reset()
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}
