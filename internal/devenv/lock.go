package devenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StateLock is the exclusive hold of one `codeport dev` on its state directory: two of them
// would share one PostgreSQL data directory, one credentials.json and one admitted/ store.
//
// It is an flock on <state-dir>/dev.lock rather than a PID file because the kernel drops an
// flock when the last process holding it dies, however it dies: a dev killed with SIGKILL
// never leaves a stale lock behind that blocks the next one.
type StateLock struct {
	file *os.File
}

// lockFile is the file, in the state directory, that StateLock flocks and names its holder in.
const lockFile = "dev.lock"

// cleanupWait bounds how long LockStateDir waits for the guard of a dev that died to stop that
// dev's PostgreSQL (pg_ctl's own waits are 60 s for each of its two attempts).
const cleanupWait = 3 * time.Minute

// LockStateDir takes stateDir for this process. When a live dev holds it, it fails at once with a
// one-line error naming that dev's PID and the directory as shownAs. When the holder is a dev that
// died and whose guard is still stopping its PostgreSQL (the guard inherits the lock, see
// StartGuard), it waits for the guard to finish, at most cleanupWait.
func LockStateDir(ctx context.Context, stateDir, shownAs string, log *slog.Logger) (*StateLock, error) {
	path := filepath.Join(stateDir, lockFile)
	// O_CLOEXEC (Go's default) matters: a child that inherited the descriptor (PostgreSQL) would
	// hold the lock after dev died. Only the guard gets it, on purpose.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	deadline := time.Now().Add(cleanupWait)
	warned := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		holder := readHolder(f)
		if holder > 0 && processRunning(holder) {
			f.Close()
			return nil, fmt.Errorf("another codeport dev (pid %d) is using state directory %s; stop it first",
				holder, shownAs)
		}
		// No PID yet: the holder has just taken the lock and is writing it; look again.
		if !warned && holder > 0 {
			warned = true
			log.Warn("state directory held by the guard of a codeport dev that ended; waiting for it to stop "+
				"that dev's PostgreSQL", slog.String("state_dir", shownAs), slog.Int("pid", holder))
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("state directory %s is still locked %s after its codeport dev (pid %d) ended",
				shownAs, cleanupWait, holder)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for state directory %s: %w", shownAs, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := writeHolder(f, os.Getpid()); err != nil {
		f.Close()
		return nil, fmt.Errorf("write lock file %s: %w", path, err)
	}
	return &StateLock{file: f}, nil
}

// Release gives the state directory up. It closes rather than unlocks: the lock belongs to the
// open file, which the guard shares, so the directory stays locked until the guard is done too.
func (l *StateLock) Release() error {
	if err := l.file.Close(); err != nil {
		return fmt.Errorf("release state directory lock: %w", err)
	}
	return nil
}

func readHolder(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		return 0
	}
	return pid
}

func writeHolder(f *os.File, pid int) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(pid)+"\n"), 0)
	return err
}

// processRunning tells whether pid is a process that has not exited. A zombie counts as exited:
// kill(pid, 0) alone would call it alive until its parent reaps it.
func processRunning(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		// Gone, or no /proc (macOS): the signal check answers either way.
		return syscall.Kill(pid, 0) == nil
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses, the state follows the last ')'.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	state := stat[i+2]
	return state != 'Z' && state != 'X'
}
