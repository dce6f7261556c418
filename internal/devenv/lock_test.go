package devenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLockStateDirRefusesALiveHolder: while a dev holds the state directory, another one is
// refused with one line naming it.
func TestLockStateDirRefusesALiveHolder(t *testing.T) {
	state := t.TempDir()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	held, err := LockStateDir(ctx, state, "state", log)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockStateDir(ctx, state, "state", log)
	want := fmt.Sprintf("another codeport dev (pid %d) is using state directory state; stop it first", os.Getpid())
	if err == nil || err.Error() != want {
		t.Fatalf("second lock: %v, want %s", err, want)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := LockStateDir(ctx, state, "state", log)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	_ = again.Release()
}

// TestLockStateDirWaitsForTheGuardOfADeadDev: a lock still held after its dev ended is the guard
// stopping that dev's PostgreSQL; the next dev waits for it, and then holds the directory.
func TestLockStateDirWaitsForTheGuardOfADeadDev(t *testing.T) {
	state := t.TempDir()
	ctx := context.Background()
	held, err := LockStateDir(ctx, state, "state", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	dead := ended.Process.Pid
	if err := os.WriteFile(filepath.Join(state, lockFile), []byte(strconv.Itoa(dead)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The guard finishes once the waiting dev has said that it waits.
	waiting := make(chan struct{})
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		if strings.Contains(string(p), "waiting for it to stop") {
			close(waiting)
		}
		return len(p), nil
	}), nil))
	got := make(chan error, 1)
	go func() {
		lock, err := LockStateDir(ctx, state, "state", log)
		if err == nil {
			err = lock.Release()
		}
		got <- err
	}()
	<-waiting
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("lock after the guard finished: %v", err)
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
