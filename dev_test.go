package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/devenv"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// runMainEnv makes this test binary run main() instead of the tests: a test then runs `codeport
// dev` as a process of its own, to kill it, and that dev re-executes the binary as its guard.
const runMainEnv = "CODEPORT_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestDevStopsItsPostgresWhenKilled: dev killed with SIGKILL runs none of its shutdown, yet its
// embedded PostgreSQL stops, and the next dev on the state directory starts with the data kept.
func TestDevStopsItsPostgresWhenKilled(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	dev := startDevProcess(t, state)
	pid := postmasterPID(t, state)
	dev.signal(t, syscall.SIGKILL)
	waitForExit(t, pid, "the PostgreSQL of a dev killed with SIGKILL")

	again := startDevProcess(t, state)
	if again.sandboxKey() != dev.sandboxKey() {
		t.Fatal("the sandbox key changed: the next dev did not find the data of the killed one")
	}
	again.serves(t)
	again.stop(t)
}

// TestDevRefusesASecondDevOnItsStateDir: a second dev on the same state directory stops at once
// with one line naming the first, which goes on serving.
func TestDevRefusesASecondDevOnItsStateDir(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	first := startDevProcess(t, state)
	second := launchDev(t, state)
	poll.UntilTrue(t, 2*time.Minute, "the second dev ended", func() bool {
		select {
		case <-second.Exited():
			return true
		default:
			return false
		}
	})
	var exit *exec.ExitError
	if err := second.Wait(); !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("second dev: %v, want a non-zero exit\n%s", err, second.Log())
	}
	want := fmt.Sprintf("codeport: another codeport dev (pid %d) is using state directory %s; stop it first\n",
		first.PID(), state)
	if got := second.Log(); got != want {
		t.Fatalf("second dev wrote:\n%s\nwant:\n%s", got, want)
	}
	first.serves(t)
	first.stop(t)
}

// TestDevPrintsHowToReachItsDatabase: dev on its embedded PostgreSQL prints the database's URL
// and the commands that reach it, and those commands, pasted into a shell as printed (a file and
// a product filled in), run against the database dev serves from.
func TestDevPrintsHowToReachItsDatabase(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	dev := startDevProcess(t, state)
	defer dev.stop(t)
	_, printed, ok := strings.Cut(dev.Log(), "codeport dev: database postgres://codeport:codeport@127.0.0.1:")
	if !ok || !strings.Contains(printed, "(embedded PostgreSQL") {
		t.Fatalf("dev does not print its database's URL:\n%s", dev.Log())
	}
	_, printed, _ = strings.Cut(printed, "other commands reach it while dev runs, e.g. in another terminal:\n")
	var commands []string
	for _, line := range strings.Split(printed, "\n") {
		command, indented := strings.CutPrefix(line, "  ")
		if !indented {
			break
		}
		commands = append(commands, command)
	}
	if len(commands) != 3 || !strings.HasPrefix(commands[0], "export CODEPORT_DATABASE_URL=") {
		t.Fatalf("dev printed the commands %q:\n%s", commands, dev.Log())
	}
	codesFile := filepath.Join(t.TempDir(), "codes.txt")
	if err := os.WriteFile(codesFile, []byte("PRINTED-1\nPRINTED-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := strings.NewReplacer("PRODUCT_CODE", "10000000000001", "FILE", codesFile).
		Replace(strings.Join(commands, "\n"))
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	// The printed binary is this test binary, which runs codeport's main with this variable set.
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "CODEPORT_DATABASE_URL=", "CODEPORT_CODES_KEY=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the printed commands failed: %v\n%s\n--- script:\n%s", err, out, script)
	}
	for _, want := range []string{"running binaries (schema version", "imported 2 codes for 10000000000001"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the printed commands' output lacks %q:\n%s", want, out)
		}
	}
}

