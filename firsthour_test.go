package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMakeRunStopsCleanlyOnInterrupt: Ctrl-C (SIGINT to the terminal's whole process group) on
// `make run` stops dev, which exits 0, so make reports no error. The binary is this test's own
// (BIN_DIR), and make does not rebuild it (-o build).
func TestMakeRunStopsCleanlyOnInterrupt(t *testing.T) {
	makePath, err := exec.LookPath("make")
	if err != nil {
		t.Fatal("make is not installed: apt-get install make")
	}
	bin := t.TempDir()
	if err := os.Symlink(os.Args[0], filepath.Join(bin, "codeport")); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	cmd := exec.Command(makePath, "--no-print-directory", "-o", "build", "run", "BIN_DIR="+bin,
		"DEV_FLAGS=--state-dir "+state+" --production-addr 127.0.0.1:0 --sandbox-addr 127.0.0.1:0")
	cmd.Env = append(childEnv(t.TempDir()), runMainEnv+"=1")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	waitForDev(t, state, out, done)
	postmaster := postmasterPID(t, state)

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = <-done
	// make itself got the SIGINT too: once its recipe has ended, it ends by that signal, quietly.
	var exit *exec.ExitError
	interrupted := errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT
	if err != nil && !interrupted {
		t.Errorf("make run on SIGINT: %v", err)
	}
	if text := out.String(); strings.Contains(text, "make: ***") || !strings.Contains(text, "codeport dev: stopped") {
		t.Errorf("make run on SIGINT did not stop cleanly:\n%s", text)
	}
	waitForExit(t, postmaster, "the PostgreSQL of make run")
}

// childEnv is this process's environment without what would let a child find a database, a
// codes key or a cluster other than the ones a test gives it, and with HOME home.
func childEnv(home string) []string {
	env := []string{"HOME=" + home}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "CODEPORT_") || strings.HasPrefix(name, "KUBERNETES_") ||
			name == "KUBECONFIG" || name == "HOME" {
			continue
		}
		env = append(env, kv)
	}
	return env
}
