package devenv

import (
	"context"
	"log/slog"
	"os"
	"syscall"
	"testing"
)

// TestMain lets this test binary be the guard StartGuard re-executes (os.Executable is the test
// binary here, as it is codeport itself in dev).
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == GuardCommand {
		if err := RunGuard(os.Args[2], slog.New(slog.DiscardHandler)); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestGuardIgnoresCtrlCOnceStarted: a Ctrl-C reaches dev's whole process group, guard included,
// and may come the moment dev has started it. The guard must outlive it, until dev releases it.
// A signal sent before Release is delivered before the guard can exit, so a guard still taking
// SIGINT's default action would end by it and Release would say so.
func TestGuardIgnoresCtrlCOnceStarted(t *testing.T) {
	state := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	lock, err := LockStateDir(context.Background(), state, "state", log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Release() }()
	guard, err := StartGuard(state, lock, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		if err := guard.cmd.Process.Signal(sig); err != nil {
			t.Fatalf("%s: %v", sig, err)
		}
	}
	if err := guard.Release(); err != nil {
		t.Fatalf("the guard did not outlive a Ctrl-C sent as dev started it: %v", err)
	}
}
