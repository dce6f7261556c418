package devenv

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"
)

// Why a guard process: PostgreSQL is a daemon of its own (pg_ctl starts it in a new session), so
// it outlives `codeport dev` unless someone stops it. dev stops it on a clean shutdown, but a
// panic in any goroutine, SIGKILL or the OOM killer end dev without running a line of its code.
// Nothing inside dev can react to those, and the kernel offers no "stop this daemon when I die"
// (PR_SET_PDEATHSIG reaches direct children only, and pg_ctl's postmaster is not one). So dev
// starts a small child, the guard, connected by a pipe whose write end only dev holds: the kernel
// closes it when dev exits for any reason, the guard reads end of file, and stops the PostgreSQL
// of the state directory if it is still running. The guard also holds dev's lock on the state
// directory until it is done, so a dev started meanwhile cannot have its new server stopped.
// What kills the guard with dev (SIGKILL to the whole process group) still leaves the server
// running; the next dev stops it before starting its own (StartEmbeddedPostgres).

// GuardCommand is the hidden subcommand of the codeport binary that runs RunGuard; StartGuard
// re-executes this binary with it.
const GuardCommand = "dev-guard"

// The descriptors StartGuard hands the guard, after stdin, stdout and stderr.
const (
	guardPipeFD  = 3
	guardLockFD  = 4
	guardReadyFD = 5 // the guard writes a byte there once signals cannot end it and it holds the lock
)

// guardStartTimeout bounds how long StartGuard waits for the guard to say it is ready: a new
// process of this binary, seconds on the busiest machine.
const guardStartTimeout = time.Minute

// Guard is dev's handle on its guard process.
type Guard struct {
	pipe     *os.File // the write end; it must never reach another process
	cmd      *exec.Cmd
	released atomic.Bool
	exited   chan struct{}
	err      error // the guard's exit, once exited is closed
}

// StartGuard starts the guard of stateDir's PostgreSQL, handing it lock; start it before the
// server. log receives a warning if the guard ends while dev still runs.
func StartGuard(stateDir string, lock *StateLock, log *slog.Logger) (*Guard, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("guard: find this executable: %w", err)
	}
	r, w, err := os.Pipe() // close-on-exec, so that PostgreSQL and pg_ctl never hold an end
	if err != nil {
		return nil, fmt.Errorf("guard: pipe: %w", err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("guard: pipe: %w", err)
	}
	defer readyR.Close()
	// Not bound to a context: the guard outlives this process by design.
	cmd := exec.CommandContext(context.Background(), exe, GuardCommand, stateDir) //nolint:gosec // this very binary
	cmd.ExtraFiles = []*os.File{guardPipeFD - 3: r, guardLockFD - 3: lock.file, guardReadyFD - 3: readyW}
	cmd.Stderr = os.Stderr
	err = cmd.Start()
	r.Close()
	readyW.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("guard: start %s %s: %w", exe, GuardCommand, err)
	}
	g := &Guard{pipe: w, cmd: cmd, exited: make(chan struct{})}
	go g.wait(log)
	// Until the guard ignores SIGINT, a Ctrl-C to the process group ends it, and dev would run
	// unguarded: dev goes on only once the guard is armed.
	if err := readyR.SetReadDeadline(time.Now().Add(guardStartTimeout)); err != nil {
		_ = g.Release()
		return nil, fmt.Errorf("guard: %w", err)
	}
	if _, err := io.ReadFull(readyR, make([]byte, 1)); err != nil {
		_ = g.cmd.Process.Kill()
		released := g.Release()
		return nil, fmt.Errorf("guard: not ready (%w): %w", err, released)
	}
	return g, nil
}

// wait reaps the guard. It runs on a goroutine of dev's own, so a panic there is logged rather
// than left to end dev without its deferred shutdown.
func (g *Guard) wait(log *slog.Logger) {
	defer close(g.exited)
	defer func() {
		if p := recover(); p != nil {
			log.Error("guard watcher panicked", slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
		}
	}()
	g.err = g.cmd.Wait()
	if !g.released.Load() {
		log.Warn("the guard of the embedded PostgreSQL ended early: should codeport dev die now, "+
			"the server would keep running", slog.Any("err", g.err))
	}
}

// Release tells the guard dev is done (call it after stopping PostgreSQL) and waits for it: it
// stops the server itself should that stop have failed.
func (g *Guard) Release() error {
	g.released.Store(true)
	if err := g.pipe.Close(); err != nil {
		return fmt.Errorf("guard: close pipe: %w", err)
	}
	<-g.exited
	if g.err != nil {
		return fmt.Errorf("guard: %w", g.err)
	}
	return nil
}

// RunGuard is the guard process: it waits until dev is gone, then stops the PostgreSQL of
// stateDir if dev left it running.
func RunGuard(stateDir string, log *slog.Logger) error {
	// Ctrl-C in a terminal reaches the whole process group: dev shuts down cleanly and closes the
	// pipe, and the guard must live until then. SIGHUP, should the terminal close, ends dev, not
	// the guard.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	// The inherited descriptors are not close-on-exec; pg_ctl must not hold the lock.
	syscall.CloseOnExec(guardPipeFD)
	syscall.CloseOnExec(guardLockFD)
	syscall.CloseOnExec(guardReadyFD)
	// Holding dev's lock is what makes stopping the server safe (no other dev can have started
	// one); it also refuses a guard started by hand, without dev's descriptors.
	if err := syscall.Flock(guardLockFD, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("%s is started by codeport dev only: no lock on %s: %w", GuardCommand, stateDir, err)
	}
	ready := os.NewFile(guardReadyFD, "codeport dev ready")
	_, err := ready.Write([]byte{1})
	if closeErr := ready.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("tell codeport dev the guard is ready: %w", err)
	}
	pipe := os.NewFile(guardPipeFD, "codeport dev pipe")
	// dev never writes: a read returns when dev closed the pipe or died, and either way it is time.
	_, _ = io.Copy(io.Discard, pipe)
	return stopLeftover(stateDir, log)
}