// TestDevStopsPostgresLeftRunning: a PostgreSQL left running by a dev that died with its guard
// (or by a dev from before guards) does not keep the next dev from starting: it is stopped.
func TestDevStopsPostgresLeftRunning(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	dev := startDevProcess(t, state)
	pid := postmasterPID(t, state)
	dev.killGroup(t)
	if !testprocess.Alive(pid) {
		t.Fatal("PostgreSQL ended with dev and its guard: this test needs it left running")
	}

	again := startDevProcess(t, state)
	waitForExit(t, pid, "the PostgreSQL the killed dev left running")
	if now := postmasterPID(t, state); now == pid {
		t.Fatalf("the new dev serves from the left-over server (pid %d)", pid)
	}
	again.serves(t)
	again.stop(t)
}

// devProcess is `codeport dev` on its embedded PostgreSQL, run as a process of its own (this test
// binary, see TestMain) in a process group of its own, which its guard shares. Its log holds the
// guard's output too, and its run ends only once the guard, which holds that output, has ended.
type devProcess struct {
	*testprocess.Process
	state string
	creds *devenv.Credentials
}

// startDevProcess runs dev on the sample manifests with state directory state until it is ready.
func startDevProcess(t *testing.T, state string) *devProcess {
	t.Helper()
	p := launchDev(t, state)
	p.creds = waitForDev(t, state, p.Log, p.Exited(), p.Wait)
	return p
}

// launchDev starts dev; should the test leave it running, it is stopped with its group.
func launchDev(t *testing.T, state string) *devProcess {
	t.Helper()
	p := testprocess.Start(t, &testprocess.Process{Name: "dev", Binary: os.Args[0],
		Args: []string{"dev", "--manifests", "config/samples", "--state-dir", state,
			"--production-addr", "127.0.0.1:0", "--sandbox-addr", "127.0.0.1:0"},
		Env: []string{runMainEnv + "=1", "CODEPORT_DATABASE_URL="}, Group: true})
	return &devProcess{Process: p, state: state}
}

func (p *devProcess) sandboxKey() string { return p.creds.Partners["partners/acme"]["sandbox"].APIKey }

// serves expects dev to answer a partner's request.
func (p *devProcess) serves(t *testing.T) {
	t.Helper()
	getJSON(t, p.creds.Partners["partners/acme"]["sandbox"].BaseURL+"/catalog/products?take=1", p.sandboxKey())
}

// signal sends sig to dev alone, not to its guard.
func (p *devProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// killGroup kills dev and its guard at once, and waits for both.
func (p *devProcess) killGroup(t *testing.T) {
	t.Helper()
	if err := p.SignalGroup(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err == nil {
		t.Fatal("dev exited 0 on SIGKILL")
	}
}

// stop interrupts dev as Ctrl-C does, the whole process group, and expects a clean exit with its
// PostgreSQL stopped by dev itself: the guard lives through the interrupt and has nothing to do.
func (p *devProcess) stop(t *testing.T) {
	t.Helper()
	pid := postmasterPID(t, p.state)
	before := len(p.Log())
	if err := p.SignalGroup(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("dev on SIGINT: %v\n%s", err, p.Log())
	}
	if out := p.Log()[before:]; strings.Contains(out, "level=") {
		t.Fatalf("dev's shutdown logged:\n%s", out)
	}
	waitForExit(t, pid, "the PostgreSQL of a dev stopped with SIGINT")
}

// postmasterPID is the PID postmaster.pid names in state's data directory. Should that server
// outlive the test, it is stopped (immediate shutdown) before the directory is removed.
func postmasterPID(t *testing.T, state string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(state, "postgres", "data", "postmaster.pid"))
	if err != nil {
		t.Fatalf("read postmaster.pid: %v", err)
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, err := strconv.Atoi(first)
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	t.Cleanup(func() {
		if testprocess.Alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGQUIT)
			waitForExit(t, pid, "left-over PostgreSQL after SIGQUIT")
		}
	})
	return pid
}

// waitForExit waits until process pid has exited.
func waitForExit(t *testing.T, pid int, what string) {
	t.Helper()
	poll.Until(t, 2*time.Minute, what+" (pid "+strconv.Itoa(pid)+") exited", func() (bool, string) {
		return !testprocess.Alive(pid), "still running"
	})
}
