package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one child of a cluster. It runs in a process group of its own,
// so that stopping it also stops anything it forked, and with a parent-death
// signal, so that it dies with the process that started it even when that
// process is killed without running its cleanups.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	env     []string // extra environment, kept for a restart
	done    chan struct{}
	err     error // set before done is closed
}

// spawner starts every child from one goroutine locked to one OS thread that
// never exits: Linux sends the parent-death signal when the *thread* that
// forked a child exits, and Go may retire other threads at any time.
type spawnRequest struct {
	cmd   *exec.Cmd
	reply chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnRequest
)

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for req := range spawnCh {
				req.reply <- req.cmd.Start()
			}
		}()
	})
	reply := make(chan error, 1)
	spawnCh <- spawnRequest{cmd: cmd, reply: reply}
	return <-reply
}

// startProcess starts binary with args, appending its output to logPath.
func startProcess(name, binary string, args []string, logPath string, env []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := spawn(cmd); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, env: env, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id (also its process group id).
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		if p.err == nil {
			return true, errors.New("exited")
		}
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace, and
// waits for the process to be reaped.
func (p *process) stop(grace time.Duration) {
	if ok, _ := p.exited(); ok {
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL) // stragglers of the group
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	<-p.done
}

// restart starts the same command line again, appending to the same log.
func (p *process) restart() (*process, error) {
	return startProcess(p.name, p.cmd.Path, p.cmd.Args[1:], p.logPath, p.env)
}

// tail returns the last n bytes of the process's log, for error messages.
func (p *process) tail(n int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(fi.Size()-n, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	return strings.TrimSpace(string(data))
}

// waitFor polls check every interval until it returns true, ctx ends, or one
// of procs exits, whichever comes first.
func waitFor(ctx context.Context, what string, interval time.Duration, procs []*process, check func(context.Context) bool) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if check(ctx) {
			return nil
		}
		for _, p := range procs {
			if ok, err := p.exited(); ok {
				return fmt.Errorf("waiting for %s: %s: %w; last log lines:\n%s", what, p.name, err, p.tail(2048))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-ticker.C:
		}
	}
}

// ProcessAlive reports whether pid names a live (not zombie) process.
func ProcessAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state is the field after the parenthesised command name.
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// Process is a child process started with StartProcess: in its own process
// group, dying with its parent, output appended to a log file.
type Process struct{ p *process }

// StartProcess starts binary with args, appending its output to logPath.
func StartProcess(name, binary string, args []string, logPath string) (*Process, error) {
	p, err := startProcess(name, binary, args, logPath, nil)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// PID returns the process id (also its process group id).
func (p *Process) PID() int { return p.p.pid() }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) { return p.p.exited() }

// Stop sends SIGTERM to the process group, then SIGKILL after grace, and
// waits for the process.
func (p *Process) Stop(grace time.Duration) { p.p.stop(grace) }

// Tail returns the last n bytes of the process's log.
func (p *Process) Tail(n int64) string { return p.p.tail(n) }
